"""The probe's labels (docs/design.md §6): classes by name, pixel label maps, patch labels.

- `probe_classes(categories)`: the probe-train set's categories become classes 1..K in category-id order; 0 is
  background. `class_index(classes, categories)` maps any data set's category ids to these classes by NAME, so a
  data set that numbers the same classes differently is scored right, and one whose id 1 means something else is
  refused instead of silently scored as class 1.
- `label_map`: each pixel gets the class of the non-crowd instance covering it. Overlaps: the instance with fewer
  decoded pixels wins; on equal areas the higher annotation id. An instance wins over a crowd region; crowd pixels
  that no instance covers are 255 (ignore); everything else is 0.
- `label_map224`: the tokens224 geometry (`evaluate.pixels.images.tokens224_geometry`): PIL NEAREST resize of the
  uint8 map to (new_w, new_h), then the 224 x 224 crop at (left, top).
- `patch_labels`: per p x p patch (row-major over the g x g grid, g = 224 / p, as the tokens: 14 x 14 patches of 16
  for p 16, 28 x 28 of 8 for p 8, 16 x 16 of 14 for p 14), the majority label of its p^2 pixels not 255; more than
  p^2 / 2 ignore pixels (128 of 256 for p 16) -> 255; a tied majority goes to the lowest label. p is the patch of
  the checkpoint's features (`FeatureReader.geometry.patch`), so a run with networks of several patch sizes has
  labels per patch size: they are computed in each probe job from its own shards, never shared across checkpoints.
- `class_names`: the name of every probe label, background first, as the probe record keeps them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from PIL import Image

from evaluate.probe import ProbeError
from evaluate.pixels.geometry import SEED, TOKENS224_SIZE, Geometry

IGNORE = 255
SIZE = TOKENS224_SIZE  # the label map's side: tokens224's 224-px crop, whatever the patch
BACKGROUND = "background"


def probe_classes(categories: Mapping[int, str], where: str) -> list[str]:
    """The probe's classes: the probe-train set's category names in category-id order (class k + 1 = names[k]).

    categories: category id -> name of the probe-train data set. Names must be unique: classes are matched by
    name across data sets.
    """
    ids = sorted(int(c) for c in categories)
    if not ids:
        raise ProbeError(f"{where}: the category list is empty; the probe needs at least one category")
    if len(ids) > 254:
        raise ProbeError(f"{where}: {len(ids)} categories do not fit uint8 labels (at most 254; 255 is ignore)")
    names = [str(categories[c]) for c in ids]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ProbeError(f"{where}: category name(s) {repeated} appear more than once; classes are matched by name")
    return names


def unmatched_categories(classes: Sequence[str], categories: Mapping[int, str]) -> list[str]:
    """The category names of a data set that are not among the probe's classes, sorted."""
    known = set(classes)
    return sorted({str(n) for n in categories.values() if str(n) not in known})


def class_index(classes: Sequence[str], categories: Mapping[int, str], where: str) -> dict[int, int]:
    """A data set's category id -> probe class 1..K, matched by NAME (never by id alone).

    classes: `probe_classes` of the probe-train set; categories: category id -> name of the data set scored.
    A category name the probe does not know is a ProbeError naming them (config-time checks catch it first).
    """
    missing = unmatched_categories(classes, categories)
    if missing:
        raise ProbeError(f"{where}: category name(s) {missing} are not among the probe's classes "
                         f"({', '.join(classes)}); set probe: false on this data set to score it by the decoder only")
    class_of_name = {name: k + 1 for k, name in enumerate(classes)}
    return {int(c): class_of_name[str(n)] for c, n in categories.items()}


def _coco_of(source: Any) -> Any:
    """A pycocotools COCO from a COCO object or anything holding one as `.coco` (evaluate.datasets.coco.CocoDataset)."""
    return getattr(source, "coco", source)


def label_map(source: Any, image_id: int, class_of_category: dict[int, int]) -> np.ndarray:
    """Class of every pixel of an image: uint8 (H, W); 0 background, 1..K classes, 255 ignore (crowd only).

    source: pycocotools COCO or an object with `.coco`. Rules: see the module docstring.
    """
    coco = _coco_of(source)
    image_id = int(image_id)
    if image_id not in coco.imgs:
        raise ProbeError(f"label_map: image {image_id} is not in the annotations")
    info = coco.imgs[image_id]
    height, width = int(info["height"]), int(info["width"])
    out = np.zeros((height, width), dtype=np.uint8)
    instances = []
    for ann in coco.imgToAnns.get(image_id, []):
        mask = coco.annToMask(ann).astype(bool)
        if mask.shape != (height, width):
            raise ProbeError(
                f"label_map: image {image_id} annotation {ann.get('id')} decodes to {mask.shape}, "
                f"the image is {(height, width)}"
            )
        if ann.get("iscrowd", 0):
            out[mask] = IGNORE
            continue
        cat = int(ann["category_id"])
        if cat not in class_of_category:
            raise ProbeError(
                f"label_map: image {image_id} annotation {ann.get('id')} has category {cat}, which is not among "
                "the probe's categories (taken from the probe-train data set)"
            )
        instances.append((int(np.count_nonzero(mask)), int(ann["id"]), class_of_category[cat], mask))
    # paint larger first, so smaller instances (and, on equal area, higher ids) are painted last and win
    for _, _, cls, mask in sorted(instances, key=lambda t: (-t[0], t[1])):
        out[mask] = cls
    return out


def label_map224(label_map: np.ndarray) -> np.ndarray:
    """The label map in the tokens224 geometry: uint8 (224, 224) (nearest resize, then the centre crop)."""
    from evaluate.pixels.images import tokens224_geometry

    arr = np.asarray(label_map)
    if arr.ndim != 2 or arr.dtype != np.uint8:
        raise ProbeError(f"label_map224: expected a uint8 (H, W) label map, got {arr.dtype} {arr.shape}")
    height, width = arr.shape
    new_w, new_h, left, top = tokens224_geometry(width, height)
    img = Image.fromarray(arr).resize((new_w, new_h), Image.Resampling.NEAREST)
    return np.array(img.crop((left, top, left + SIZE, top + SIZE)), dtype=np.uint8)


def patch_grid(patch: int) -> int:
    """g = 224 / p: the tokens224 grid's side for patch p (14, 28, 16 for p 16, 8, 14); ProbeError if p does not
    divide 224."""
    try:
        return Geometry(patch=int(patch)).tokens224_grid
    except (ValueError, ZeroDivisionError):
        raise ProbeError(f"patch {patch!r} does not divide the {SIZE}-px tokens224 crop") from None


def patch_labels(map224: np.ndarray, patch: int = SEED.patch) -> np.ndarray:
    """Label of each p x p patch, row-major over the g x g grid (g = 224 / p): uint8 (N224,) = (g^2,), 255 = ignored
    patch (more than p^2 / 2 ignore pixels). patch: the features' p (the seed's 16 unless given)."""
    arr = np.asarray(map224)
    if arr.shape != (SIZE, SIZE):
        raise ProbeError(f"patch_labels: expected a ({SIZE}, {SIZE}) label map, got {arr.shape}")
    grid, p = patch_grid(patch), int(patch)
    n = grid * grid
    patches = arr.astype(np.int64).reshape(grid, p, grid, p).transpose(0, 2, 1, 3).reshape(n, -1)
    counts = np.bincount((patches + 256 * np.arange(n)[:, None]).ravel(), minlength=256 * n)
    counts = counts.reshape(n, 256)
    ignored = counts[:, IGNORE].copy()
    counts[:, IGNORE] = 0
    labels = counts.argmax(axis=1)  # first maximum: the lowest label on a tie
    labels[ignored > p * p // 2] = IGNORE  # p^2 even or odd: more than half the pixels
    return labels.astype(np.uint8)


def image_patch_labels(source: Any, image_id: int, class_of_category: dict[int, int],
                       patch: int = SEED.patch) -> np.ndarray:
    """`patch_labels(label_map224(label_map(...)), patch)` of one image: uint8 (N224,)."""
    return patch_labels(label_map224(label_map(source, image_id, class_of_category)), patch)


def dataset_patch_labels(source: Any, image_ids: Iterable[int], class_of_category: dict[int, int],
                         patch: int = SEED.patch) -> np.ndarray:
    """Patch labels of many images: uint8 (n, N224) in the given order, for the features' patch p."""
    ids = [int(i) for i in image_ids]
    out = np.empty((len(ids), patch_grid(patch) ** 2), dtype=np.uint8)
    for row, image_id in enumerate(ids):
        out[row] = image_patch_labels(source, image_id, class_of_category, patch)
    return out


def class_names(classes: Sequence[str]) -> list[str]:
    """Name of every probe class by label: ["background", name of class 1, ..., name of class K] (K + 1 names).

    classes: `probe_classes` of the probe-train set. What the probe record keeps so per-class tables come from
    records alone.
    """
    return [BACKGROUND, *classes]

