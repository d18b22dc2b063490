"""The saliency stage's entries (docs/design.md §16): reading, scoring.

Files:
- a checkpoint's reading of a shard, `results/saliency/{checkpoint}/{dataset}/{shard}.npz`, and beside it the
  runner's meta `{shard}.json` (`evaluate.readings.saliency`, read through the one runner);
- one ledger record per checkpoint and data set (kind `saliency`): TokenCut's three measures and PySODMetrics' four on
  the decoder's mask, and the same seven with the suffix `_bs` on the solver's soft map.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Sequence

import numpy as np

log = logging.getLogger("evaluate.saliency.protocol")

FIGURE_IMAGES = 4  # the first images of a set whose readings a record keeps for the figures


def read_shard(*, checkpoint: dict, checkpoint_file: str | os.PathLike, spec: dict,
               manifest_file: str | os.PathLike, shard: str, out_reading: str | os.PathLike,
               out_meta: str | os.PathLike, features: dict) -> dict:
    """TokenCut's reading (`evaluate.readings.saliency`) of one shard by one checkpoint through the one runner, with
    the solver where `spec["bilateral"]`; returns the meta."""
    from evaluate.readings.runner import run_reading
    from evaluate.readings.saliency import SALIENCY, write_readings

    return run_reading(SALIENCY, lambda run: write_readings(run, out_reading, bilateral=bool(spec["bilateral"])),
                       checkpoint=checkpoint, checkpoint_file=checkpoint_file, spec=spec, manifest_file=manifest_file,
                       shard=shard, meta_out=out_meta, features=features)


def score_saliency(scoring: Any, *, spec: dict, manifest_file: str | os.PathLike,
                   reading_files: Sequence[str | os.PathLike], meta_files: Sequence[str | os.PathLike],
                   resamples: int, seed: int, code: str, out_record: str | os.PathLike) -> dict:
    """TokenCut's and PySODMetrics' measures of one checkpoint on one saliency set, before and (where the reading
    ran the solver) after the solver: opens the masks once (or reuses the record of the same inputs), writes the
    record (kind `saliency`) and returns it. Images are scored one at a time: a set need not fit in memory."""
    from decoders.bilateral import TOKENCUT_SOLVER, refined_from_vertices
    from evaluate.datasets import open_dataset
    from evaluate.datasets.manifest import check_listed
    from evaluate.datasets.saliency import read_image, read_mask_levels
    from evaluate.ledger.scoring import Scored, score_on_record
    from evaluate.plumbing.atomic import read_json
    from evaluate.readings.saliency import SALIENCY, ShardReadings, mask_at_image_size
    from evaluate.saliency.measures import SaliencyTally
    from evaluate.scores.catalogue import BS_SUFFIX

    manifest = read_json(manifest_file)
    shards = [ShardReadings(path) for path in reading_files]
    ids = [i for s in shards for i in s.image_ids]
    bilateral = read_json(meta_files[0])["bilateral"] is not None
    solver = {"bilateral": TOKENCUT_SOLVER.as_record()} if bilateral else {}

    def score(pairs) -> Scored:
        listed = check_listed(pairs, manifest, manifest_file).pairs
        before, after = SaliencyTally(), SaliencyTally() if bilateral else None
        figure = []
        for shard in shards:
            for k, image_id in enumerate(shard.image_ids):
                pair = listed[image_id]
                img = read_image(pair)
                levels = read_mask_levels(pair)
                before.add(mask_at_image_size(shard.grid_mask(k), img.height, img.width), levels)
                y = shard.vertex_values(k)
                if after is not None:
                    after.add(refined_from_vertices(np.asarray(img, dtype=np.uint8), y), levels)
                if len(figure) < FIGURE_IMAGES:
                    figure.append(_figure_entry(pair, shard.grid_mask(k), y, None if scoring.sealed else levels > 0))
        boot = {"resamples": resamples, "seed": seed}
        measures = before.measure_entries(ids, suffix="", **boot)
        if after is not None:
            measures += after.measure_entries(ids, suffix=BS_SUFFIX, **boot)
        fields = {"benchmark": spec.get("benchmark"), "names": {str(i): manifest["names"][i] for i in ids},
                  "figure_images": figure, **solver}
        return Scored(measures=measures, fields=fields)

    record, _ = score_on_record(
        scoring, kind="saliency", role="eval", purpose="eval", setting="tokencut" + ("+bs" if bilateral else ""),
        reading=SALIENCY.name, decoder="tokencut", n_images=len(ids), out_record=out_record, decided_by=[manifest_file, *reading_files],
        settings={"code": code, "resamples": resamples, "seed": seed, **solver},
        open_dataset=lambda: open_dataset(spec), score=score,
    )
    values = {m["measure"]: m["value"] for m in record["measures"]}
    log.info("%s on %s: IoU %.2f, maxF %.2f%s (%d images)", scoring.checkpoint, scoring.dataset,
             values["saliency_iou"], values["saliency_maxf"],
             f"; + BS: IoU {values['saliency_iou' + BS_SUFFIX]:.2f}, maxF {values['saliency_maxf' + BS_SUFFIX]:.2f}" if bilateral
             else "", len(ids))
    return record


def _figure_entry(pair, grid_mask: np.ndarray, vertex_values: np.ndarray | None,
                  truth: np.ndarray | None) -> dict:
    """What the figures draw of one image: its file, the grid mask (rows of 0/1 text), the solver's vertex values,
    and (an unsealed set only) the truth as COCO RLE."""
    entry: dict[str, Any] = {"name": pair.name, "image": str(pair.image),
                             "grid_mask": ["".join("1" if v else "0" for v in row) for row in grid_mask],
                             "vertex_values": None if vertex_values is None else vertex_values.tolist()}
    if truth is not None:
        from pycocotools import mask as mask_utils

        rle = mask_utils.encode(np.asfortranarray(truth.astype(np.uint8)))
        entry["truth_rle"] = {"size": [int(x) for x in rle["size"]], "counts": rle["counts"].decode("ascii")}
    return entry


def figure_maps(entry: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """A record's figure entry -> (image (H, W, 3) uint8, mask (H, W) uint8 0/1 before the solver, the solver's soft
    map (H, W) float64 or None, the truth (H, W) bool or None)."""
    from PIL import Image

    from evaluate.pixels.images import to_rgb
    from decoders.bilateral import refined_from_vertices
    from evaluate.readings.saliency import mask_at_image_size

    with Image.open(entry["image"]) as img:
        rgb = np.asarray(to_rgb(img), dtype=np.uint8)
    grid_mask = np.array([[c == "1" for c in row] for row in entry["grid_mask"]], dtype=bool)
    mask = mask_at_image_size(grid_mask, rgb.shape[0], rgb.shape[1])
    refined = None
    if entry.get("vertex_values") is not None:
        refined = refined_from_vertices(rgb, np.asarray(entry["vertex_values"], dtype=np.float64))
    truth = None
    if "truth_rle" in entry:
        from pycocotools import mask as mask_utils

        rle = {"size": entry["truth_rle"]["size"], "counts": entry["truth_rle"]["counts"].encode("ascii")}
        truth = mask_utils.decode(rle).astype(bool)
    return rgb, mask, refined, truth
