"""The saliency stage's entries (docs/design.md §16): manifest, reading, scoring.

Files:
- the manifest `results/datasets/{dataset}/saliency.json`: {"images", "masks" (the two folders), "names" (sorted
  stems), "image_ids" (0 .. n - 1, the position in that order), "shards": [[ids]], "annotations_sha256",
  "manifest_sha256"}; listings and hashes only (`open_saliency_set`): no label is opened;
- a checkpoint's reading of a shard, `results/saliency/{checkpoint}/{dataset}/{shard}.npz`:
    image_ids (n,) int64; grids (n, 2) int64 (gh, gw); grid_masks (sum gh * gw,) bool, each image's seed component
    row by row; vertex_offsets (n + 1,) int64 and vertex_values (sum n_v,) float64, the solver's solution on each
    image's bilateral grid (empty where `bilateral` is off): the soft map is `refined_from_vertices(image, y)`;
  beside it `{shard}.json`, what ran (the checkpoint file's identity and geometry, the solver's settings);
- one ledger record per checkpoint and data set (kind `saliency`): TokenCut's three measures and PySODMetrics' four on
  the decoder's mask, and the same seven with the suffix `_bs` on the solver's soft map.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

log = logging.getLogger("evaluate.saliency.protocol")

FIGURE_IMAGES = 4  # the first images of a set whose readings a record keeps for the figures


def open_set(spec: dict):
    """The `SaliencySet` of a data set's spec (its root, or its images and masks folders)."""
    from evaluate.datasets.saliency import open_saliency_set

    if spec.get("root"):
        return open_saliency_set(spec["root"])
    return open_saliency_set(images=spec["images"], masks=spec["masks"])


def write_manifest(*, spec: dict, shard_size: int, out: str | os.PathLike) -> dict:
    """The data set's pairs and shards (no label opened) -> `out`."""
    from evaluate.plumbing.atomic import write_json
    from evaluate.plumbing.provenance import sha256_json

    pairs = open_set(spec)
    ids = list(range(len(pairs)))
    content = {"images": str(pairs.images), "masks": str(pairs.masks), "names": [p.name for p in pairs.pairs],
               "image_ids": ids, "shards": [ids[i: i + shard_size] for i in range(0, len(ids), shard_size)],
               "annotations_sha256": pairs.annotations_sha256}
    manifest = {**content, "manifest_sha256": sha256_json(content)}
    if spec.get("benchmark"):
        from evaluate.datasets.benchmarks import benchmark_size

        expected = benchmark_size(spec["benchmark"])
        if len(ids) != expected:
            log.warning("%s: declared benchmark %s has %d images, this data set %d: its published rows compare "
                        "with a different set of images", spec["name"], spec["benchmark"], expected, len(ids))
    write_json(out, manifest)
    log.info("%s: %d images in %d shard(s)", spec["name"], len(ids), len(manifest["shards"]))
    return manifest


def _as_listed(pairs, manifest: dict, manifest_file: str | os.PathLike):
    """The set's pairs (a `SaliencySet`), checked against the manifest's names: a set changed on disk since it was
    listed is refused, naming the manifest."""
    from evaluate.saliency import SaliencyError

    if [p.name for p in pairs.pairs] != manifest["names"]:
        raise SaliencyError(f"{manifest_file}: the set's folders no longer hold the images it lists; delete it "
                            "and re-run so the set is listed again")
    return pairs.pairs


def read_shard(*, checkpoint: str, checkpoint_file: str | os.PathLike, which: str, position_rule: str | None,
               spec: dict, manifest_file: str | os.PathLike, shard: str, out_reading: str | os.PathLike,
               out_meta: str | os.PathLike, threads: int) -> dict:
    """TokenCut's reading (`evaluate.readings.saliency`) of one shard by one checkpoint (the network in its released
    form, float32 on the CPU), with the solver where `spec["bilateral"]`; writes the reading and its meta; returns
    the meta."""
    import torch

    from evaluate.networks.checkpoints import load_backbone
    from evaluate.plumbing.atomic import atomic_path, read_json, write_json
    from evaluate.plumbing.provenance import code_version, library_versions
    from evaluate.readings.features import shard_image_ids
    from evaluate.readings.native import FORM
    from decoders.bilateral import TOKENCUT_SOLVER
    from evaluate.datasets.saliency import read_image
    from evaluate.readings.saliency import EPS, TAU, read_saliency

    manifest = read_json(manifest_file)
    ids = shard_image_ids(manifest, shard, manifest_file)
    listed = _as_listed(open_set(spec), manifest, manifest_file)
    pairs = [listed[i] for i in ids]
    torch.set_num_threads(int(threads))
    loaded = load_backbone(checkpoint_file, which=which, form=FORM, position_rule=position_rule)
    model = loaded.model.eval()
    bilateral = TOKENCUT_SOLVER if spec["bilateral"] else None
    grids, masks, values = [], [], []
    for k, pair in enumerate(pairs):
        reading = read_saliency(model, read_image(pair), bilateral=bilateral)
        grids.append(reading.grid)
        masks.append(reading.grid_mask.ravel())
        values.append(reading.vertex_values if reading.vertex_values is not None else np.zeros(0))
        if (k + 1) % 50 == 0:
            log.info("%s on %s shard %s: %d / %d images", checkpoint, spec["name"], shard, k + 1, len(pairs))
    arrays = {"image_ids": np.array(ids, dtype=np.int64), "grids": np.array(grids, dtype=np.int64).reshape(-1, 2),
              "grid_masks": np.concatenate(masks).astype(bool) if masks else np.zeros(0, dtype=bool),
              "vertex_offsets": np.cumsum([0] + [v.size for v in values]).astype(np.int64),
              "vertex_values": np.concatenate(values).astype(np.float64) if values else np.zeros(0)}
    with atomic_path(out_reading) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    meta = {"checkpoint": checkpoint, **loaded.file_meta(), "dataset": spec["name"],
            "manifest_sha256": manifest["manifest_sha256"], "shard": shard, "n_images": len(ids),
            "reading": "saliency", "decoder": {"name": "tokencut", "tau": TAU, "eps": EPS},
            "bilateral": None if bilateral is None else bilateral.as_record(), "device": "cpu",
            "precision": "float32", "code_version": code_version(), "library_versions": library_versions()}
    write_json(out_meta, meta)
    log.info("%s on %s shard %s: %d images read%s", checkpoint, spec["name"], shard, len(ids),
             " with the solver" if bilateral else "")
    return meta


class ShardReadings:
    """One shard's reading file: `image_ids`, and per position the grid mask and the solver's vertex values."""

    def __init__(self, path: str | os.PathLike) -> None:
        with np.load(path, allow_pickle=False) as data:
            self.image_ids = [int(i) for i in data["image_ids"]]
            self.grids = [tuple(int(x) for x in g) for g in data["grids"]]
            self._masks = data["grid_masks"]
            self._offsets = data["vertex_offsets"]
            self._values = data["vertex_values"]
        self._cells = np.cumsum([0] + [gh * gw for gh, gw in self.grids])

    def grid_mask(self, k: int) -> np.ndarray:
        """(gh, gw) bool of the shard's k-th image."""
        return self._masks[self._cells[k]: self._cells[k + 1]].reshape(self.grids[k])

    def vertex_values(self, k: int) -> np.ndarray | None:
        """(n_v,) float64 of the shard's k-th image, or None where the solver did not run."""
        values = self._values[self._offsets[k]: self._offsets[k + 1]]
        return values if values.size else None


def score_saliency(scoring: Any, *, spec: dict, manifest_file: str | os.PathLike,
                   reading_files: Sequence[str | os.PathLike], meta_files: Sequence[str | os.PathLike],
                   resamples: int, seed: int, code: str, out_record: str | os.PathLike) -> dict:
    """TokenCut's and PySODMetrics' measures of one checkpoint on one saliency set, before and (where the reading
    ran the solver) after the solver: opens the masks once (or reuses the record of the same inputs), writes the
    record (kind `saliency`) and returns it. Images are scored one at a time: a set need not fit in memory."""
    from evaluate.ledger.scoring import Scored, score_on_record
    from evaluate.plumbing.atomic import read_json
    from decoders.bilateral import TOKENCUT_SOLVER, refined_from_vertices
    from evaluate.datasets.saliency import read_image, read_mask_levels
    from evaluate.saliency.measures import SaliencyTally
    from evaluate.scores.catalogue import BS_SUFFIX
    from evaluate.readings.saliency import mask_at_image_size

    manifest = read_json(manifest_file)
    shards = [ShardReadings(path) for path in reading_files]
    ids = [i for s in shards for i in s.image_ids]
    bilateral = read_json(meta_files[0])["bilateral"] is not None
    solver = {"bilateral": TOKENCUT_SOLVER.as_record()} if bilateral else {}

    def score(pairs) -> Scored:
        listed = _as_listed(pairs, manifest, manifest_file)
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
        n_images=len(ids), out_record=out_record, decided_by=[manifest_file, *reading_files],
        settings={"code": code, "resamples": resamples, "seed": seed, **solver},
        open_dataset=lambda: open_set(spec), score=score,
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
