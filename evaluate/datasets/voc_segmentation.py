"""VOC's segmentation split (docs/design.md §17; DESIGN 15): the object and class maps people drew on PASCAL VOC.

A VOC year folder as the VOC2012 tarball unpacks it (`VOCdevkit/VOC2012/`):

    ImageSets/Segmentation/<split>.txt   the split's image names, one a line (train 1,464, val 1,449, trainval 2,913)
    JPEGImages/<name>.jpg                the photographs (17,125 files; only the split's are read)
    SegmentationObject/<name>.png        the object map: 0 background, 1..n the image's objects, 255 void
    SegmentationClass/<name>.png         the class map: 0 background, 1..20 the classes, 255 void

The PNGs are palette images (mode P, VOC's colour map, `voc_palette`) whose stored INDEX is the label, never the
colour: a grey or RGB conversion turns object 1 into 38 and void into 220. Void is a band about 5 px wide along
every outline plus whole ambiguous regions.

`VocSegmentation(root, split)` gives the face every data set has: `kind`, `names` (in image-id order),
`image_ids` (1..n in the split's sorted name order, as the VOC box sets), `image_path(id)`, `open_image(id)`
(section 3's opening) and `annotations_sha256` (the identity of the label files from their bytes' hashes: hashing
is not opening). The labels are read only when scoring (`labels(id)`): the two maps as uint8 indices and each
object's class, the SegmentationClass index most frequent under its pixels (ties to the lower).

Refused in one line naming the file (`SegmentationDataError`): an empty split file, a name listed twice, a listed
name without its JPEG or either PNG (on construction, from the listing alone); a PNG that is not mode P, a PNG
whose size differs from its JPEG's, a SegmentationClass index in 21..254 (where the labels are read, or by
`check_label_headers`, which reads the PNG and JPEG headers only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from evaluate.datasets import DataSetError
from evaluate.datasets.davis import PALETTE
from evaluate.datasets.lists import read_lines, unique
from evaluate.plumbing.provenance import sha256_file, sha256_json
from evaluate.pixels.images import header_size, open_rgb, opened_image

KIND = "voc-segmentation"
DEFAULT_SPLIT = "val"
BACKGROUND = 0
VOID = 255
CLASSES = 20  # SegmentationClass: 1..20 the classes
OBJECTS, CLASS_MAPS = "SegmentationObject", "SegmentationClass"


class SegmentationDataError(DataSetError):
    """A VOC segmentation split's file is missing or malformed; the message names the file and what is wrong."""


def voc_palette() -> list[int]:
    """VOC's colour map as PIL's flat palette (768 ints): index i's colour spreads i's bits, three at a time, over
    the high bits of R, G and B (1 -> (128, 0, 0), 255 -> (224, 224, 192)); DAVIS's masks use the same map."""
    return list(PALETTE)


def object_classes(objects: np.ndarray, classes: np.ndarray, ids: list[int]) -> list[int]:
    """Each object's class: the `classes` index most frequent under the pixels where `objects` == id, ties to the
    lower index. objects, classes: (H, W) uint8; ids: the objects asked for. Returns one int per id."""
    out = []
    for object_id in ids:
        counts = np.bincount(classes[objects == object_id], minlength=256)
        out.append(int(np.argmax(counts)))  # argmax takes the first (lowest) of equal counts
    return out


@dataclass(frozen=True)
class ImageLabels:
    """One image's labels: objects and classes (H, W) uint8 indices (0 background, 255 void); object_ids, the
    objects present (ascending, without 0 and 255); object_class, each one's class (`object_classes`)."""

    objects: np.ndarray
    classes: np.ndarray
    object_ids: list[int]
    object_class: list[int]

    @property
    def class_of(self) -> dict[int, int]:
        """object id -> its class."""
        return dict(zip(self.object_ids, self.object_class))


def present_objects(objects: np.ndarray) -> list[int]:
    """The object ids of an object map (uint8), ascending, without background (0) and void (255)."""
    return [int(v) for v in np.unique(objects) if v not in (BACKGROUND, VOID)]


class VocSegmentation:
    """A VOC year folder's segmentation split (see the module docstring)."""

    kind = KIND
    has_labels = True

    def __init__(self, root: str | os.PathLike, split: str = DEFAULT_SPLIT):
        self.root = Path(root)
        self.labels_path = self.root / OBJECTS
        self.split = str(split)
        split_file = self.root / "ImageSets" / "Segmentation" / f"{self.split}.txt"
        if not split_file.is_file():
            raise SegmentationDataError(
                f"{split_file}: split file not found (a VOC year folder holds ImageSets/Segmentation/{self.split}.txt, "
                f"JPEGImages/, {OBJECTS}/ and {CLASS_MAPS}/)")
        lines = read_lines(split_file, "split file", SegmentationDataError)
        listed = list(unique(lines, split_file, SegmentationDataError, key=lambda line: line.split()[0]))
        if not listed:
            raise SegmentationDataError(f"{split_file}: the split file lists no image")
        self.split_file = split_file
        self.names = sorted(listed)
        self.image_ids = list(range(1, len(self.names) + 1))
        self._name = dict(zip(self.image_ids, self.names))
        for name in self.names:
            for path, what in ((self._jpeg(name), "image"), (self._png(OBJECTS, name), "object map"),
                               (self._png(CLASS_MAPS, name), "class map")):
                if not path.is_file():
                    raise SegmentationDataError(f"{path}: the {what} of {name}, listed in {split_file}, is missing")

    @classmethod
    def from_spec(cls, spec: dict) -> VocSegmentation:
        """From a config entry: `root` (the year folder) and `split` (default val)."""
        return cls(spec["root"], spec.get("split") or DEFAULT_SPLIT)

    def listing(self) -> dict:
        """The manifest's listing: image ids and names (`evaluate.datasets.manifest`)."""
        return {"image_ids": list(self.image_ids), "names": list(self.names)}

    def _jpeg(self, name: str) -> Path:
        return self.root / "JPEGImages" / f"{name}.jpg"

    def _png(self, folder: str, name: str) -> Path:
        return self.root / folder / f"{name}.png"

    def name(self, image_id: int) -> str:
        return self._name[int(image_id)]

    def image_path(self, image_id: int) -> Path:
        return self._jpeg(self.name(image_id))

    def open_image(self, image_id: int) -> Image.Image:
        """The image as section 3 opens it: RGB PIL, EXIF orientation applied."""
        return open_rgb(self.image_path(image_id))

    def label_paths(self, image_id: int) -> tuple[Path, Path]:
        """(object map, class map) files of an image."""
        name = self.name(image_id)
        return self._png(OBJECTS, name), self._png(CLASS_MAPS, name)

    @property
    def annotations_sha256(self) -> str:
        """sha256 of the split's label files' hashes, [object map, class map] per image in id order (their bytes,
        not their content read)."""
        return sha256_json([[sha256_file(path) for path in self.label_paths(i)] for i in self.image_ids])

    def _label_map(self, path: Path, image_id: int, decode: bool) -> np.ndarray | None:
        """A label PNG's indices (H, W) uint8 (None where `decode` is False: header checks only), checked to be a
        palette PNG the size of its image."""
        with opened_image(path, "label map", SegmentationDataError) as img:
            if img.mode != "P":
                raise SegmentationDataError(
                    f"{path}: a mode {img.mode} PNG; VOC's label maps are palette PNGs (mode P) whose index is the "
                    "label (a grey or RGB conversion turns object 1 into 38 and void into 220): use the files as "
                    "downloaded")
            size = img.size
            indices = np.array(img, dtype=np.uint8) if decode else None
        image_size = header_size(self.image_path(image_id), "image", SegmentationDataError)
        if size != image_size:
            raise SegmentationDataError(f"{path}: {size[0]} x {size[1]} px, its image {self.image_path(image_id)} is "
                                        f"{image_size[0]} x {image_size[1]}")
        return indices

    def _checked_classes(self, classes: np.ndarray, path: Path) -> np.ndarray:
        bad = [int(v) for v in np.unique(classes) if CLASSES < v < VOID]
        if bad:
            raise SegmentationDataError(f"{path}: class index {bad[0]} (a class map holds 0 background, 1..{CLASSES} "
                                        f"the classes and {VOID} void)")
        return classes

    def object_map(self, image_id: int) -> np.ndarray:
        """The image's SegmentationObject indices: (H, W) uint8, 0 background, 1..n objects, 255 void."""
        return self._label_map(self.label_paths(image_id)[0], image_id, decode=True)

    def class_map(self, image_id: int) -> np.ndarray:
        """The image's SegmentationClass indices: (H, W) uint8, 0 background, 1..20 classes, 255 void."""
        path = self.label_paths(image_id)[1]
        return self._checked_classes(self._label_map(path, image_id, decode=True), path)

    def labels(self, image_id: int) -> ImageLabels:
        """Both maps of an image, its objects and their classes: reading them is opening the labels."""
        objects, classes = self.object_map(image_id), self.class_map(image_id)
        ids = present_objects(objects)
        return ImageLabels(objects, classes, ids, object_classes(objects, classes, ids))

    def check_label_headers(self) -> None:
        """Every listed label PNG is mode P and its image's size, from the PNG and JPEG headers alone (no label is
        decoded); SegmentationDataError names the first that is not."""
        for image_id in self.image_ids:
            for path in self.label_paths(image_id):
                self._label_map(path, image_id, decode=False)
