"""What the scoring jobs share: opening a data set's labels in the run's ledger, a record's identity fields, and
reusing an eval record whose inputs were scored before (docs/design.md §7).

Reuse: Snakemake re-runs a scoring job whenever an input is rewritten, even with the same bytes: with
`features.keep: false` a re-decode re-extracts the shard, so every probe and decoder score of it would open the eval
labels again for the same numbers. So each eval record is also kept under its reuse key, the sha256 of everything
that decides it (the bytes of its input files, the job's code hash and settings, the checkpoint's identity); a job
whose key is already in `results/ledger/reuse/` writes that record again, byte for byte, and opens no labels.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from evaluate.plumbing.paths import LEDGER, OPENINGS, SCORE_REUSE

log = logging.getLogger("evaluate.ledger.scoring")


def open_labels(config: dict, dataset: Any, dataset_name: str, *, role: str, purpose: str, checkpoint: str,
                setting: str, n_images: int):
    """`evaluate.ledger.openings.opening` of a data set of this run, in the run's ledger.

    Its seal and budget come from the run's config (read at run time, so raising a budget is recorded, not a
    reason to re-run jobs). dataset: the opened `CocoDataset` (for its annotations' sha256).
    """
    from evaluate.ledger.openings import opening

    entry = config["datasets"][dataset_name]
    return opening(
        LEDGER, dataset=dataset_name, role=role, purpose=purpose, checkpoint=checkpoint, setting=setting,
        n_images=n_images, annotations_sha256=dataset.annotations_sha256, sealed=entry["sealed"],
        budget=entry.get("budget"),
    )


def record_identity(config: dict, checkpoint: dict, features_meta: str | os.PathLike, dataset: str, role: str) -> dict:
    """The fields every scoring record shares: the checkpoint (name, run, epoch, and its sha256 and architecture as
    the features' meta.json recorded them when the file was read), the data set, the role and the config's hash."""
    from evaluate.plumbing.atomic import read_json
    from evaluate.ledger.records import ARCHITECTURE_FIELDS
    from evaluate.plumbing.provenance import config_hash

    meta = read_json(features_meta)
    return {
        "checkpoint": checkpoint["name"],
        "run": checkpoint["run"],
        "epoch": checkpoint["epoch"],
        "checkpoint_sha256": meta["checkpoint_sha256"],
        **{key: meta.get(key) for key in ARCHITECTURE_FIELDS},
        "dataset": dataset,
        "role": role,
        "config_hash": config_hash(config),
    }


def reuse_key(files: Iterable[str | os.PathLike], values: dict) -> str:
    """sha256 of what decides a record: the bytes of `files`, in order, and `values` (canonical JSON)."""
    from evaluate.plumbing.provenance import sha256_file, sha256_json

    return sha256_json({"files": [sha256_file(f) for f in files], "values": values})


def reusable_record(path: Path, expected: dict) -> dict | None:
    """The record kept at `path` when it can stand for a new scoring: intact (its hash checks), of the same job
    (`expected`: kind, checkpoint, dataset, role, setting) and citing an opening row that this ledger's
    openings.csv holds. None otherwise (absent, or why is logged)."""
    from evaluate.ledger import LedgerError
    from evaluate.ledger.openings import read_openings
    from evaluate.ledger.records import read_record

    if not path.is_file():
        return None
    try:
        record = read_record(path)
        rows = {row["row_sha256"] for row in read_openings(OPENINGS)}
    except LedgerError as exc:
        log.warning("not reusing %s: %s", path, exc)
        return None
    differs = [key for key, value in expected.items() if record.get(key) != value]
    if differs:
        log.warning("not reusing %s: its %s differ from this job's", path, ", ".join(differs))
        return None
    if record["opening_row_sha256"] not in rows:
        log.warning("not reusing %s: the opening it cites is not in %s", path, OPENINGS)
        return None
    return record


def score_eval_set(config: dict, *, open_dataset: Callable[[], Any], dataset_name: str, checkpoint: dict,
                   features_meta: str | os.PathLike, kind: str, purpose: str, setting: str, n_images: int,
                   out_record: str | os.PathLike, decided_by: Iterable[str | os.PathLike], settings: dict,
                   score: Callable[[Any], tuple[list[dict], dict]]) -> list[dict]:
    """Score a checkpoint on an eval data set, on the record: open its labels once, run `score(dataset)` (-> the
    record's measures and any further record fields drawn from the labels, e.g. each image's categories), write the
    ledger record (kind decoder or probe) with the opening's row hash; return the measures.

    open_dataset: makes the `CocoDataset` (called only when the record is not reused, so a reused record reads no
      annotations); score: everything else that only scoring needs (masks, probe weights) is read inside it.

    decided_by: the input files whose bytes decide the record (features or masks, probe weights, annotations,
      manifest); settings: the job's code hash and the settings it scores with (bootstrap). With the checkpoint's
      identity and the setting they make the reuse key (module docstring): a key scored before is not scored again.
    """
    from evaluate.plumbing.atomic import write_bytes
    from evaluate.ledger.records import make_record, write_record
    from evaluate.plumbing.provenance import sha256_json

    started = time.time()
    identity = record_identity(config, checkpoint, features_meta, dataset_name, "eval")
    values = {**{k: v for k, v in identity.items() if k != "config_hash"}, "kind": kind, "setting": setting,
              "purpose": purpose, "n_images": int(n_images), "settings": settings}
    kept = Path(SCORE_REUSE.format(key=reuse_key(decided_by, values)))
    reused = reusable_record(kept, {k: values[k] for k in ("kind", "checkpoint", "dataset", "role", "setting")})
    if reused is not None:
        write_record(out_record, reused, replace=True)
        log.info("%s: the same inputs, code and settings were scored before; their record is reused from %s, "
                 "and the labels of %s are not opened again", out_record, kept, dataset_name)
        return reused["measures"]
    dataset = open_dataset()
    with open_labels(config, dataset, dataset_name, role="eval", purpose=purpose, checkpoint=checkpoint["name"],
                     setting=setting, n_images=n_images) as labels:
        measures, fields = score(dataset)
        labels.result_sha256 = sha256_json(measures)
    record = make_record(kind=kind, setting=setting, opening_row_sha256=labels.row_sha256, measures=measures,
                         started=started, **identity)
    write_record(out_record, {**record, **fields}, replace=True)
    write_bytes(kept, Path(out_record).read_bytes())
    return measures
