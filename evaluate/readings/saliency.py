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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from decoders.tokencut import component
from evaluate.pixels.images import normalise
from evaluate.readings.native import native_keys
from evaluate.readings import ReadingError
from decoders.bilateral import BilateralSettings, bilateral_system, slice_vertices, solve_vertices
from evaluate.datasets.saliency import SaliencyPair, read_image

TAU = 0.2
EPS = 1e-5


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
