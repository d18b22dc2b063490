"""TokenCut's saliency reading (docs/design.md §16): one salient-object mask per image, before and after the solver.

Per image (RGB as stored, W x H):
1. resized with PIL LANCZOS to (round(W / p) * p, round(H / p) * p) (Python's `round`: halves to even);
2. / 255, ImageNet mean and std (`evaluate.pixels.images.normalise`);
3. the last block's keys of the patch rows of the network in its `released` form (the caller loads it so), by the
   keys-native reading's `native_keys` (its zero padding is empty: the input is a patch multiple):
   (gh * gw, D) float32, gh = round(H / p), gw = round(W / p);
4. the `tokencut` decoder's seed component (`decoders.tokencut.component`, tau 0.2, eps 1e-5): bool (gh, gw);
5. the component resized to H x W with torch's `interpolate(mode="nearest")` (source index floor(i * in / out),
   not PIL's nearest): the 0/1 mask, what the "TokenCut" rows score;
6. optionally the bilateral solver on the original RGB image with that mask as target
   (`decoders.bilateral`): the soft map the "+ BS" rows score.

The network runs in its released form, float32, on the CPU (`SALIENCY`: what the protocol fixes). A shard's reading
(`write_readings`, the runner's body) is one .npz:
    image_ids (n,) int64; grids (n, 2) int64 (gh, gw); grid_masks (sum gh * gw,) bool, each image's seed component
    row by row; vertex_offsets (n + 1,) int64 and vertex_values (sum n_v,) float64, the solver's solution on each
    image's bilateral grid (empty where the solver did not run): the soft map is `refined_from_vertices(image, y)`;
beside it the runner's meta (`{shard}.json`): the checkpoint file's identity and geometry, the solver's settings.
`ShardReadings` reads it back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from decoders.bilateral import TOKENCUT_SOLVER, BilateralSettings, bilateral_system, slice_vertices, solve_vertices
from decoders.tokencut import component
from evaluate.datasets.saliency import SaliencyPair, read_image
from evaluate.pixels.images import normalise
from evaluate.plumbing.atomic import atomic_path
from evaluate.readings import ReadingError
from evaluate.readings.native import native_keys
from evaluate.readings.runner import Reading, Shard

SALIENCY = Reading("saliency", form="released", precision="float32", cpu=True)

TAU = 0.2
EPS = 1e-5

log = logging.getLogger("evaluate.readings.saliency")


def tokencut_size(width: int, height: int, patch: int) -> tuple[int, int]:
    """(round(W / p) * p, round(H / p) * p): the network input's (width, height)."""
    size = (round(width / patch) * patch, round(height / patch) * patch)
    if min(size) < patch:
        raise ReadingError(f"a {width} x {height} image rounds to no patch of {patch} px on a side")
    return size


def network_input(img: Image.Image, patch: int) -> torch.Tensor:
    """The image LANCZOS-resized to `tokencut_size` and normalised: (3, round(H/p) p, round(W/p) p) float32."""
    size = tokencut_size(img.width, img.height, patch)
    return normalise(img.resize(size, Image.Resampling.LANCZOS))


def patch_keys(model: torch.nn.Module, img: Image.Image) -> tuple[np.ndarray, tuple[int, int]]:
    """(keys (gh * gw, D) float32, (gh, gw)): the last block's patch keys of the resized image."""
    with torch.inference_mode():
        return native_keys(model, network_input(img, int(model.geometry.patch)))


def mask_at_image_size(grid_mask: np.ndarray, height: int, width: int) -> np.ndarray:
    """A (gh, gw) 0/1 map -> (H, W) uint8 0/1 by torch's `interpolate(mode="nearest")`."""
    source = torch.from_numpy(np.asarray(grid_mask, dtype=np.float32))[None, None]
    full = torch.nn.functional.interpolate(source, size=(int(height), int(width)), mode="nearest")[0, 0]
    return full.numpy().astype(np.uint8)


@dataclass(frozen=True)
class SaliencyReading:
    """One image's reading: grid (gh, gw); grid_mask (gh, gw) bool, the decoder's seed component; mask (H, W)
    uint8 0/1, that component at full size (before the solver); vertex_values (n_v,) float64, the solver's solution
    on the image's bilateral grid, and refined (H, W) float64, its soft output (`slice_vertices`), or both None
    where the solver did not run."""

    grid: tuple[int, int]
    grid_mask: np.ndarray
    mask: np.ndarray
    vertex_values: np.ndarray | None
    refined: np.ndarray | None


def read_saliency(model: torch.nn.Module, img: Image.Image, *, bilateral: BilateralSettings | None,
                  tau: float = TAU, eps: float = EPS) -> SaliencyReading:
    """TokenCut's reading of one RGB image (module docstring); `bilateral` None skips the solver."""
    keys, grid = patch_keys(model, img)
    grid_mask = component(keys, grid, tau=tau, eps=eps)
    mask = mask_at_image_size(grid_mask, img.height, img.width)
    if bilateral is None:
        return SaliencyReading(grid, grid_mask, mask, None, None)
    system = bilateral_system(np.asarray(img, dtype=np.uint8), mask, bilateral)
    y = solve_vertices(system, bilateral)
    return SaliencyReading(grid, grid_mask, mask, y, slice_vertices(system.grid, y))


def read_saliency_set(model: torch.nn.Module, pairs: Iterable[SaliencyPair], *, bilateral: BilateralSettings | None,
                      tau: float = TAU, eps: float = EPS) -> list[SaliencyReading]:
    """The reading of each pair's image, in order (`evaluate.datasets.saliency.read_image`: RGB as stored). model: eval
    mode, `released` form, float32 on CPU (a network with `geometry` and `last_keys`)."""
    model.eval()
    return [read_saliency(model, read_image(pair), bilateral=bilateral, tau=tau, eps=eps) for pair in pairs]


def write_readings(shard: Shard, out: str | os.PathLike, *, bilateral: bool) -> dict:
    """The runner's body: TokenCut's reading of the shard's images (with the solver where `bilateral`) into the
    .npz `out` (module docstring), atomically; returns what the meta says of it."""
    solver = TOKENCUT_SOLVER if bilateral else None
    grids, masks, values = [], [], []
    for k, image_id in enumerate(shard.units):
        reading = read_saliency(shard.model, shard.dataset.open_image(image_id), bilateral=solver)
        grids.append(reading.grid)
        masks.append(reading.grid_mask.ravel())
        values.append(reading.vertex_values if reading.vertex_values is not None else np.zeros(0))
        if (k + 1) % 50 == 0:
            log.info("shard %s: %d / %d images", shard.name, k + 1, len(shard.units))
    arrays = {"image_ids": np.array(shard.units, dtype=np.int64),
              "grids": np.array(grids, dtype=np.int64).reshape(-1, 2),
              "grid_masks": np.concatenate(masks).astype(bool) if masks else np.zeros(0, dtype=bool),
              "vertex_offsets": np.cumsum([0] + [v.size for v in values]).astype(np.int64),
              "vertex_values": np.concatenate(values).astype(np.float64) if values else np.zeros(0)}
    with atomic_path(out) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    log.info("shard %s: %d images read%s", shard.name, len(shard.units), " with the solver" if solver else "")
    return {"n_images": len(shard.units), "decoder": {"name": "tokencut", "tau": TAU, "eps": EPS},
            "bilateral": None if solver is None else solver.as_record()}


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
