"""A shard of keys480 through a decoder: the sweep of many settings, and the selected setting's COCO results.

Label-free. The sweep file (`results/decoder/sweep/{dataset}/{shard}.npz`) holds, for n images and S settings:
image_ids int64 (n,); settings (S,) setting names; masks uint8 (n, S, M, ceil(gh * gw / 8)) the grid masks
bit-packed row-major (`numpy.packbits`), M the most masks any setting keeps; counts int8 (n, S) masks kept per
setting; scores float32 (n, S, M). The grid (gh, gw) is keys480's square grid of the keys swept (30 x 30 for p 16,
60 x 60 for p 8, 34 x 34 for p 14); the file does not hold it: its reader takes it from the features' meta.json
(`Geometry.keys480_grid`), so a seed sweep file is byte for byte what it was.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from decoders.masks import coco_results
from decoders.ncut.cut import eigenvector
from decoders.registry import DecoderError, square_grid

log = logging.getLogger("decoders.shards")


@dataclass
class SweepShard:
    """One shard's sweep: see the module docstring for the arrays' shapes and dtypes."""

    image_ids: np.ndarray
    settings: list[str]
    masks: np.ndarray
    counts: np.ndarray
    scores: np.ndarray

    def union(self, row: int, setting: int, grid: Sequence[int]) -> np.ndarray:
        """The union of the masks that `settings[setting]` keeps on image `row`: bool (gh, gw) on the sweep's grid."""
        grid = tuple(int(v) for v in grid)
        cells = grid[0] * grid[1]
        if self.masks.shape[-1] != (cells + 7) // 8:
            raise DecoderError(f"the sweep's masks hold {self.masks.shape[-1]} bytes per mask, not the "
                               f"{(cells + 7) // 8} of a {grid[0]} x {grid[1]} grid: swept on other features")
        n = int(self.counts[row, setting])
        if n == 0:
            return np.zeros(grid, dtype=bool)
        bits = np.unpackbits(self.masks[row, setting, :n], axis=-1)[:, :cells]
        return bits.any(axis=0).reshape(grid)


def sweep_keys(decoder: Any, settings: Sequence[Any], image_ids: Sequence[int], keys: np.ndarray,
               grid: Sequence[int] | None = None) -> SweepShard:
    """Every setting on every image of a shard. keys: (n, N480, D) float16 or float32 (a memory map is fine); grid:
    (gh, gw), None for the square grid of N480."""
    grid = square_grid(keys.shape[1]) if grid is None else tuple(int(v) for v in grid)
    n_masks = max(s.masks for s in settings)
    cells = int(grid[0]) * int(grid[1])
    packed = np.zeros((len(image_ids), len(settings), n_masks, (cells + 7) // 8), dtype=np.uint8)
    counts = np.zeros((len(image_ids), len(settings)), dtype=np.int8)
    scores = np.zeros((len(image_ids), len(settings), n_masks), dtype=np.float32)
    stats = decoder.Stats()
    for row in range(len(image_ids)):
        per_setting = decoder.sweep(np.asarray(keys[row], dtype=np.float32), settings, grid, stats=stats)
        for s, masks in enumerate(per_setting):
            counts[row, s] = len(masks)
            for m, gm in enumerate(masks):
                packed[row, s, m] = np.packbits(gm.mask.reshape(-1))
                scores[row, s, m] = gm.score
    log.info("%d images x %d settings; stats: %s", len(image_ids), len(settings), stats)
    return SweepShard(np.asarray(image_ids, dtype=np.int64), [s.name for s in settings], packed, counts, scores)


def write_sweep(path: str | os.PathLike, shard: SweepShard) -> None:
    """Write a sweep shard as .npz, atomically."""
    from evaluate.plumbing.atomic import atomic_path

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, image_ids=shard.image_ids, settings=np.asarray(shard.settings), masks=shard.masks,
                     counts=shard.counts, scores=shard.scores)


def read_sweep(path: str | os.PathLike) -> SweepShard:
    """A sweep shard written by `write_sweep`."""
    try:
        with np.load(path) as f:
            return SweepShard(f["image_ids"], [str(s) for s in f["settings"]], f["masks"], f["counts"], f["scores"])
    except (OSError, KeyError, ValueError) as exc:
        raise DecoderError(f"{path}: not a readable sweep shard ({exc}); re-run the sweep") from None


def decode_keys(decoder: Any, settings: Any, image_ids: Sequence[int], keys: np.ndarray,
                sizes: dict[int, tuple[int, int]], grid: Sequence[int] | None = None) -> list[dict]:
    """One setting on every image of a shard -> COCO results (RLE at each image's own (height, width) size).
    keys: (n, N480, D); grid: (gh, gw), None for the square grid of N480."""
    grid = square_grid(keys.shape[1]) if grid is None else tuple(int(v) for v in grid)
    stats = decoder.Stats()
    results: list[dict] = []
    for row, image_id in enumerate(image_ids):
        masks = decoder.decode(np.asarray(keys[row], dtype=np.float32), settings, grid, stats=stats)
        results.extend(coco_results(image_id, masks, *sizes[image_id]))
    log.info("%d images, %d masks with %s; stats: %s", len(image_ids), len(results), settings.name, stats)
    return results


def eigenvector_of_image(manifest: dict, keys480_files: Sequence[str | os.PathLike], settings: Any,
                         image_id: int | None, dataset: str) -> tuple[int, np.ndarray]:
    """(image id, its first cut's eigenvector float64 (g, g) on keys480's square grid) for the eigenvector figure.

    image_id: config `figures.eigenvector_image`; None takes the data set's first image. keys480_files: the
    reference checkpoint's keys480 shards of the data set, in shard order.
    """
    from evaluate import ConfigError

    wanted = manifest["image_ids"][0] if image_id is None else int(image_id)
    if wanted not in manifest["image_ids"]:
        raise ConfigError(f"figures.eigenvector_image: image id {wanted} is not in data set {dataset}")
    shard = next(i for i, ids in enumerate(manifest["shards"]) if wanted in ids)
    keys = np.load(keys480_files[shard], mmap_mode="r")[manifest["shards"][shard].index(wanted)]
    return wanted, eigenvector(np.asarray(keys, dtype=np.float32), settings, square_grid(keys.shape[0]))
