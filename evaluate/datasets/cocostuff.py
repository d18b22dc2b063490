"""COCO-Stuff-27 as STEGO, HP and PriMaPs score it (docs/design.md §18, DESIGN 16): kind `cocostuff`.

Layout, as STEGO's and PriMaPs' download unpacks it (config: `root`, `split`, default val2017):

    <root>/images/<split>/<name>.jpg                                  COCO's photo
    <root>/annotations/<split>/<name>.png                             cocostuff's stuffthingmaps: 8-bit fine ids
    <root>/curated/<split>/Coco164kFull_Stuff_Coarse_7.txt            IIC's curated list, one name a line

or the three given apart (config: `images`, `labels`, `list`: COCO's val2017/, stuffthingmaps_trainval2017's
val2017/ and the curated list). Only listed images are read; the list selects and never orders (ids are the COCO ids,
sorted). A label holds fine ids 0-181 (COCO-Stuff's category id - 1) and 255 (unlabelled: ignore); the fine ids map
to 27 classes by STEGO's `Coco.fine_to_coarse` (FINE_TO_COARSE), named by its `get_class_labels` (CLASS_NAMES):
12 thing classes (COCO's supercategories) then 15 stuff classes, "food" and "furniture" twice (thing, then stuff).

Refused by name: a root without the curated list (its 5,000 val2017 images are not the published set); COCO-Stuff's
JSON annotations (stuff_val2017.json) or the 10k release's .mat labels where the PNG labels should be; a listed image
or label missing; a label value that is neither a fine id nor 255.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evaluate.datasets.semantic import (
    IGNORE,
    SemanticDataError,
    SemanticSet,
    classes_from_values,
    ids_for,
    lookup_table,
    read_label_png,
    read_list,
)

KIND = "cocostuff"
DEFAULT_SPLIT = "val2017"
CURATED_LIST = "Coco164kFull_Stuff_Coarse_7.txt"  # IIC's curated COCO-Stuff list, STEGO's `subset=7`

# STEGO (mhamilton723/STEGO, src/data.py, class Coco, `fine_to_coarse`; read at commit 009bc45, the table unchanged
# from eb4d6b5 which DESIGN 16 names): FINE_TO_COARSE[fine id] is the coarse class. Things (fine 0-90) go to COCO's
# supercategories, stuff (91-181) to COCO-Stuff's.
FINE_TO_COARSE = (
    9, 11, 11, 11, 11, 11, 11, 11, 11, 8, 8, 8, 8, 8, 8, 7, 7, 7, 7, 7,  # 0-19
    7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6, 10, 10, 10, 10, 10, 10, 10,  # 20-39
    10, 10, 10, 5, 5, 5, 5, 5, 5, 5, 5, 2, 2, 2, 2, 2, 2, 2, 2, 2,  # 40-59
    2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 1, 1, 1,  # 60-79
    1, 1, 1, 4, 4, 4, 4, 4, 4, 4, 4, 17, 17, 22, 20, 20, 22, 15, 25, 16,  # 80-99
    13, 12, 12, 17, 17, 23, 15, 15, 17, 15, 21, 15, 25, 13, 13, 13, 13, 13, 22, 26,  # 100-119
    14, 14, 15, 22, 21, 21, 24, 20, 22, 15, 17, 16, 15, 22, 24, 21, 17, 25, 16, 21,  # 120-139
    17, 22, 16, 21, 21, 25, 21, 26, 21, 24, 20, 17, 14, 21, 26, 15, 23, 20, 21, 24,  # 140-159
    15, 24, 22, 25, 15, 20, 17, 17, 22, 14, 18, 18, 18, 18, 18, 18, 18, 26, 26, 19,  # 160-179
    19, 24,  # 180-181
)
# STEGO (src/train_segmentation.py, `get_class_labels("cocostuff27")`)
CLASS_NAMES = (
    "electronic", "appliance", "food", "furniture", "indoor",
    "kitchen", "accessory", "animal", "outdoor", "person",
    "sports", "vehicle", "ceiling", "floor", "food",
    "furniture", "rawmaterial", "textile", "wall", "window",
    "building", "ground", "plant", "sky", "solid",
    "structural", "water",
)
LOOKUP = lookup_table(dict(enumerate(FINE_TO_COARSE)), ignored=(IGNORE,))
JSON_HINT = ("COCO-Stuff's JSON annotations are not read; give the stuffthingmaps PNGs (stuffthingmaps_trainval2017"
             ".zip, one 8-bit PNG of fine ids per image), as STEGO's download unpacks them")
TEN_K_HINT = ("COCO-Stuff-10k's .mat labels are another release (10,000 images), not the published COCO-Stuff-27 set "
              "(IIC's curated list of the 164k release's stuffthingmaps PNGs)")


def _refuse_other_releases(annotations: Path) -> None:
    """Where the PNG labels should be but are not: COCO-Stuff's JSON files or the 10k release's .mat files there (or
    a JSON file given as the labels) are refused by name."""
    if annotations.is_file() and annotations.suffix.lower() == ".json":
        raise SemanticDataError(f"{annotations}: {JSON_HINT}")
    if annotations.is_dir():
        for path in sorted(annotations.iterdir()):
            if path.suffix.lower() == ".json" and path.name.startswith("stuff"):
                raise SemanticDataError(f"{path}: {JSON_HINT}")
            if path.suffix.lower() == ".mat":
                raise SemanticDataError(f"{path}: {TEN_K_HINT}")


class CocoStuffSet(SemanticSet):
    """COCO-Stuff-27 (module docstring): `images`, `labels` folders and the curated `list_path`."""

    kind = KIND

    def __init__(self, images: str | os.PathLike, labels: str | os.PathLike, list_path: str | os.PathLike):
        images_dir, labels_dir, list_file = Path(images), Path(labels), Path(list_path)
        if labels_dir.suffix.lower() == ".json":
            _refuse_other_releases(labels_dir)
        for folder, what in ((images_dir, "images"), (labels_dir, "labels")):
            if not folder.is_dir():
                raise SemanticDataError(f"{folder}: COCO-Stuff {what} folder not found")
        names = read_list(list_file, "curated image list")
        ids, names = ids_for(sorted(names), list_file)
        image_files, label_files = set(os.listdir(images_dir)), set(os.listdir(labels_dir))
        images_by_id, labels_by_id = {}, {}
        for image_id, name in zip(ids, names):
            if f"{name}.jpg" not in image_files:
                raise SemanticDataError(f"{images_dir / (name + '.jpg')}: image missing (listed in {list_file})")
            if f"{name}.png" not in label_files:
                if f"{name}.mat" in label_files:
                    raise SemanticDataError(f"{labels_dir / (name + '.mat')}: {TEN_K_HINT}")
                raise SemanticDataError(f"{labels_dir / (name + '.png')}: label missing (listed in {list_file})")
            images_by_id[image_id] = images_dir / f"{name}.jpg"
            labels_by_id[image_id] = labels_dir / f"{name}.png"
        super().__init__(image_ids=ids, names=names, images=images_by_id, labels=labels_by_id, labels_root=labels_dir,
                         class_names=CLASS_NAMES)
        self.list_path = list_file

    @classmethod
    def from_root(cls, root: str | os.PathLike, split: str = DEFAULT_SPLIT) -> CocoStuffSet:
        """The set under STEGO's layout (module docstring); a root without the curated list is refused."""
        root = Path(root)
        if not root.is_dir():
            raise SemanticDataError(f"{root}: COCO-Stuff root folder not found")
        if not (root / "annotations" / split).is_dir():
            _refuse_other_releases(root / "annotations")
        list_file = root / "curated" / split / CURATED_LIST
        if not list_file.is_file():
            raise SemanticDataError(
                f"{list_file}: curated list missing; the published COCO-Stuff-27 set is IIC's curated list (STEGO's "
                f"download unpacks it under curated/<split>/), not every image of {split}")
        return cls(root / "images" / split, root / "annotations" / split, list_file)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> CocoStuffSet:
        """`root` (+ `split`), or `images`, `labels` and `list` given apart."""
        apart = [key for key in ("images", "labels", "list") if spec.get(key)]
        if spec.get("root"):
            if apart:
                raise SemanticDataError(f"{spec['root']}: give a COCO-Stuff root or its images, labels and list, not "
                                        "both")
            return cls.from_root(spec["root"], str(spec.get("split") or DEFAULT_SPLIT))
        if len(apart) != 3:
            missing = [key for key in ("images", "labels", "list") if key not in apart]
            raise SemanticDataError(f"a cocostuff data set needs its root, or images, labels and list ("
                                    f"{', '.join(missing)} missing)")
        return cls(spec["images"], spec["labels"], spec["list"])

    def _decode_labels(self, image_id: int) -> np.ndarray:
        path = self.label_path(image_id)
        return classes_from_values(read_label_png(path), LOOKUP, path, "a COCO-Stuff fine id (0-181) or 255 "
                                   "(unlabelled)")
