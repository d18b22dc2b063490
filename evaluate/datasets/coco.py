"""COCO-format data sets (docs/design.md §4): an images folder and an instances annotation JSON, read with pycocotools.

The JSON is validated before pycocotools sees it, so a bad file fails with a `DatasetError` naming the file and
the offending image / annotation / category id rather than a KeyError deep inside pycocotools:

- its structure, as every COCO file's (`evaluate.datasets.cocofile`): not JSON, not an object, `images` missing or
  empty, an image without `id`/`file_name`/`height`/`width`, duplicate ids (naming both entries);
- an annotation without `id`/`image_id`/`category_id`/`segmentation`/`iscrowd`/`area`/`bbox`, for an unknown image
  or an unknown category, a polygon with fewer than 3 points (6 numbers) or an odd count, an RLE whose `size` is
  not the image's (height, width); duplicate ids.

Image files are checked when read (`open_image`) or all at once by `validate_files()`.

Crowd regions (`iscrowd = 1`) are ignore regions: `ground_truth` returns them apart from the objects.
A file with images but no annotations (key absent or empty list) is an unlabelled data set: `has_labels` is False;
its features can be extracted but nothing can be scored on it.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import warnings
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

from evaluate.datasets import DataSetError
from evaluate.datasets.cocofile import checked_entry, image_entries, is_int, is_number, read_coco_json
from evaluate.pixels.images import open_rgb
from evaluate.plumbing.provenance import sha256_file

ANNOTATION_KEYS = ("id", "image_id", "category_id", "segmentation", "iscrowd", "area", "bbox")
CATEGORY_KEYS = ("id", "name")

log = logging.getLogger("evaluate.datasets.coco")


class DatasetError(DataSetError):
    """An annotation file or images folder that does not describe a usable COCO data set."""


class CocoDataset:
    """A COCO instances data set: `images_dir` holds the files named by `annotations_path`'s `images[].file_name`.

    Attributes: `.image_ids` sorted list[int]; `.category_ids` sorted list[int]; `.categories` id -> name; `.coco` a pycocotools COCO built
    from the validated JSON (without its prints); `.annotations_sha256` hex sha256 of the annotation file's bytes.
    """

    kind = "coco"

    def __init__(self, images_dir: str | os.PathLike, annotations_path: str | os.PathLike):
        self.images_dir = Path(images_dir)
        self.annotations_path = self.labels_path = Path(annotations_path)
        data = read_coco_json(self.annotations_path, DatasetError)
        self._validate(data)
        coco = COCO()
        coco.dataset = data
        with contextlib.redirect_stdout(io.StringIO()):
            coco.createIndex()
        self.coco = coco
        self.image_ids: list[int] = sorted(coco.imgs)
        self.category_ids: list[int] = sorted(coco.cats)
        self.categories: dict[int, str] = {int(c): str(coco.cats[c]["name"]) for c in self.category_ids}
        self.has_labels: bool = bool(data.get("annotations"))
        self._anns_by_image: dict[int, list[dict]] = {i: [] for i in self.image_ids}
        for ann in data.get("annotations", []):
            self._anns_by_image[ann["image_id"]].append(ann)
        for anns in self._anns_by_image.values():
            anns.sort(key=lambda a: a["id"])

    @classmethod
    def from_spec(cls, spec: dict) -> CocoDataset:
        """From its config entry's spec (`images`, `annotations`)."""
        return cls(spec["images"], spec["annotations"])

    def __repr__(self) -> str:
        return f"CocoDataset({str(self.images_dir)!r}, {str(self.annotations_path)!r}: {len(self)} images)"

    def __len__(self) -> int:
        return len(self.image_ids)

    # ---- reading and validating the JSON ------------------------------------------------------------------------

    def _fail(self, what: str) -> DatasetError:
        return DatasetError(f"{self.annotations_path}: {what}")

    def _entry(self, section: str, index: int, entry: Any, required: tuple, seen: dict[int, int], noun: str,
               name_id: bool = True) -> str:
        return checked_entry(self.annotations_path, DatasetError, section, index, entry, required, seen, noun, name_id)

    def _validate(self, data: dict) -> None:
        """The file's structure (`evaluate.datasets.cocofile`; `read_coco_json` checked its three lists), then its
        categories and annotations (module docstring)."""
        sizes = {i: (e["height"], e["width"]) for i, e in image_entries(data, self.annotations_path,
                                                                          DatasetError).items()}
        category_ids: dict[int, int] = {}
        for index, cat in enumerate(data["categories"]):
            self._entry("categories", index, cat, CATEGORY_KEYS, category_ids, "category", name_id=False)

        annotation_ids: dict[int, int] = {}
        for index, ann in enumerate(data["annotations"]):
            where = self._entry("annotations", index, ann, ANNOTATION_KEYS, annotation_ids, "annotation")
            if ann["image_id"] not in sizes:
                raise self._fail(f"{where}: image_id {ann['image_id']!r} is not among the images")
            if ann["category_id"] not in category_ids:
                raise self._fail(f"{where}: category_id {ann['category_id']!r} is not among the categories")
            if ann["iscrowd"] not in (0, 1) or isinstance(ann["iscrowd"], bool):
                raise self._fail(f"{where}: 'iscrowd' must be 0 or 1, got {ann['iscrowd']!r}")
            if not is_number(ann["area"]):
                raise self._fail(f"{where}: 'area' must be a number, got {ann['area']!r}")
            bbox = ann["bbox"]
            if not (isinstance(bbox, list) and len(bbox) == 4 and all(is_number(v) for v in bbox)):
                raise self._fail(f"{where}: 'bbox' must be [x, y, width, height], got {bbox!r}")
            self._validate_segmentation(ann["segmentation"], sizes[ann["image_id"]], where)

    def _validate_segmentation(self, segm: Any, size: tuple[int, int], where: str) -> None:
        if isinstance(segm, list):
            if not segm:
                raise self._fail(f"{where}: 'segmentation' is an empty list of polygons")
            for k, poly in enumerate(segm):
                if not isinstance(poly, list) or not all(is_number(v) for v in poly):
                    raise self._fail(f"{where}: polygon {k} must be a flat list of numbers [x1, y1, x2, y2, ...]")
                if len(poly) < 6:
                    raise self._fail(
                        f"{where}: polygon {k} has {len(poly)} numbers; a polygon needs at least 3 points (6 numbers)"
                    )
                if len(poly) % 2:
                    raise self._fail(f"{where}: polygon {k} has an odd count of numbers ({len(poly)}), not x, y pairs")
            return
        if isinstance(segm, dict):
            if "counts" not in segm or "size" not in segm:
                raise self._fail(f"{where}: an RLE 'segmentation' needs 'counts' and 'size'")
            if list(segm["size"]) != [size[0], size[1]]:
                raise self._fail(
                    f"{where}: RLE size {segm['size']!r} is not the image's [height, width] {[size[0], size[1]]}"
                )
            counts = segm["counts"]
            if isinstance(counts, list):
                if not all(is_int(c) and c >= 0 for c in counts):
                    raise self._fail(f"{where}: RLE counts must be non-negative integers")
                if sum(counts) != size[0] * size[1]:
                    raise self._fail(
                        f"{where}: RLE counts sum to {sum(counts)}, not height x width = {size[0] * size[1]}"
                    )
            elif not isinstance(counts, str):
                raise self._fail(f"{where}: RLE counts must be a list of integers or a compressed string")
            return
        raise self._fail(f"{where}: 'segmentation' must be a list of polygons or an RLE object")

    # ---- images ---------------------------------------------------------------------------------------------------

    def _image(self, image_id: int) -> dict:
        try:
            return self.coco.imgs[image_id]
        except KeyError:
            raise DatasetError(f"{self.annotations_path}: no image with id {image_id!r}") from None

    def image_path(self, image_id: int) -> Path:
        """The image file's path: images_dir / file_name (existence is checked by `open_image`/`validate_files`)."""
        return self.images_dir / self._image(image_id)["file_name"]

    def image_size(self, image_id: int) -> tuple[int, int]:
        """(height, width) as the annotation file records it."""
        img = self._image(image_id)
        return int(img["height"]), int(img["width"])

    def open_image(self, image_id: int) -> Image.Image:
        """The image as RGB (see `evaluate.pixels.images.open_rgb`), checked to have the annotated size.

        Raises DatasetError for a missing file or a size other than the annotation file's (height, width), and
        ImageError (naming the file) for a corrupt one.
        """
        path = self.image_path(image_id)
        if not path.is_file():
            raise DatasetError(
                f"{path}: image file not found (image id {image_id} of {self.annotations_path}, "
                f"images folder {self.images_dir})"
            )
        img = open_rgb(path)
        height, width = self.image_size(image_id)
        if img.size != (width, height):
            raise DatasetError(
                f"{path}: image is {img.size[0]} x {img.size[1]} px (after EXIF orientation) but "
                f"{self.annotations_path} says {width} x {height} for image id {image_id}"
            )
        return img

    def validate_files(self) -> None:
        """Check every image file exists; DatasetError listing the missing ones (first 10) otherwise."""
        missing = [str(self.image_path(i)) for i in self.image_ids if not self.image_path(i).is_file()]
        if missing:
            shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
            raise DatasetError(
                f"{self.annotations_path}: {len(missing)} of {len(self)} image files missing in "
                f"{self.images_dir}: {shown}"
            )

    # ---- labels ---------------------------------------------------------------------------------------------------

    def instances(self, image_id: int) -> list[dict]:
        """The image's annotations (crowd included), sorted by annotation id. Read-only: do not modify them."""
        self._image(image_id)
        return self._anns_by_image[image_id]

    def instance_mask(self, ann: dict) -> np.ndarray:
        """One annotation's mask at the image's size: bool (H, W)."""
        with quiet_pycocotools():
            return self.coco.annToMask(ann).astype(bool)

    def ground_truth(self, image_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(objects, crowd): bool (H, W) each; objects = union of non-crowd masks, crowd = union of crowd masks.

        Crowd pixels are ignore regions; the two may overlap (the scores remove crowd pixels from both sides).
        """
        height, width = self.image_size(image_id)
        objects = np.zeros((height, width), dtype=bool)
        crowd = np.zeros((height, width), dtype=bool)
        for ann in self.instances(image_id):
            mask = self.instance_mask(ann)
            if ann["iscrowd"]:
                crowd |= mask
            else:
                objects |= mask
        return objects, crowd

    @cached_property
    def annotations_sha256(self) -> str:
        """Hex sha256 of the annotation file's bytes."""
        return sha256_file(self.annotations_path)

    @property
    def names(self) -> list[str]:
        """The image files' names, in image-id order."""
        return [self._image(i)["file_name"] for i in self.image_ids]

    def listing(self) -> dict:
        """The manifest's listing (`evaluate.datasets.manifest`): image ids, file names and the (height, width)
        each image is annotated at, once every image file was found (`validate_files`)."""
        self.validate_files()
        return {"image_ids": list(self.image_ids), "names": self.names,
                "sizes": [list(self.image_size(i)) for i in self.image_ids]}


def rle_from_mask(mask: np.ndarray) -> dict:
    """bool (H, W) -> uncompressed COCO RLE {"size": [H, W], "counts": [...]} (column-major runs, zeros first)."""
    mask = np.asarray(mask, dtype=bool)
    flat = mask.flatten(order="F").astype(np.int8)
    changes = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], changes, [flat.size]])
    counts = np.diff(bounds).tolist()
    if flat.size and flat[0] == 1:
        counts = [0] + counts
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": [int(c) for c in counts]}


def mask_area_bbox(mask: np.ndarray) -> tuple[int, list[float]]:
    """bool (H, W) -> (pixel count, COCO bbox [x, y, width, height] as pycocotools computes it)."""
    with quiet_pycocotools():
        rle = mask_utils.encode(np.asfortranarray(np.asarray(mask, dtype=np.uint8)))
        return int(mask_utils.area(rle)), [float(v) for v in mask_utils.toBbox(rle)]


@contextlib.contextmanager
def quiet_pycocotools():
    """Silence pycocotools' NumPy-2 `__array__ ... copy keyword` DeprecationWarning (harmless, from its Cython)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*copy keyword.*", category=DeprecationWarning)
        yield


def manifest_sizes(manifest: dict) -> dict[int, tuple[int, int]]:
    """image id -> (height, width) from a manifest."""
    return {int(i): (int(h), int(w)) for i, (h, w) in zip(manifest["image_ids"], manifest["sizes"])}


def read_category_names(annotations_path: str | os.PathLike) -> dict[int, str]:
    """Category id -> name of a COCO annotation file, read without validating the rest (a config-time check).

    Reading the category list is not an opening of the data set's labels: it says which classes exist, nothing
    about any image.
    """
    path = Path(annotations_path)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return {int(c["id"]): str(c["name"]) for c in data.get("categories", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DatasetError(f"{path}: cannot read its category list ({type(exc).__name__}: {exc})") from None
