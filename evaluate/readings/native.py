"""The reading `keys-native` (docs/design.md §15): each image at its own size, the network in its released form.

Per image (section 3's opening: `open_rgb`), no resize: pixels / 255, ImageNet mean and std, zero-padded at the
bottom and the right to the next multiple of p (after normalising, as LOST's and TokenCut's loaders pad), the last
block's keys of the patch rows: (gh * gw, D) float32, gh = ceil(H / p), gw = ceil(W / p); the position table is
resampled to (gh, gw) by the network's own rule (`VisionTransformer.pos_embed_for`).

A shard folder (`results/features/{checkpoint}/{dataset}/{shard}/`) holds

    keys-native.npy    (T, D)  every image's keys, one after the other (T = the sum of gh * gw)
    native.json               {"image_ids": [n], "grids": [[gh, gw]], "offsets": [n + 1], "sizes": [[H, W]]}
    meta.json                 as keys480's (checkpoint, form, geometry, dtype, code, libraries), written LAST

`NativeKeys` reads a shard back (image i's rows are keys[offsets[i]:offsets[i + 1]]).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from evaluate.pixels.images import normalise
from evaluate.plumbing.atomic import atomic_path, read_json, write_json
from evaluate.readings.features import DTYPES, FeatureError, network_precision
from evaluate.readings.runner import Reading

KEYS = "keys-native.npy"
INDEX = "native.json"
META = "meta.json"
KEYS_NATIVE = Reading("keys-native", form="released")  # the published protocols run the network as released
TRANSFORM = ("PIL open, EXIF orientation, RGB (16-bit >> 8); no resize; / 255, mean (0.485, 0.456, 0.406), std "
             "(0.229, 0.224, 0.225); zero-padded bottom and right to a multiple of p; released form; the last "
             "block's keys of the patch rows (ceil(H/p) * ceil(W/p), D)")


def native_grid(height: int, width: int, patch: int) -> tuple[int, int]:
    """(gh, gw) = (ceil(H / p), ceil(W / p))."""
    return math.ceil(int(height) / int(patch)), math.ceil(int(width) / int(patch))


def pad_to_patch(image: torch.Tensor, patch: int) -> torch.Tensor:
    """(3, H, W) float -> (3, gh * p, gw * p), zeros at the bottom and the right."""
    _, height, width = image.shape
    gh, gw = native_grid(height, width, patch)
    return torch.nn.functional.pad(image, (0, gw * patch - width, 0, gh * patch - height))


def native_keys(model: torch.nn.Module, image: torch.Tensor) -> tuple[np.ndarray, tuple[int, int]]:
    """One image's keys-native: `image` (3, H, W) float32, normalised, unpadded -> (keys (gh * gw, D) float32,
    (gh, gw)). `model`: a network with `geometry` and `last_keys` (in the released form for the published
    protocols; the caller loads it so)."""
    patch = int(model.geometry.patch)
    x = pad_to_patch(image, patch).unsqueeze(0)
    keys = model.last_keys(x)[0]
    grid = native_grid(image.shape[1], image.shape[2], patch)
    if keys.shape[0] != grid[0] * grid[1]:
        raise FeatureError(f"the network gave {keys.shape[0]} keys for a {grid[0]} x {grid[1]} grid")
    return keys.detach().to("cpu", torch.float32).numpy(), grid


def write_native(model: torch.nn.Module, open_image: Callable[[int], Any], image_ids: Sequence[int],
                 out_dir: str | os.PathLike, *, dtype: str, device: str, precision: str) -> dict:
    """The arrays of one keys-native shard (keys-native.npy, native.json, each atomically); returns what meta.json
    says of them."""
    if dtype not in DTYPES:
        raise FeatureError(f"feature dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    amp = network_precision(precision, device)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts, grids, sizes = [], [], []
    with torch.inference_mode(), amp:
        for image_id in image_ids:
            img = open_image(int(image_id))
            keys, grid = native_keys(model, normalise(img).to(device))
            cast = keys.astype(dtype)
            if not np.isfinite(cast).all():
                raise FeatureError(f"{out}: keys-native of image id {image_id} are not finite in {dtype}; set "
                                   "features.dtype to float32 in config.yaml, or check the checkpoint")
            parts.append(cast)
            grids.append([int(grid[0]), int(grid[1])])
            sizes.append([int(img.height), int(img.width)])
    offsets = np.cumsum([0] + [len(p) for p in parts]).tolist()
    width = int(model.geometry.width)
    with atomic_path(out / KEYS) as tmp, open(tmp, "wb") as handle:
        np.save(handle, np.concatenate(parts) if parts else np.zeros((0, width), dtype=dtype), allow_pickle=False)
    write_json(out / INDEX, {"image_ids": [int(i) for i in image_ids], "grids": grids, "offsets": offsets,
                             "sizes": sizes})
    return {"n_images": len(parts), "dtype": dtype, "transforms": {"keys-native": TRANSFORM}}


class NativeKeys:
    """One keys-native shard read back: `.image_ids`, `.grids` [(gh, gw)], `.sizes` [(H, W)], `.meta`, `.patch`;
    `keys(i)` -> (gh * gw, D) float32 of the shard's i-th image."""

    def __init__(self, shard_dir: str | os.PathLike):
        self.dir = Path(shard_dir)
        if not (self.dir / META).is_file():
            raise FeatureError(f"{self.dir / META}: missing; the keys-native shard {self.dir} is incomplete")
        self.meta = read_json(self.dir / META)
        index = read_json(self.dir / INDEX)
        self.image_ids = [int(i) for i in index["image_ids"]]
        self.grids = [(int(a), int(b)) for a, b in index["grids"]]
        self.sizes = [(int(a), int(b)) for a, b in index["sizes"]]
        self.offsets = [int(o) for o in index["offsets"]]
        self.patch = int(self.meta["patch"])
        self._keys = np.load(self.dir / KEYS, mmap_mode="r", allow_pickle=False)
        counts = [gh * gw for gh, gw in self.grids]
        if self._keys.shape[0] != sum(counts) or np.diff(self.offsets).tolist() != counts:
            raise FeatureError(f"{self.dir / KEYS}: {self._keys.shape[0]} rows do not match the grids and offsets "
                               f"of {self.dir / INDEX}")

    def __len__(self) -> int:
        return len(self.image_ids)

    def keys(self, i: int) -> np.ndarray:
        return np.asarray(self._keys[self.offsets[i]: self.offsets[i + 1]], dtype=np.float32)
