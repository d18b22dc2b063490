"""The decoder's settings, chosen once on the select data set: every setting's Jaccard, the best by mean.

docs/design.md §5. The sweep's grid masks (`decoders.shards`) of the reference checkpoint on the select data set
are scored against its labels: per image, the union of a setting's masks at the image's own size against the
non-crowd ground truth (`evaluate.scores.masks.jaccard`; images without non-crowd ground truth are left out). The
selected setting is the one of highest mean Jaccard; among equal means the first in the grid's order.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from decoders.masks import grid_to_image
from decoders.shards import read_sweep
from evaluate.scores.measures import PERCENT
from evaluate.scores import ScoreError
from evaluate.scores.bootstrap import bootstrap_ci
from evaluate.scores.masks import jaccard


@dataclass
class SweepJaccard:
    """Per-image Jaccard (fraction) of every setting: table float64 (n scored images, S settings)."""

    settings: list[str]
    image_ids: list[int]
    left_out: list[int]
    table: np.ndarray


def sweep_jaccard(dataset: Any, sweep_files: Sequence[str], sizes: dict[int, tuple[int, int]]) -> SweepJaccard:
    """Score every setting of the sweep shards against `dataset`'s ground truth (a CocoDataset)."""
    settings: list[str] | None = None
    ids: list[int] = []
    left_out: list[int] = []
    rows: list[list[float]] = []
    for path in sweep_files:
        shard = read_sweep(path)
        if settings is None:
            settings = shard.settings
        elif shard.settings != settings:
            raise ScoreError(f"{path}: its settings differ from the other sweep shards'; re-run the sweep")
        for row, image_id in enumerate(shard.image_ids.tolist()):
            objects, crowd = dataset.ground_truth(image_id)
            h, w = sizes[image_id]
            unions: dict[bytes, float | None] = {}
            values = []
            for s in range(len(settings)):
                union = shard.union(row, s)
                key = union.tobytes()
                if key not in unions:
                    unions[key] = jaccard(grid_to_image(union, h, w), objects, crowd)
                values.append(unions[key])
            if values[0] is None:
                left_out.append(image_id)
            else:
                ids.append(image_id)
                rows.append(values)
    names = settings or []
    return SweepJaccard(names, ids, left_out, np.asarray(rows, dtype=np.float64).reshape(len(ids), len(names)))


def best_setting(sweep: SweepJaccard, where: str) -> int:
    """Index of the setting of highest mean Jaccard; the first of equal means (the grid's order decides)."""
    if not sweep.image_ids:
        raise ScoreError(f"{where}: no image of the select data set has non-crowd ground truth, so no setting can "
                         "be chosen")
    return int(np.argmax(sweep.table.mean(axis=0)))


def sweep_rows(sweep: SweepJaccard, *, decoder: Any, checkpoint: str, dataset: str, resamples: int,
               seed: int) -> list[dict]:
    """One row per setting for sweep.csv: mean Jaccard (%) with its bootstrap interval, and the setting's fields
    (`decoder.Settings.from_name`; decoder: the registry's entry, `decoders.get_decoder`)."""
    rows = []
    for s, name in enumerate(sweep.settings):
        value, lo, hi = bootstrap_ci(sweep.table[:, s], "mean", resamples=resamples, seed=seed)
        rows.append({"setting": name, "value": PERCENT * value, "ci_low": PERCENT * lo, "ci_high": PERCENT * hi,
                     "n_images": len(sweep.image_ids), "n_left_out": len(sweep.left_out), "checkpoint": checkpoint,
                     "dataset": dataset, **decoder.Settings.from_name(name).to_dict()})
    return rows


def rows_csv(rows: Sequence[dict]) -> str:
    """sweep.csv's text: a header of the rows' keys, one line per row."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
