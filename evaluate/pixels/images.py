"""Images and the two readings' input transforms (docs/design.md §3).

- `open_rgb(path)`: PIL image in RGB, EXIF orientation applied, every common mode converted (grayscale L/LA, 1-bit,
  CMYK, palette with or without transparency, RGBA (alpha dropped), 16-bit grayscale scaled to 8 bits by `>> 8`,
  since PIL's own conversion clips values above 255 to white). The whole file is decoded at once, so a truncated or
  corrupt file fails here, with an `ImageError` naming the file, rather than later in a batch.
- Every opening here (`open_rgb`, `opened_image`, `header_size`) refuses, from the header and before decoding, an
  image of more than `MAX_PIXELS` pixels (PIL's decompression-bomb limit, enforced as a refusal: docs/design.md §3),
  and `check_min_side` an image smaller than one patch; each in one line naming the file.
- `keys480_input(img)`: the whole image resized to 480 x 480 (aspect not kept, as MaskCut does; PIL LANCZOS),
  ImageNet-normalised: (3, 480, 480) float32 -> 30 x 30 = 900 patches.
- `tokens224_input(img)`: short side resized to 224 (PIL BICUBIC, long side truncated to an integer), centre
  224 x 224 crop at offset `round((long - 224) / 2)` (Python's `round`, as torchvision's `Resize(224)` +
  `CenterCrop(224)`), ImageNet-normalised: (3, 224, 224) float32 -> 14 x 14 = 196 patches.
- Each reading is its uint8 pixels (`keys480_pixels`, `tokens224_pixels`: (H, W, 3) uint8, what
  `evaluate.readings.inputs` stores once per data set) followed by `normalise_pixels` (one image or a batch, the same bits).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from evaluate import EvaluationError
from evaluate.pixels.geometry import KEYS480_SIZE, PATCH, TOKENS224_SIZE

if TYPE_CHECKING:  # torch is imported where a tensor is made: a job that only lists or opens images (a manifest,
    import torch  # a scoring job) does not pay the seconds its import costs

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
MIN_SIDE = PATCH  # one patch: a smaller image holds no information at the backbone's resolution
# PIL's own decompression-bomb limit (Image.MAX_IMAGE_PIXELS as Pillow ships it: a quarter GiB of RGBA), refused at
# the limit where PIL would only warn below twice it (docs/design.md §3)
MAX_PIXELS = 1024 * 1024 * 1024 // 4 // 3
EXIF_ORIENTATION = 0x0112  # EXIF tag; values 5..8 swap width and height

SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")

TRANSFORMS = {
    "keys480": "PIL open, EXIF orientation, RGB (16-bit >> 8); resize 480x480 LANCZOS (aspect not kept); "
    "ImageNet mean/std; block-12 keys W_k LN1(z) + b_k: (900, 384)",
    "tokens224": "PIL open, EXIF orientation, RGB (16-bit >> 8); resize short side 224 BICUBIC (long side "
    "int(long*224/short)); centre crop 224 at round((long-224)/2); ImageNet mean/std; block-12 output: (196, 384)",
    "mean": list(IMAGENET_MEAN),
    "std": list(IMAGENET_STD),
}


class ImageError(EvaluationError):
    """An image file that cannot be used: missing, not an image, corrupt or truncated, or too small."""


def _sixteen_bit_to_rgb(img: Image.Image) -> Image.Image:
    """16-bit (or 32-bit integer) grayscale -> 8-bit RGB by `>> 8` (values outside 0..65535 clipped first)."""
    values = np.asarray(img).astype(np.int64)
    values = np.clip(values, 0, 65535) >> 8
    return Image.fromarray(values.astype(np.uint8)).convert("RGB")


def to_rgb(img: Image.Image) -> Image.Image:
    """Any PIL mode -> RGB. Alpha is dropped (the colour under it is kept); 16-bit is scaled by `>> 8`."""
    if img.mode == "RGB":
        return img
    if img.mode in SIXTEEN_BIT_MODES:
        return _sixteen_bit_to_rgb(img)
    if img.mode in ("P", "PA"):
        # Through RGBA so a palette transparency (bytes or index) is handled by PIL without a warning; then drop it.
        return img.convert("RGBA").convert("RGB")
    return img.convert("RGB")


# what PIL raises on a broken stream or broken metadata, besides OSError (a truncated file)
BROKEN = (OSError, SyntaxError, ValueError, EOFError, IndexError, KeyError, TypeError, struct.error)


def _too_many_pixels(path: Path, what: str, pixels: int, size: tuple[int, int] | None) -> str:
    shown = f" ({size[0]} x {size[1]} px)" if size else ""
    return (f"{path}: the {what} has {pixels:,} pixels{shown}, more than the {MAX_PIXELS:,} an image may have "
            "(PIL's decompression-bomb limit); refused before decoding it")


def _open_within_limit(path: Path, what: str, error: type[Exception]) -> Image.Image:
    """`Image.open(path)` (the header read, nothing decoded), refused as `error` naming the file when it declares
    more than MAX_PIXELS pixels: PIL's own refusal (above twice its limit) and the band where it only warns alike."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(path)
    except Image.DecompressionBombError as exc:  # PIL's message holds the count, not the sides
        found = re.search(r"\((\d+) pixels\)", str(exc))
        raise error(_too_many_pixels(path, what, int(found.group(1)), None) if found else
                    f"{path}: refused as a possible decompression bomb: {exc}") from None
    width, height = img.size
    if width * height > MAX_PIXELS:
        img.close()
        raise error(_too_many_pixels(path, what, width * height, (width, height)))
    return img


def check_min_side(path: str | os.PathLike, size: tuple[int, int], error: type[Exception]) -> None:
    """Refuse, as `error` naming the file, an image of `size` (width, height) smaller than one patch on a side."""
    width, height = size
    if width < MIN_SIDE or height < MIN_SIDE:
        raise error(
            f"{path}: image is {width} x {height} px; at least {MIN_SIDE} px on each side is needed (one patch)"
        )


@contextlib.contextmanager
def opened_image(path: str | os.PathLike, what: str, error: type[Exception]) -> Iterator[Image.Image]:
    """PIL's image of a file (an image, frame or mask: `what`); a missing, unidentifiable or corrupt file, met on
    opening or while the caller reads it, or one over the pixel limit (`MAX_PIXELS`), is one line naming it, raised
    as `error` (the data set's own class)."""
    path = Path(path)
    try:
        with _open_within_limit(path, what, error) as img:
            yield img
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except UnidentifiedImageError:
        raise error(f"{path}: not an image (PIL cannot identify its format)") from None
    except BROKEN as exc:
        raise error(f"{path}: corrupt {what}, cannot be read: {exc}") from None


def header_size(path: str | os.PathLike, what: str, error: type[Exception], *,
                oriented: bool = True) -> tuple[int, int]:
    """(width, height) of an image file from its header, no pixel decoded: after its EXIF orientation (`oriented`,
    the size `open_rgb` gives) or as stored. Errors as `opened_image`'s."""
    with opened_image(path, what, error) as img:
        width, height = img.size
        orientation = img.getexif().get(EXIF_ORIENTATION, 1) if oriented else 1
    return (height, width) if orientation in (5, 6, 7, 8) else (width, height)


def stored_rgb(path: str | os.PathLike, what: str, error: type[Exception]) -> Image.Image:
    """An image file as stored (no EXIF orientation: for sets whose labels are drawn on the stored pixels), decoded
    in full, in RGB (`to_rgb`). Errors as `opened_image`'s."""
    with opened_image(path, what, error) as img:
        img.load()
        rgb = to_rgb(img)
        return rgb.copy() if rgb is img else rgb


def open_rgb(path: str | os.PathLike) -> Image.Image:
    """Open an image file as an RGB PIL image, EXIF orientation applied, fully decoded.

    Raises ImageError naming the file for: a missing file, a file that is not an image, a corrupt or truncated
    image, an image of more than MAX_PIXELS pixels (refused before decoding), an image smaller than 16 px on a side.
    """
    path = Path(path)
    if not path.is_file():
        raise ImageError(f"{path}: image file not found")
    try:
        img = _open_within_limit(path, "image", ImageError)
    except UnidentifiedImageError:
        raise ImageError(f"{path}: not an image (PIL cannot identify its format)") from None
    except OSError as exc:
        raise ImageError(f"{path}: corrupt or truncated image, cannot be read: {exc}") from None
    try:
        with img:
            img.load()  # a full decode: a truncated or corrupt file fails here
            oriented = ImageOps.exif_transpose(img)
            rgb = to_rgb(oriented)
            rgb.load()
    except BROKEN as exc:
        # a broken stream, or broken EXIF metadata met by exif_transpose
        raise ImageError(f"{path}: corrupt or truncated image ({img.format or 'unknown format'}): {exc}") from None
    check_min_side(path, rgb.size, ImageError)
    return rgb


def normalised_levels(mean: tuple[float, float, float], std: tuple[float, float, float]) -> np.ndarray:
    """(3, 256) float32: channel c's value for pixel level v, (v / 255 - mean[c]) / std[c] in float32."""
    levels = np.arange(256, dtype=np.uint8)[:, None].astype(np.float32) / np.float32(255.0)
    mean_ = np.asarray(mean, dtype=np.float32)
    std_ = np.asarray(std, dtype=np.float32)
    return np.ascontiguousarray(((levels - mean_) / std_).T)


NORMALISED_LEVELS = normalised_levels(IMAGENET_MEAN, IMAGENET_STD)
_CHANNEL_OFFSETS = (np.arange(3, dtype=np.uint16) * 256)[:, None, None]


def normalise_pixels(pixels: np.ndarray, levels: np.ndarray = NORMALISED_LEVELS) -> torch.Tensor:
    """uint8 RGB pixels (..., H, W, 3) -> (..., 3, H, W) float32, (pixel / 255 - mean) / std per channel.

    A uint8 channel has 256 levels, so each level's float32 value is computed once, by exactly that arithmetic
    (`normalised_levels`), and looked up: the same bits as computing every pixel, at a fraction of the cost. One
    image or a batch gives the same values. `levels` is the (3, 256) table of the reading's mean and std: ImageNet's
    (`NORMALISED_LEVELS`) by default; the video reading passes its own (`evaluate.readings.frames`).
    """
    pixels = np.asarray(pixels)
    if pixels.dtype != np.uint8 or pixels.ndim < 3 or pixels.shape[-1] != 3:
        raise ValueError(f"expected uint8 RGB pixels (..., H, W, 3), got {pixels.dtype} {pixels.shape}")
    index = np.moveaxis(pixels, -1, -3).astype(np.uint16, order="C")  # channel first; level + 256 * channel indexes the table
    index += _CHANNEL_OFFSETS
    import torch  # noqa: PLC0415 (see the module's imports)

    return torch.from_numpy(levels.reshape(-1)[index])


def normalise(img: Image.Image) -> torch.Tensor:
    """RGB PIL image (W x H) -> (3, H, W) float32, (pixel / 255 - mean) / std per channel (ImageNet)."""
    if img.mode != "RGB":
        img = to_rgb(img)
    return normalise_pixels(np.asarray(img, dtype=np.uint8))


def keys480_pixels(img: Image.Image, side: int = KEYS480_SIZE) -> np.ndarray:
    """The keys480 reading's pixels: whole RGB image resized to side x side (PIL LANCZOS; `Geometry.keys480_side`:
    480, or 476 for patch 14): (side, side, 3) uint8."""
    resized = img.resize((side, side), Image.Resampling.LANCZOS)
    return np.asarray(resized, dtype=np.uint8)


def keys480_input(img: Image.Image, side: int = KEYS480_SIZE) -> torch.Tensor:
    """The keys480 reading's input: whole image resized to side x side (PIL LANCZOS), normalised: (3, side, side)."""
    return normalise_pixels(keys480_pixels(img, side))


def tokens224_geometry(width: int, height: int) -> tuple[int, int, int, int]:
    """Resize-then-crop geometry of the tokens224 reading: (new_w, new_h, left, top).

    The short side becomes 224, the long side `int(long * 224 / short)` (truncated, as torchvision's Resize);
    the centre 224 x 224 crop starts `round((long - 224) / 2)` px in along the long side (Python's round, as
    torchvision's CenterCrop), 0 along the short side. 640 x 480 -> (298, 224, 37, 0).
    """
    width, height = int(width), int(height)
    if width < 1 or height < 1:
        raise ValueError(f"image size must be positive, got {width} x {height}")
    size = TOKENS224_SIZE
    if width <= height:
        new_w, new_h = size, int(height * size / width)
    else:
        new_w, new_h = int(width * size / height), size
    left = int(round((new_w - size) / 2))
    top = int(round((new_h - size) / 2))
    return new_w, new_h, left, top


def tokens224_pixels(img: Image.Image) -> np.ndarray:
    """The tokens224 reading's pixels: short side 224 (PIL BICUBIC), centre 224 x 224 crop: (224, 224, 3) uint8."""
    new_w, new_h, left, top = tokens224_geometry(*img.size)
    resized = img.resize((new_w, new_h), Image.Resampling.BICUBIC)
    cropped = resized.crop((left, top, left + TOKENS224_SIZE, top + TOKENS224_SIZE))
    return np.asarray(cropped, dtype=np.uint8)


def tokens224_input(img: Image.Image) -> torch.Tensor:
    """The tokens224 reading's input: short side 224 (BICUBIC), centre crop 224, normalised: (3, 224, 224)."""
    return normalise_pixels(tokens224_pixels(img))
