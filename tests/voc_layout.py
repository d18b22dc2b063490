"""VOC segmentation folders written by the tests from real COCO photos (DESIGN 15's layout), and the score written
out from DESIGN 15's text.

`write_voc_from_coco(coco_root, out, n_images)` takes coco2017-mini's first val images (id order) holding two
non-crowd instances of one category and writes them as VOC2012 unpacks: the JPEG's own bytes, and palette PNGs
(VOC's colour map, built here bit by bit) whose index is the label: objects 1..n painted largest first (a smaller
one on top), classes 1..20 (the images' COCO categories in id order), 255 on crowd regions and on a void band of
the pixels whose 5 x 5 window holds two labels (scipy's grey dilation and erosion).

`design_jaccards(attention, objects, patch)` is DESIGN 15's score of one image, pixel by pixel: the 60% mask per
head by a plain Python loop, each patch's value spread over p x p pixels, the objects of the cropped map, J over
every pixel, the first best head.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils
from scipy import ndimage

VOID = 255


def voc_colour_map() -> list[int]:
    """VOC's colour map (the devkit's `labelcolormap`), written from its definition: bit j of each of the index's
    three-bit groups goes to bit 7 - j of R, G and B."""
    out = []
    for index in range(256):
        bits = [(index >> b) & 1 for b in range(24)]
        channel = [sum(bits[3 * j + c] << (7 - j) for j in range(8)) for c in range(3)]
        out += channel
    return out


def write_palette_png(path: Path, indices: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.frombytes("P", (indices.shape[1], indices.shape[0]), np.ascontiguousarray(indices, np.uint8).tobytes())
    img.putpalette(voc_colour_map())
    img.save(path)


def band_of(labels: np.ndarray) -> np.ndarray:
    """Pixels whose 5 x 5 window (clipped at the border) holds more than one label."""
    return ndimage.grey_dilation(labels, size=5, mode="nearest") != ndimage.grey_erosion(labels, size=5,
                                                                                         mode="nearest")


def coco_images_with_pairs(coco_root: Path, n_images: int) -> list[tuple[dict, list[dict]]]:
    """The first `n_images` val images (id order) with two non-crowd instances of one category, and their
    annotations."""
    data = json.loads((coco_root / "annotations.json").read_text())
    by_image = defaultdict(list)
    for ann in data["annotations"]:
        by_image[ann["image_id"]].append(ann)
    chosen = []
    for image in sorted(data["images"], key=lambda i: i["id"]):
        counts = Counter(a["category_id"] for a in by_image[image["id"]] if not a["iscrowd"])
        if counts and max(counts.values()) >= 2:
            chosen.append((image, by_image[image["id"]]))
        if len(chosen) == n_images:
            break
    return chosen


def write_voc_from_coco(coco_root: Path, out: Path, n_images: int, split: str = "val") -> list[str]:
    """The folder of the module docstring; returns the names written (COCO file stems)."""
    chosen = coco_images_with_pairs(coco_root, n_images)
    categories = sorted({a["category_id"] for _, anns in chosen for a in anns if not a["iscrowd"]})
    class_index = {c: 1 + k % 20 for k, c in enumerate(categories)}
    names = []
    for image, anns in chosen:
        name = Path(image["file_name"]).stem
        height, width = image["height"], image["width"]
        labels = np.zeros((height, width), dtype=np.int32)  # object k, -1 crowd
        classes = np.zeros((height, width), dtype=np.uint8)
        objects = sorted((a for a in anns if not a["iscrowd"]), key=lambda a: -a["area"])
        for k, ann in enumerate(objects, start=1):
            rle = mask_utils.frPyObjects(ann["segmentation"], height, width)
            pixels = mask_utils.decode(mask_utils.merge(rle) if isinstance(rle, list) else rle).astype(bool)
            labels[pixels] = k
            classes[pixels] = class_index[ann["category_id"]]
        for ann in anns:
            if ann["iscrowd"]:
                rle = mask_utils.frPyObjects(ann["segmentation"], height, width)
                labels[mask_utils.decode(rle).astype(bool)] = -1
        void = band_of(labels) | (labels < 0)
        object_map = np.where(void, VOID, labels).astype(np.uint8)
        classes[void] = VOID
        (out / "JPEGImages").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(coco_root / "images" / image["file_name"], out / "JPEGImages" / f"{name}.jpg")
        write_palette_png(out / "SegmentationObject" / f"{name}.png", object_map)
        write_palette_png(out / "SegmentationClass" / f"{name}.png", classes)
        names.append(name)
    split_file = out / "ImageSets" / "Segmentation" / f"{split}.txt"
    split_file.parent.mkdir(parents=True, exist_ok=True)
    split_file.write_text("".join(f"{n}\n" for n in reversed(names)))  # not sorted: the kind sorts
    return names


def design_mask(values: list[float], mass: float = 0.6) -> list[bool]:
    """One head's mask, DESIGN 15's words in a loop: sort ascending (equal values by index), divide by the sum,
    keep where the running sum exceeds 1 - mass."""
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    total = sum(values[i] for i in order)
    kept = [False] * len(values)
    running = 0.0
    for i in order:
        running += values[i] / total
        kept[i] = running > 1 - mass
    return kept


def design_jaccards(attention: np.ndarray, objects: np.ndarray, patch: int) -> tuple[list[int], np.ndarray] | None:
    """(object ids, J (objects, heads)) of one image pixel by pixel, or None without an object."""
    heads, gh, gw = attention.shape
    masks = np.array([design_mask(attention[h].astype(np.float64).ravel().tolist()) for h in range(heads)])
    pixel_masks = np.kron(masks.reshape(heads, gh, gw), np.ones((patch, patch), dtype=bool)).astype(bool)
    cropped = objects[: gh * patch, : gw * patch]
    ids = sorted(int(v) for v in np.unique(cropped) if v not in (0, VOID))
    if not ids:
        return None
    jaccard = np.zeros((len(ids), heads))
    for a, o in enumerate(ids):
        truth = cropped == o
        for h in range(heads):
            jaccard[a, h] = (pixel_masks[h] & truth).sum() / (pixel_masks[h] | truth).sum()
    return ids, jaccard
