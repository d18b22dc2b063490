"""Cityscapes-27 as STEGO scores it (docs/design.md §18, DESIGN 16): kind `cityscapes`.

Layout, as Cityscapes' leftImg8bit_trainvaltest.zip and gtFine_trainvaltest.zip unpack (config: `root`, `split`,
default val: 500 images):

    <root>/leftImg8bit/<split>/<city>/<x>_leftImg8bit.png     the frame (2048 x 1024)
    <root>/gtFine/<split>/<city>/<x>_gtFine_labelIds.png      its label ids (8-bit)

The _color, _instanceIds, _trainIds and _polygons files beside the label ids are not read. A frame's name is
"<city>/<x>"; the frames are in sorted name order, ids 0 .. n - 1. Class = labelId - 7 for labelIds 7..33 (27
classes, road ... bicycle: STEGO's `CityscapesSeg`, its `first_nonvoid = 7`); every other value is ignore.

Refused by name: the test split and gtCoarse (void labels: no scores), a frame whose label ids are missing (and named
`_gtFine_trainIds.png` where only those are there: 19 classes, another protocol), a colour label.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evaluate.datasets.semantic import (
    SemanticDataError,
    SemanticSet,
    classes_from_values,
    lookup_table,
    read_label_png,
)

KIND = "cityscapes"
DEFAULT_SPLIT = "val"
IMAGE_SUFFIX = "_leftImg8bit.png"
LABEL_SUFFIX = "_gtFine_labelIds.png"
TRAIN_IDS_SUFFIX = "_gtFine_trainIds.png"
FIRST_CLASS_ID = 7  # labelIds 7..33 are the 27 classes (STEGO's `first_nonvoid`)
LAST_CLASS_ID = 33
# STEGO (src/train_segmentation.py, `get_class_labels("cityscapes")`): class c is labelId c + 7
CLASS_NAMES = (
    "road", "sidewalk", "parking", "rail track", "building",
    "wall", "fence", "guard rail", "bridge", "tunnel",
    "pole", "polegroup", "traffic light", "traffic sign", "vegetation",
    "terrain", "sky", "person", "rider", "car",
    "truck", "bus", "caravan", "trailer", "train",
    "motorcycle", "bicycle",
)
LOOKUP = lookup_table({label_id: label_id - FIRST_CLASS_ID for label_id in range(FIRST_CLASS_ID, LAST_CLASS_ID + 1)},
                      ignored=[v for v in range(256) if not FIRST_CLASS_ID <= v <= LAST_CLASS_ID])


class CityscapesSet(SemanticSet):
    """A Cityscapes split with fine label ids (module docstring)."""

    kind = KIND

    def __init__(self, root: str | os.PathLike, split: str = DEFAULT_SPLIT):
        root = Path(root)
        if split == "test":
            raise SemanticDataError(f"{root / 'gtFine' / 'test'}: Cityscapes' test labels are void (the benchmark "
                                    "server holds them); score the val split")
        if not (root / "gtFine").is_dir() and (root / "gtCoarse").is_dir():
            raise SemanticDataError(f"{root / 'gtCoarse'}: coarse labels are another protocol; Cityscapes-27 is "
                                    "scored on gtFine (gtFine_trainvaltest.zip)")
        frames_dir, labels_dir = root / "leftImg8bit" / split, root / "gtFine" / split
        for folder, what in ((frames_dir, "frames (leftImg8bit)"), (labels_dir, "fine labels (gtFine)")):
            if not folder.is_dir():
                raise SemanticDataError(f"{folder}: Cityscapes {what} folder not found")
        frames: dict[str, Path] = {}
        for city in sorted(p for p in frames_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for path in sorted(city.iterdir()):
                if path.name.endswith(IMAGE_SUFFIX) and not path.name.startswith("."):
                    frames[f"{city.name}/{path.name[: -len(IMAGE_SUFFIX)]}"] = path
        if not frames:
            raise SemanticDataError(f"{frames_dir}: no *{IMAGE_SUFFIX} frame in the city folders")
        names = sorted(frames)
        images, labels = {}, {}
        for image_id, name in enumerate(names):
            label = labels_dir / f"{name}{LABEL_SUFFIX}"
            if not label.is_file():
                train_ids = labels_dir / f"{name}{TRAIN_IDS_SUFFIX}"
                if train_ids.is_file():
                    raise SemanticDataError(f"{train_ids}: trainIds (19 classes) are another protocol; Cityscapes-27 "
                                            f"reads the label ids ({label.name})")
                raise SemanticDataError(f"{label}: label missing for frame {frames[name]}")
            images[image_id], labels[image_id] = frames[name], label
        super().__init__(image_ids=list(range(len(names))), names=names, images=images, labels=labels,
                         labels_root=labels_dir, class_names=CLASS_NAMES)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> CityscapesSet:
        """`root` (the folder holding leftImg8bit/ and gtFine/) and `split` (val); `labels: gtCoarse` is refused."""
        if not spec.get("root"):
            raise SemanticDataError("a cityscapes data set needs its root (the folder holding leftImg8bit/ and "
                                    "gtFine/)")
        if spec.get("labels") not in (None, "gtFine"):
            raise SemanticDataError(f"{spec['root']}: labels {spec['labels']!r}: Cityscapes-27 is scored on gtFine's "
                                    "label ids only (gtCoarse and trainIds are other protocols)")
        return cls(spec["root"], str(spec.get("split") or DEFAULT_SPLIT))

    def _decode_labels(self, image_id: int) -> np.ndarray:
        path = self.label_path(image_id)
        return classes_from_values(read_label_png(path), LOOKUP, path, "a Cityscapes label id")
