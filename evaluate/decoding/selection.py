"""The decoder's settings, chosen once on the select data set: every setting's Jaccard, the best by mean.

docs/design.md §5. The sweep's grid masks (`decoders.shards`) of the reference checkpoint on the select data set
are scored against its labels: per image, the union of a setting's masks at the image's own size against the
non-crowd ground truth (`evaluate.scores.masks.jaccard`; images without non-crowd ground truth are left out). The
selected setting is the one of highest mean Jaccard; among equal means the first in the grid's order.

`select_setting` is the select job's entry: the labels opened once on the record (`evaluate.ledger.scoring`), or
the earlier selection's record reused when its inputs, code and settings are the same, then `selected.yaml`, the
sweep table and the sweep record written.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from decoders.masks import grid_to_image
from decoders.shards import read_sweep
from evaluate.scores.measures import PERCENT
from evaluate.scores import ScoreError
from evaluate.scores.bootstrap import bootstrap_ci
from evaluate.scores.masks import jaccard

if TYPE_CHECKING:
    from evaluate.ledger.scoring import Scoring

log = logging.getLogger("evaluate.decoding.selection")


@dataclass
class SweepJaccard:
    """Per-image Jaccard (fraction) of every setting: table float64 (n scored images, S settings)."""

    settings: list[str]
    image_ids: list[int]
    left_out: list[int]
    table: np.ndarray


def sweep_jaccard(dataset: Any, sweep_files: Sequence[str], sizes: dict[int, tuple[int, int]],
                  grid: Sequence[int]) -> SweepJaccard:
    """Score every setting of the sweep shards against `dataset`'s ground truth (a CocoDataset). grid: the (gh, gw)
    patch grid the sweep's masks are on (the swept features' keys480 grid)."""
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
                union = shard.union(row, s, grid)
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


def selection_summary(rows: Sequence[dict], setting: str, *, decoder: Any, opening_row_sha256: str) -> dict:
    """selected.yaml's content: the chosen `setting` (its fields through the decoder's `Settings`), its mean Jaccard
    and interval, data set, checkpoint and image counts from its sweep table row, the number of settings, and the
    selection's opening row."""
    best = next(row for row in rows if row["setting"] == setting)
    settings = decoder.Settings.from_name(setting)
    return {
        "decoder": decoder.NAME, "name": settings.name, "settings": settings.to_dict(),
        "jaccard": best["value"], "ci_low": best["ci_low"], "ci_high": best["ci_high"],
        "dataset": best["dataset"], "checkpoint": best["checkpoint"], "n_images": best["n_images"],
        "n_left_out": best["n_left_out"], "n_settings": len(rows), "opening_row_sha256": opening_row_sha256,
    }


def select_setting(scoring: Scoring, *, decoder: dict, sweep_files: Sequence[str | os.PathLike],
                   manifest_file: str | os.PathLike, images: str, annotations: str, resamples: int, seed: int,
                   code: str, out_selected: str | os.PathLike, out_table: str | os.PathLike,
                   out_record: str | os.PathLike) -> dict:
    """The select job: open the select data set's labels once, score every setting of the sweep, keep the best by
    mean Jaccard; write `selected.yaml` (returned), the sweep table and the sweep record (docs/design.md §5, §7).

    scoring: the reference checkpoint on the select data set; decoder: the config's `decoder` section (its name and
    the grid the sweep shards hold); sweep_files: the sweep shards in shard order; code: the job's code hash.
    A re-run on byte-identical sweep shards, manifest and annotations with the same decoder, code and bootstrap
    writes the earlier record, sweep table and selected.yaml again, byte for byte, and opens no labels.
    """
    import yaml

    from decoders import get_decoder, sweep_settings
    from evaluate.datasets.coco import CocoDataset, manifest_sizes
    from evaluate.ledger.scoring import Scored, score_on_record
    from evaluate.plumbing.atomic import read_json, write_text
    from evaluate.pixels.geometry import Geometry
    from evaluate.scores.measures import make_measure

    chosen = get_decoder(decoder["name"])
    manifest = read_json(manifest_file)
    sweep_files = [str(f) for f in sweep_files]
    side = Geometry.from_meta(read_json(scoring.features_meta)).keys480_grid  # the swept keys' grid

    def select(dataset: Any) -> Scored:
        sweep = sweep_jaccard(dataset, sweep_files, manifest_sizes(manifest), (side, side))
        best = best_setting(sweep, annotations)
        rows = sweep_rows(sweep, decoder=chosen, checkpoint=scoring.checkpoint, dataset=scoring.dataset,
                          resamples=resamples, seed=seed)
        measure = make_measure("jaccard", image_ids=sweep.image_ids, per_image=sweep.table[:, best].tolist(),
                               reducer="mean", n_left_out=len(sweep.left_out), resamples=resamples, seed=seed)
        return Scored(measures=[measure], setting=sweep.settings[best], result=rows)

    record, rows = score_on_record(
        scoring, kind="sweep", role="select", purpose="select",
        setting=f"sweep of {len(sweep_settings(decoder))} settings", reading=chosen.READS, decoder=chosen.NAME,
        n_images=len(manifest["image_ids"]),
        out_record=out_record, decided_by=[*sweep_files, manifest_file, annotations],
        settings={"code": code, "decoder": chosen.NAME, "resamples": resamples, "seed": seed},
        open_dataset=lambda: CocoDataset(images, annotations), score=select, chooses_setting=True,
    )
    write_text(out_table, rows_csv(rows))
    selected = selection_summary(rows, record["setting"], decoder=chosen,
                                 opening_row_sha256=record["opening_row_sha256"])
    write_text(out_selected, yaml.safe_dump(selected, sort_keys=False))
    log.info("selected %s: Jaccard %.2f [%.2f, %.2f] on %d images", selected["name"], selected["jaccard"],
             selected["ci_low"], selected["ci_high"], selected["n_images"])
    return selected
