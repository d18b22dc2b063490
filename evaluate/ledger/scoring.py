"""Scoring on the record: every job that reads labels opens them here, in the run's ledger, and writes its record
here (docs/design.md §7).

A `Scoring` says who is scored on which data set, and what the run's config says of it when the job runs (the data
set's seal and budget, the config's hash). `open_labels` opens the data set's labels (an openings row);
`score_on_record` does a whole scoring: it reuses the record of the same inputs, code and settings when one is kept
(`evaluate.ledger.reuse`), and otherwise opens the labels once, scores, writes the record and keeps it.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from evaluate.plumbing.paths import LEDGER

if TYPE_CHECKING:
    from evaluate.plumbing.config import RunTime

log = logging.getLogger("evaluate.ledger.scoring")


@dataclass(frozen=True)
class Scoring:
    """A checkpoint scored on a data set's labels, as the ledger records it.

    checkpoint, run, epoch: the checkpoint's name and where it belongs; features_meta: the `meta.json` of its first
    feature shard of the data set the job reads, which says what its file was (sha256, architecture); dataset: the
    data set's name; sealed, budget (None: unlimited), config_hash: what the run's config says when the job runs
    (`evaluate.plumbing.config.RunTime`).
    """

    checkpoint: str
    run: str
    epoch: int
    features_meta: Path
    dataset: str
    sealed: bool
    budget: int | None
    config_hash: str

    @classmethod
    def of(cls, checkpoint: Mapping[str, Any], dataset: str, features_meta: str | os.PathLike,
           run_time: RunTime) -> Scoring:
        """From what a scoring rule passes its job: the checkpoint's params (name, run, epoch), the data set's name,
        the features' meta.json and the run-time values."""
        return cls(checkpoint=checkpoint["name"], run=checkpoint["run"], epoch=checkpoint["epoch"],
                   features_meta=Path(features_meta), dataset=dataset, sealed=run_time.sealed,
                   budget=run_time.budget, config_hash=run_time.config_hash)


def open_labels(scoring: Scoring, annotations_sha256: str, *, role: str, purpose: str, setting: str, n_images: int):
    """`evaluate.ledger.openings.opening` of the scoring's data set in the run's ledger, with its seal and budget
    (a context manager; set `result_sha256` on what it yields before leaving it)."""
    from evaluate.ledger.openings import opening

    return opening(
        LEDGER, dataset=scoring.dataset, role=role, purpose=purpose, checkpoint=scoring.checkpoint, setting=setting,
        n_images=n_images, annotations_sha256=annotations_sha256, sealed=scoring.sealed, budget=scoring.budget,
    )


def record_identity(scoring: Scoring, role: str) -> dict:
    """The fields every scoring record shares: the checkpoint (name, run, epoch, and its sha256, architecture, form
    and geometry as the features' meta.json recorded them when the file was read), the network's precision in the features
    (`features.precision`; None for features written before it was recorded), the data set, the role and the
    config's hash."""
    from evaluate.networks import IDENTITY_FIELDS
    from evaluate.plumbing.atomic import read_json

    meta = read_json(scoring.features_meta)
    return {
        "checkpoint": scoring.checkpoint,
        "run": scoring.run,
        "epoch": scoring.epoch,
        "checkpoint_sha256": meta["checkpoint_sha256"],
        **{key: meta.get(key) for key in IDENTITY_FIELDS},
        "precision": meta.get("precision"),
        "dataset": scoring.dataset,
        "role": role,
        "config_hash": scoring.config_hash,
    }


@dataclass
class Scored:
    """What a scoring drew from the labels: the record's `measures` and further record `fields` (e.g. each image's
    categories); `setting`, the record's setting where the scoring chose it (the selection); `result`, what the
    opening row hashes where it is not the measures (the selection's sweep table rows), kept beside the record."""

    measures: list[dict]
    fields: dict = field(default_factory=dict)
    setting: str | None = None
    result: Any = None


def score_on_record(scoring: Scoring, *, kind: str, role: str, purpose: str, setting: str, reading: str,
                    decoder: str | None, n_images: int, out_record: str | os.PathLike,
                    decided_by: Iterable[str | os.PathLike], settings: dict, open_dataset: Callable[[], Any],
                    score: Callable[[Any], Scored], chooses_setting: bool = False) -> tuple[dict, Any]:
    """Score on the record: reuse the kept record of the same inputs, code and settings, or open the data set's
    labels once, run `score(dataset)`, write the record (`kind`, `role`) with the opening's row hash and keep it.
    Returns (the record, its result: what its opening row hashes).

    reading, decoder: what made the record's numbers (`evaluate.ledger.records.make_record`).
    setting: the opening row's setting, and the record's unless `chooses_setting` (then `score` returns it): a
      scoring that chooses its setting (the selection) keeps its result beside its record, which holds only the
      chosen setting's measure.
    open_dataset: makes the `CocoDataset` (called only when nothing is reused, so a reused record reads no
      annotations); score: everything else that only scoring needs (masks, probe weights) is read inside it.
    decided_by: the input files whose bytes decide the record (features or masks, probe weights, sweep shards,
      annotations, manifest); settings: the job's code hash and the settings it scores with. With the checkpoint's
      identity, the data set, kind, purpose, setting and image count they make the reuse key
      (`evaluate.ledger.reuse`); the config's hash stays out of it (a change elsewhere in the config does not change
      this number).
    """
    from evaluate.ledger.records import make_record, write_record
    from evaluate.ledger.reuse import keep_scoring, kept_scoring, reuse_key
    from evaluate.plumbing.provenance import sha256_json

    started = time.time()
    identity = record_identity(scoring, role)
    values = {**{k: v for k, v in identity.items() if k != "config_hash"}, "kind": kind, "setting": setting,
              "reading": reading, "decoder": decoder, "purpose": purpose, "n_images": int(n_images),
              "settings": settings}
    key = reuse_key(decided_by, values)
    expected = {k: values[k] for k in ("kind", "checkpoint", "dataset", "role", "setting")}
    if chooses_setting:  # its record names the setting it chose, not the opening's
        del expected["setting"]
    kept = kept_scoring(key, expected, result_beside=chooses_setting)
    if kept is not None:
        write_record(out_record, kept.record, replace=True)
        log.info("%s: the same inputs, code and settings were scored before; their record is reused, and the labels "
                 "of %s are not opened again", out_record, scoring.dataset)
        return kept.record, kept.result
    dataset = open_dataset()
    with open_labels(scoring, dataset.annotations_sha256, role=role, purpose=purpose, setting=setting,
                     n_images=n_images) as labels:
        scored = score(dataset)
        result = scored.measures if scored.result is None else scored.result
        labels.result_sha256 = sha256_json(result)
    record = make_record(kind=kind, setting=scored.setting if chooses_setting else setting, reading=reading,
                         decoder=decoder, opening_row_sha256=labels.row_sha256, measures=scored.measures, started=started, **identity)
    record = {**record, **scored.fields}
    write_record(out_record, record, replace=True)
    keep_scoring(key, out_record, scored.result)
    return record, result
