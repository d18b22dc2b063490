"""The video reading `frames480` (`FRAMES480`: the config's form, float32) and PIL's nearest-neighbour resampling of
label maps (docs/design.md §12). The label propagation that reads it through the one runner is `evaluate.video`.

- `frames480_size(width, height, short, geometry)`: the network's rule (`Geometry.frames480_size`, docs/design.md
  §11). For p 8 and 16 the short side becomes `short` (the setting `height`, 480 by default, a multiple of 16) and
  the long side its proportional length rounded DOWN to a multiple of 64, as DINO's `eval_video_segmentation.py`
  does (854 x 480 -> 832 x 480, a 30 x 52 grid at p 16, 60 x 104 at p 8), but never below `short` (a square frame
  stays square); for p 14 the short side is `short` rounded down to a multiple of 14 and the long side its
  proportional length rounded down to a multiple of 14 (854 x 480 -> 840 x 476, 34 x 60). `geometry` defaults to
  the seed's ViT-S/16.
- `frames480_pixels(img, short)`: the RGB frame resized to that size bilinearly with half-pixel centres and NO
  antialiasing (OpenCV's INTER_LINEAR, which DINO uses; PIL's BILINEAR antialiases when shrinking), rounded to
  uint8: (h, w, 3) uint8.
- `frames480_input(img, short)`: those pixels / 255, normalised with DINO's video constants mean (0.485, 0.456,
  0.406) and std (0.228, 0.224, 0.225): (3, h, w) float32, h / p x w / p patches.
- `nearest_indices(n_in, n_out)` / `resize_nearest(labels, size)`: PIL's `Image.NEAREST` on any integer label map.
  Output pixel i takes source pixel floor((i + 0.5) * n_in / n_out), the pixel under its centre, as PIL computes it:
  a running sum in double precision, which at an exact integer coordinate may fall one ulp short and take the
  pixel before (832 -> 854: output 640 takes 623, the formula 624). torch's `nearest` and OpenCV's INTER_NEAREST
  pick other pixels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from evaluate.pixels.geometry import FRAMES_LONG_MULTIPLE, SEED, Geometry
from evaluate.pixels.images import normalise_pixels, normalised_levels
from evaluate.readings.runner import Reading

if TYPE_CHECKING:  # torch is imported where a frame is resized: the workflow's own process checks `check_height`
    import torch

# the video protocol runs the network in the config's form, in float32 whatever features.precision says
FRAMES480 = Reading("frames480", precision="float32")
VIDEO_MEAN = (0.485, 0.456, 0.406)  # DINO's eval_video_segmentation.py `color_normalize`
VIDEO_STD = (0.228, 0.224, 0.225)  # ImageNet says 0.229 for red; DINO's 0.228 is kept, so numbers compare
VIDEO_LEVELS = normalised_levels(VIDEO_MEAN, VIDEO_STD)

TRANSFORM = (
    "PIL open, EXIF orientation, RGB; short side -> height, long side floor(height * long / short / 64) * 64 "
    "(at least height; p 14: both sides rounded down to multiples of 14); bilinear, half-pixel centres, no "
    "antialiasing (float32), rounded half to even to uint8; / 255, mean (0.485, 0.456, 0.406), std (0.228, 0.224, "
    "0.225); the last block's output tokens (h/p * w/p, D)"
)


def check_height(height: int, geometry: Geometry = SEED) -> int:
    """`height` as an int, or ValueError unless the network can read frames at that short side: a positive multiple
    of its patch p where DINO's rule keeps the side (p 8, 16; 16 for the seed), at least p where the side is rounded
    down to a multiple of p (p 14)."""
    p = geometry.patch
    keeps_side = FRAMES_LONG_MULTIPLE % p == 0  # as Geometry.frames480_size decides between the two rules
    valid = not isinstance(height, bool) and int(height) == height and height > 0
    if keeps_side and not (valid and height % p == 0):
        raise ValueError(f"the frames480 height must be a positive multiple of {p}, got {height!r}")
    if not keeps_side and not (valid and height >= p):
        raise ValueError(f"the frames480 height must be an integer of at least the patch ({p} px), got {height!r}")
    return int(height)


def frames480_size(width: int, height: int, short: int, geometry: Geometry = SEED) -> tuple[int, int]:
    """(new_w, new_h) of a `width` x `height` frame read at short side `short` by a network of `geometry`.

    `Geometry.frames480_size` after `check_height`. p 8 and 16, DINO's rule in integers: a landscape or square frame
    gets height `short` and width floor(short * width / height / 64) * 64; a portrait one the same with the sides
    swapped; where that long side would fall below `short` (a square or nearly square frame) it is `short`.
    854 x 480 at 480 -> (832, 480). p 14: (840, 476).
    """
    short = check_height(short, geometry)
    return geometry.frames480_size(width, height, short)


def frames480_pixels(img: Image.Image, short: int, geometry: Geometry = SEED) -> np.ndarray:
    """The frames480 reading's pixels of an RGB frame: (h, w, 3) uint8, (w, h) = `frames480_size(*img.size, short,
    geometry)`.

    Bilinear, align_corners False, no antialiasing, computed in float32 on the uint8 values and rounded half to
    even (then clipped to 0..255, which bilinear weights never leave).
    """
    new_w, new_h = frames480_size(*img.size, short, geometry)
    pixels = np.asarray(img.convert("RGB") if img.mode != "RGB" else img, dtype=np.uint8)
    if (new_w, new_h) == img.size:
        return np.ascontiguousarray(pixels)
    import torch  # noqa: PLC0415 (see the module's imports)

    x = torch.from_numpy(np.ascontiguousarray(pixels.transpose(2, 0, 1))).to(torch.float32).unsqueeze(0)
    resized = torch.nn.functional.interpolate(x, size=(new_h, new_w), mode="bilinear", align_corners=False,
                                              antialias=False)
    out = torch.round(resized[0]).clamp_(0, 255).to(torch.uint8)
    return np.ascontiguousarray(out.numpy().transpose(1, 2, 0))


def frames480_input(img: Image.Image, short: int, geometry: Geometry = SEED) -> torch.Tensor:
    """The frames480 reading's network input: (3, h, w) float32, (pixel / 255 - VIDEO_MEAN) / VIDEO_STD."""
    return normalise_pixels(frames480_pixels(img, short, geometry), VIDEO_LEVELS)


def nearest_indices(n_in: int, n_out: int) -> np.ndarray:
    """(n_out,) int64: the source index PIL's `Image.NEAREST` takes for each output index of an axis.

    floor((i + 0.5) * n_in / n_out), computed as PIL does: x_0 = 0.5 * scale, x_{i+1} = x_i + scale in double
    precision (scale = n_in / n_out), truncated; so at exact integer coordinates it can take the pixel before.
    """
    n_in, n_out = int(n_in), int(n_out)
    if n_in < 1 or n_out < 1:
        raise ValueError(f"axis lengths must be positive, got {n_in} -> {n_out}")
    scale = n_in / n_out
    steps = np.full(n_out, scale, dtype=np.float64)
    steps[0] = 0.5 * scale
    coords = np.add.accumulate(steps)  # sequential, left to right: PIL's running sum, bit for bit
    return np.minimum(coords.astype(np.int64), n_in - 1)


def resize_nearest(labels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """An (H, W) label map resized to `size` = (out_h, out_w) as PIL's `Image.NEAREST`: same dtype, (out_h, out_w)."""
    labels = np.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"expected an (H, W) label map, got shape {labels.shape}")
    out_h, out_w = int(size[0]), int(size[1])
    rows = nearest_indices(labels.shape[0], out_h)
    cols = nearest_indices(labels.shape[1], out_w)
    return np.ascontiguousarray(labels[rows[:, None], cols[None, :]])
