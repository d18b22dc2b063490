"""Any labelled image folder (docs/design.md §18, DESIGN 16): kind `folder`.

    <images>/<name>.jpg|.jpeg|.png    the photo
    <labels>/<name>.png               its label: single-channel (8-bit grey or palette indices), value = class
    <classes>                         a text file: line i names value i (C lines: values 0..C-1; 255 is ignore)

or STEGO's `DirectoryDataset` layout (config: `root`, `split`): <root>/imgs/<split>/ and <root>/labels/<split>/.
Images and labels pair by file stem; the images are in sorted file-name order, ids 0 .. n - 1 (a name's place).

Refused by name: an image without a label, a label without an image, two images of one stem, an empty or missing
classes file (or a blank line among its names, or more than 255 classes), a colour label, a label of another size
than its image, a value >= C other than 255.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evaluate.datasets.semantic import (
    IGNORE,
    IMAGE_SUFFIXES,
    LABEL_SUFFIX,
    SemanticDataError,
    SemanticSet,
    classes_from_values,
    listed_files,
    lookup_table,
    read_label_png,
)

KIND = "folder"
DEFAULT_SPLIT = "val"


def read_class_names(path: Path) -> tuple[str, ...]:
    """The names of a classes file, line i naming value i (trailing blank lines dropped)."""
    if not path.is_file():
        raise SemanticDataError(f"{path}: classes file not found (a text file, line i naming label value i)")
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines()]
    except UnicodeDecodeError as exc:
        raise SemanticDataError(f"{path}: classes file is not UTF-8 text ({exc})") from None
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise SemanticDataError(f"{path}: the classes file names no class")
    if "" in lines:
        raise SemanticDataError(f"{path}: line {lines.index('') + 1} is blank; line i names label value i")
    if len(lines) > IGNORE:
        raise SemanticDataError(f"{path}: {len(lines)} classes; at most {IGNORE} (values 0..254, 255 is ignore)")
    return tuple(lines)


class LabelFolderSet(SemanticSet):
    """Images and single-channel label PNGs paired by stem, with a classes file (module docstring)."""

    kind = KIND

    def __init__(self, images: str | os.PathLike, labels: str | os.PathLike, classes: str | os.PathLike):
        images_dir, labels_dir = Path(images), Path(labels)
        class_names = read_class_names(Path(classes))
        image_files = listed_files(images_dir, IMAGE_SUFFIXES, "image")
        label_files = listed_files(labels_dir, (LABEL_SUFFIX,), "label")
        if not image_files:
            raise SemanticDataError(f"{images_dir}: no image ({', '.join(IMAGE_SUFFIXES)}) in the images folder")
        for stem, path in image_files.items():
            if stem not in label_files:
                raise SemanticDataError(f"{labels_dir / (stem + LABEL_SUFFIX)}: label missing for image {path.name}")
        for stem, path in label_files.items():
            if stem not in image_files:
                raise SemanticDataError(f"{path}: label without an image (no {stem}.jpg or .png in {images_dir})")
        ordered = sorted(image_files.values(), key=lambda p: p.name)
        ids = list(range(len(ordered)))
        super().__init__(image_ids=ids, names=[p.stem for p in ordered], images=dict(zip(ids, ordered)),
                         labels={i: label_files[p.stem] for i, p in zip(ids, ordered)}, labels_root=labels_dir,
                         class_names=class_names)
        self.lookup = lookup_table({v: v for v in range(len(class_names))}, ignored=(IGNORE,))

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> LabelFolderSet:
        """`images`, `labels` and `classes`; or `root` (STEGO's imgs/<split>/ + labels/<split>/), `split` and
        `classes`."""
        if not spec.get("classes"):
            raise SemanticDataError("a folder data set needs its classes file (line i names label value i)")
        if spec.get("root"):
            if spec.get("images") or spec.get("labels"):
                raise SemanticDataError(f"{spec['root']}: give a folder set's root or its images and labels, not "
                                        "both")
            root, split = Path(spec["root"]), str(spec.get("split") or DEFAULT_SPLIT)
            return cls(root / "imgs" / split, root / "labels" / split, spec["classes"])
        if not (spec.get("images") and spec.get("labels")):
            raise SemanticDataError("a folder data set needs its images and labels folders (or STEGO's root and "
                                    "split)")
        return cls(spec["images"], spec["labels"], spec["classes"])

    def _decode_labels(self, image_id: int) -> np.ndarray:
        path = self.label_path(image_id)
        c = len(self.class_names)
        return classes_from_values(read_label_png(path), self.lookup, path,
                                   f"a class of {path.parent} (0..{c - 1}, {c} classes) or 255 (ignore)")
