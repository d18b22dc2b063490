"""Saliency data sets (docs/design.md §16): a folder of images and a folder of masks, paired by name.

    <images>/<name>.jpg     the photo (.jpg, .jpeg or .png)
    <masks>/<name>.png      its mask, 8-bit grey (PIL 'L'); any pixel above 0 is salient

The pairs are sorted by file name (TokenCut's `sorted(os.listdir(...))`). The three published sets work as they are
downloaded, given the set's root folder (`SET_LAYOUTS`): ECSSD `images/` + `ground_truth_mask/`, DUTS-TE
`DUTS-TE-Image/` + `DUTS-TE-Mask/`, DUT-OMRON `DUT-OMRON-image/` + `pixelwiseGT-new-PNG/`, or `img/` + `gt/` as
TokenCut's download scripts rename them; or any two folders named explicitly. Files whose names start with a dot,
and files of other suffixes, are not part of a set.

Listing a set opens no file: `open_saliency_set` checks the pairing from folder listings alone (an image without a
mask, a mask without an image, two images of one name: one line naming the file). Files are decoded where a job
reads them: `read_image` (the photo in RGB, as stored: no EXIF orientation, as the authors' `Image.open(...)
.convert('RGB')`), `read_truth` (the mask, its size checked against the image's header); an unreadable file, a
file over the pixel limit (`evaluate.pixels.images.MAX_PIXELS`), a size mismatch, or a reading's image smaller
than one patch (`SaliencySet.open_image`) is one line naming the file.

Label identity (for the ledger's openings): `SaliencySet.annotations_sha256`, the sha256 of the canonical JSON of
the sorted [mask file name, sha256 of the file] pairs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from evaluate.plumbing.provenance import sha256_file, sha256_json
from evaluate.datasets import DataSetError, files_by_stem
from evaluate.pixels.images import check_min_side, header_size, opened_image, stored_rgb

SET_LAYOUTS = {  # the set's name -> (images folder, masks folder) under its root, as each download unpacks
    "ecssd": ("images", "ground_truth_mask"),
    "duts-te": ("DUTS-TE-Image", "DUTS-TE-Mask"),
    "dut-omron": ("DUT-OMRON-image", "pixelwiseGT-new-PNG"),
    "tokencut": ("img", "gt"),  # any of the three after TokenCut's download scripts renamed the folders
}
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
MASK_SUFFIX = ".png"


class SaliencyDataError(DataSetError):
    """A saliency folder, image or mask that cannot be used; the message names the file."""


@dataclass(frozen=True)
class SaliencyPair:
    """One image and its mask: `name` the shared file stem."""

    name: str
    image: Path
    mask: Path


@dataclass(frozen=True)
class SaliencySet:
    """A saliency data set: `pairs` sorted by image file name; `images`, `masks` the two folders. Its images are
    ids 0 .. n - 1, their position in that order (`image_ids`, `names` the shared file stems)."""

    images: Path
    masks: Path
    pairs: tuple[SaliencyPair, ...]

    kind = "saliency"
    has_labels = True

    @classmethod
    def from_spec(cls, spec: dict) -> SaliencySet:
        """From its config entry's spec: its `root`, or its `images` and `masks` folders."""
        if spec.get("root"):
            return open_saliency_set(spec["root"])
        return open_saliency_set(images=spec["images"], masks=spec["masks"])

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def labels_path(self) -> Path:
        return self.masks

    @property
    def image_ids(self) -> list[int]:
        return list(range(len(self.pairs)))

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.pairs]

    def image_path(self, image_id: int) -> Path:
        return self.pairs[int(image_id)].image

    def open_image(self, image_id: int) -> Image.Image:
        """Image `image_id` in RGB as stored (`read_image`), refused naming the file where it is smaller than one
        patch on a side (`evaluate.pixels.images.check_min_side`), as every reading's image is."""
        image = read_image(self.pairs[int(image_id)])
        check_min_side(self.pairs[int(image_id)].image, image.size, SaliencyDataError)
        return image

    def listing(self) -> dict:
        """The manifest's listing: ids, names and the two folders (`evaluate.datasets.manifest`)."""
        return {"image_ids": self.image_ids, "names": self.names, "images": str(self.images),
                "masks": str(self.masks)}

    @property
    def annotations_sha256(self) -> str:
        """sha256 of the canonical JSON of the sorted [mask file name, sha256 of the mask file] pairs."""
        return sha256_json(sorted([p.mask.name, sha256_file(p.mask)] for p in self.pairs))


def set_folders(root: str | os.PathLike) -> tuple[Path, Path]:
    """(images folder, masks folder) of a published set's root, by the folder names of `SET_LAYOUTS`."""
    root = Path(root)
    if not root.is_dir():
        raise SaliencyDataError(f"{root}: saliency data set folder not found")
    for images, masks in SET_LAYOUTS.values():
        if (root / images).is_dir() and (root / masks).is_dir():
            return root / images, root / masks
    names = "; ".join(f"{name}: {i}/ + {m}/" for name, (i, m) in SET_LAYOUTS.items())
    raise SaliencyDataError(
        f"{root}: not a saliency set's folder; expected an images and a masks folder ({names}), "
        "or name the two folders explicitly"
    )


def open_saliency_set(root: str | os.PathLike | None = None, *, images: str | os.PathLike | None = None,
                      masks: str | os.PathLike | None = None) -> SaliencySet:
    """The pairs of a saliency set, from its root (one of `SET_LAYOUTS`) or from explicit images and masks folders.

    Refused, one line naming the file: a folder that is missing or holds no image; an image without a mask; a mask
    without an image; two images (or masks) of one name.
    """
    if root is not None and (images is not None or masks is not None):
        raise SaliencyDataError(f"{root}: give a set's root or its images and masks folders, not both")
    if root is not None:
        images_dir, masks_dir = set_folders(root)
    elif images is None or masks is None:
        raise SaliencyDataError("a saliency set needs its root folder, or both an images and a masks folder")
    else:
        images_dir, masks_dir = Path(images), Path(masks)
    image_files = files_by_stem(images_dir, IMAGE_SUFFIXES, "image", SaliencyDataError)
    mask_files = files_by_stem(masks_dir, (MASK_SUFFIX,), "mask", SaliencyDataError)
    if not image_files:
        raise SaliencyDataError(f"{images_dir}: no image ({', '.join(IMAGE_SUFFIXES)}) in the images folder")
    for stem, path in image_files.items():
        if stem not in mask_files:
            raise SaliencyDataError(f"{path}: image without a mask (expected {masks_dir / (stem + MASK_SUFFIX)})")
    for stem, path in mask_files.items():
        if stem not in image_files:
            raise SaliencyDataError(f"{path}: mask without an image (no {stem}.jpg in {images_dir})")
    pairs = sorted((SaliencyPair(stem, path, mask_files[stem]) for stem, path in image_files.items()),
                   key=lambda p: p.image.name)
    return SaliencySet(images_dir, masks_dir, tuple(pairs))


def _decoded(path: Path, what: str) -> Image.Image:
    """The whole file decoded (a truncated or corrupt file fails here)."""
    with opened_image(path, what, SaliencyDataError) as img:
        img.load()
        return img.copy()


def image_size(path: str | os.PathLike) -> tuple[int, int]:
    """(width, height) of an image file as stored, from its header (no decoding)."""
    return header_size(path, "image", SaliencyDataError, oriented=False)


def read_image(pair: SaliencyPair) -> Image.Image:
    """The pair's photo in RGB as stored (no EXIF orientation, the sets' masks are drawn on the stored pixels)."""
    return stored_rgb(pair.image, "image", SaliencyDataError)


def read_mask_levels(pair: SaliencyPair) -> np.ndarray:
    """The pair's mask as 8-bit grey: (H, W) uint8 (PIL's 'L' conversion of whatever mode the file holds), its size
    checked against the image's (header only)."""
    mask = _decoded(pair.mask, "mask")
    width, height = image_size(pair.image)
    if mask.size != (width, height):
        raise SaliencyDataError(
            f"{pair.mask}: mask is {mask.size[0]} x {mask.size[1]} px but its image {pair.image.name} is "
            f"{width} x {height}"
        )
    return np.asarray(mask.convert("L"), dtype=np.uint8)


def read_truth(pair: SaliencyPair) -> np.ndarray:
    """The pair's truth: (H, W) bool, every mask pixel above 0 salient (TokenCut's reading)."""
    return read_mask_levels(pair) > 0
