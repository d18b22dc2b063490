"""What the semantic-segmentation data kinds share (docs/design.md §18, DESIGN 16): their face, the label PNG, the
size check, the sorted listing and the label identity.

A kind (`evaluate.datasets.cocostuff`, `cityscapes`, `potsdam`, `label_folder`) is a `SemanticSet`:

    kind                 its config name ("cocostuff", "cityscapes", "potsdam", "folder")
    from_spec(spec)      built from its config entry (a dict; `evaluate.datasets.open_dataset` opens it by the
                         kind's opener, `evaluate.datasets.kinds.KINDS`)
    image_ids, names     sorted ints and the names in the same order
    image_path(id)       the file the image is read from
    open_image(id)       PIL RGB as stored: no EXIF orientation (the labels are drawn on the stored pixels)
    annotations_sha256   the identity of the label files: sha256 of the canonical JSON of [path relative to the
                         labels' folder, sha256 of the file's bytes] in image-id order; no label is decoded
    class_names          tuple of C names (value i is class_names[i])
    labels(id)           (H, W) uint8: class 0..C-1, IGNORE (255) elsewhere; the only place labels are decoded

Listing a set opens no label and no image: the pairing is checked from folder listings, and a listed image whose
label is missing is refused there. Decoding happens in `labels(id)`: a label of another size than its image (read
from the image's header), a colour label (RGB, RGBA: "colour labels, not class indices") and a value the kind does
not define are refused there, each in one line naming the file (`SemanticDataError`).

Ids: where every name of a set is a decimal number (COCO ids, IIC's Potsdam tiles) the ids are those numbers and
the order is theirs; otherwise ids are the places 0 .. n - 1 in the sorted name listing (as the saliency sets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from evaluate.datasets import DataSetError, files_by_stem
from evaluate.datasets.lists import read_lines, unique
from evaluate.plumbing.provenance import sha256_file, sha256_json
from evaluate.pixels.images import header_size, opened_image, stored_rgb

IGNORE = 255  # the label value that counts neither for nor against a score
SINGLE_CHANNEL_MODES = ("1", "L", "P", "I", "I;16", "I;16L", "I;16B", "I;16N")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
LABEL_SUFFIX = ".png"


class SemanticDataError(DataSetError):
    """A semantic-segmentation data set's folder, list, image or label cannot be used; the message names the file."""


def listed_files(folder: Path, suffixes: tuple[str, ...], what: str) -> dict[str, Path]:
    """`evaluate.datasets.files_by_stem`, refusing with a `SemanticDataError`."""
    return files_by_stem(folder, suffixes, what, SemanticDataError)


def read_list(path: Path, what: str) -> list[str]:
    """The names of a list file in its order (`evaluate.datasets.lists`: UTF-8 with or without a byte-order mark,
    blank lines skipped); a missing or empty list, or a name listed twice (both lines named), is refused."""
    if not path.is_file():
        raise SemanticDataError(f"{path}: {what} not found")
    names = list(unique(read_lines(path, what, SemanticDataError), path, SemanticDataError))
    if not names:
        raise SemanticDataError(f"{path}: the {what} names no image")
    return names


def ids_for(names: Sequence[str], where: Path) -> tuple[list[int], list[str]]:
    """(ids, names) in set order: numeric names -> their numbers, sorted by number; else 0..n-1 over sorted names.
    Two names of one number ("139", "0139") are refused, naming `where` (the list they come from)."""
    if names and all(name.isdigit() for name in names):
        pairs = sorted((int(name), name) for name in names)
        ids = [i for i, _ in pairs]
        if len(set(ids)) != len(ids):
            seen: dict[int, str] = {}
            for i, name in pairs:
                if i in seen:
                    raise SemanticDataError(f"{where}: two images of id {i}: {seen[i]!r} and {name!r}")
                seen[i] = name
        return ids, [name for _, name in pairs]
    ordered = sorted(names)
    return list(range(len(ordered))), ordered


def label_identity(root: Path, paths: Iterable[Path]) -> str:
    """sha256 of the canonical JSON of [path relative to `root` (posix), sha256 of the file] in the given order."""
    return sha256_json([[Path(p).relative_to(root).as_posix(), sha256_file(p)] for p in paths])


def read_label_png(path: Path) -> np.ndarray:
    """A single-channel label image's values as stored: (H, W) int64 (palette images give their indices, as VOC's
    label PNGs hold them). A colour image is refused ("colour labels, not class indices"), and so is a 16-bit one
    holding a value above 255."""
    with opened_image(path, "label", SemanticDataError) as img:
        if img.mode not in SINGLE_CHANNEL_MODES:
            raise SemanticDataError(f"{path}: colour labels, not class indices (PNG mode {img.mode}); give the "
                                    "single-channel label images (class index per pixel)")
        img.load()
        values = np.asarray(img).astype(np.int64)
    if values.size and (values.min() < 0 or values.max() > 255):
        raise SemanticDataError(f"{path}: label values must lie in 0..255, found {int(values.min())} .. "
                                f"{int(values.max())}")
    return values


def check_size(label: np.ndarray, label_path: Path, image_size: tuple[int, int], image_path: Path) -> None:
    """Refuse a label whose (W, H) differs from its image's."""
    height, width = label.shape[:2]
    if (width, height) != tuple(image_size):
        raise SemanticDataError(f"{label_path}: label is {width} x {height} px but its image {image_path.name} is "
                                f"{image_size[0]} x {image_size[1]}")


def lookup_table(mapping: Mapping[int, int], ignored: Iterable[int] = ()) -> np.ndarray:
    """(256,) int16: stored value -> class; `ignored` values -> IGNORE; every other value -1 (refused)."""
    table = np.full(256, -1, dtype=np.int16)
    for value in ignored:
        table[value] = IGNORE
    for value, cls in mapping.items():
        table[value] = cls
    return table


def classes_from_values(values: np.ndarray, table: np.ndarray, path: Path, defined: str) -> np.ndarray:
    """Stored values (H, W) int in 0..255 -> classes (H, W) uint8 through `table` (`lookup_table`); the first value
    the table refuses is one line naming the file and what the kind defines (`defined`)."""
    classes = table[values]
    bad = classes < 0
    if bad.any():
        value = int(values[bad].min())
        raise SemanticDataError(f"{path}: label value {value} is not {defined}")
    return classes.astype(np.uint8)


class SemanticSet:
    """The face every kind shares (module docstring). A kind fills `kind`, `class_names`, the id lists and the two
    path maps, and defines `_decode_labels(id) -> (H, W) uint8 classes` (without the size check, done here)."""

    kind = ""
    has_labels = True

    def __init__(self, *, image_ids: Sequence[int], names: Sequence[str], images: Mapping[int, Path],
                 labels: Mapping[int, Path], labels_root: Path, class_names: Sequence[str]):
        if not image_ids:
            raise SemanticDataError(f"{labels_root}: the {self.kind} set lists no image")
        self.image_ids = [int(i) for i in image_ids]
        self.names = [str(n) for n in names]
        self._images = dict(images)
        self._labels = dict(labels)
        self.labels_root = Path(labels_root)
        self.class_names = tuple(str(n) for n in class_names)

    def __len__(self) -> int:
        return len(self.image_ids)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> SemanticSet:  # pragma: no cover (each kind defines it)
        raise NotImplementedError

    @property
    def labels_path(self) -> Path:
        return self.labels_root

    def listing(self) -> dict:
        """The manifest's listing: image ids and names (`evaluate.datasets.manifest`)."""
        return {"image_ids": list(self.image_ids), "names": list(self.names)}

    def image_path(self, image_id: int) -> Path:
        return self._images[int(image_id)]

    def label_path(self, image_id: int) -> Path:
        return self._labels[int(image_id)]

    def open_image(self, image_id: int) -> Image.Image:
        """The image in RGB as stored (no EXIF orientation)."""
        return stored_rgb(self.image_path(image_id), "image", SemanticDataError)

    def image_size(self, image_id: int) -> tuple[int, int]:
        """(width, height) of the image as stored, read without decoding it."""
        return header_size(self.image_path(image_id), "image", SemanticDataError, oriented=False)

    @cached_property
    def annotations_sha256(self) -> str:
        """The label files' identity from their bytes (module docstring); no label is decoded."""
        return label_identity(self.labels_root, (self.label_path(i) for i in self.image_ids))

    def labels(self, image_id: int) -> np.ndarray:
        """(H, W) uint8: class 0..C-1 per pixel, IGNORE elsewhere; refused (one line naming the file): a colour label,
        a value the kind does not define, a label of another size than its image."""
        classes = self._decode_labels(int(image_id))
        check_size(classes, self.label_path(image_id), self.image_size(image_id), self.image_path(image_id))
        return classes

    def _decode_labels(self, image_id: int) -> np.ndarray:  # pragma: no cover (each kind defines it)
        raise NotImplementedError
