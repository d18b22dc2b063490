"""The tokens320 geometry (docs/design.md §18, DESIGN 16): STEGO's and HP's `get_transform(320, ..., "center")`.

    s = p * ceil(320 / p)       320 for p 8 and 16 (a 40 x 40 or 20 x 20 grid), 322 for p 14 (23 x 23)

The image and its label map alike: the short side to s with PIL NEAREST, the long side int(s * long / short)
(torchvision's `Resize(s)`), then the centre s x s crop at (int(round((w - s) / 2)), int(round((h - s) / 2)))
(Python's round, torchvision's `CenterCrop`). Only that square is scored (of a 2048 x 1024 Cityscapes frame, its
middle 1024 x 1024). PIL's NEAREST takes source index int(x_i), x_0 = r / 2, x_(i+1) = x_i + r, r = in / out summed
in float64, which is not floor((i + 0.5) r) where that is an integer (a 640 x 480 label's column 106 of 426 at
s = 320): the resize IS PIL's, never a re-implementation. The image is then ImageNet-normalised
(`evaluate.pixels.images.normalise_pixels`); the image is resized by NEAREST too, as STEGO and HP do (PriMaPs
resizes it bilinearly).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from evaluate.pixels.images import IMAGENET_MEAN, IMAGENET_STD, normalise_pixels

if TYPE_CHECKING:
    import torch

TARGET = 320  # the nominal side of the scored square (STEGO's `res: 320`)
TRANSFORM = (
    "PIL open as stored (no EXIF orientation), RGB; short side to s = p * ceil(320 / p) with PIL NEAREST (long side "
    "int(s * long / short)); centre s x s crop at (int(round((w - s) / 2)), int(round((h - s) / 2))); ImageNet "
    f"mean {list(IMAGENET_MEAN)} / std {list(IMAGENET_STD)}; released form: the last block after the final norm, "
    "patch rows: (g * g, D) float32, g = s / p"
)


def tokens320_side(patch: int) -> int:
    """s = p * ceil(320 / p): 320 for p 8 and 16, 322 for p 14."""
    patch = int(patch)
    if patch < 1:
        raise ValueError(f"patch size must be positive, got {patch}")
    return patch * math.ceil(TARGET / patch)


def tokens320_grid(patch: int) -> int:
    """g = s / p: 20 for p 16, 40 for p 8, 23 for p 14."""
    return tokens320_side(patch) // int(patch)


def tokens320_geometry(width: int, height: int, side: int) -> tuple[int, int, int, int]:
    """(new_w, new_h, left, top): the resized size (short side `side`, long side int(side * long / short)) and the
    centre crop's offset. 640 x 480 at 320 -> (426, 320, 53, 0)."""
    width, height, side = int(width), int(height), int(side)
    if width < 1 or height < 1:
        raise ValueError(f"image size must be positive, got {width} x {height}")
    if width <= height:
        new_w, new_h = side, int(side * height / width)
    else:
        new_w, new_h = int(side * width / height), side
    return new_w, new_h, round((new_w - side) / 2), round((new_h - side) / 2)


def _resized_square(img: Image.Image, side: int) -> Image.Image:
    new_w, new_h, left, top = tokens320_geometry(img.width, img.height, side)
    resized = img.resize((new_w, new_h), Image.Resampling.NEAREST)
    return resized.crop((left, top, left + side, top + side))


def tokens320_pixels(img: Image.Image, side: int) -> np.ndarray:
    """An RGB image's scored square: (side, side, 3) uint8 (module docstring)."""
    if img.mode != "RGB":
        raise ValueError(f"tokens320 takes an RGB image, got mode {img.mode}")
    return np.asarray(_resized_square(img, side), dtype=np.uint8)


def tokens320_labels(labels: np.ndarray, side: int) -> np.ndarray:
    """A label map's scored square: (H, W) uint8 -> (side, side) uint8, by the image's very resize and crop."""
    labels = np.asarray(labels)
    if labels.dtype != np.uint8 or labels.ndim != 2:
        raise ValueError(f"a label map must be (H, W) uint8, got {labels.dtype} {labels.shape}")
    return np.asarray(_resized_square(Image.fromarray(labels), side), dtype=np.uint8)


def tokens320_input(img: Image.Image, patch: int) -> torch.Tensor:
    """The network's input: the scored square, ImageNet-normalised: (3, s, s) float32, s = `tokens320_side(patch)`."""
    return normalise_pixels(tokens320_pixels(img, tokens320_side(patch)))
