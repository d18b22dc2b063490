"""What the scoring jobs share: opening a data set's labels in the run's ledger, and a record's identity fields."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from evaluate.paths import LEDGER


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
    from evaluate.atomic import read_json
    from evaluate.ledger.records import ARCHITECTURE_FIELDS
    from evaluate.provenance import config_hash

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


def score_eval_set(config: dict, *, dataset: Any, dataset_name: str, checkpoint: dict,
                   features_meta: str | os.PathLike, kind: str, purpose: str, setting: str, n_images: int,
                   out_record: str | os.PathLike,
                   score: Callable[[], tuple[list[dict], dict]]) -> list[dict]:
    """Score a checkpoint on an eval data set, on the record: open its labels once, run `score` (-> the record's
    measures and any further record fields drawn from the labels, e.g. each image's categories), write the ledger
    record (kind decoder or probe) with the opening's row hash; return the measures."""
    from evaluate.ledger.records import make_record, write_record
    from evaluate.provenance import sha256_json

    started = time.time()
    identity = record_identity(config, checkpoint, features_meta, dataset_name, "eval")
    with open_labels(config, dataset, dataset_name, role="eval", purpose=purpose, checkpoint=checkpoint["name"],
                     setting=setting, n_images=n_images) as labels:
        measures, fields = score()
        labels.result_sha256 = sha256_json(measures)
    record = make_record(kind=kind, setting=setting, opening_row_sha256=labels.row_sha256, measures=measures,
                         started=started, **identity)
    write_record(out_record, {**record, **fields}, replace=True)
    return measures
