"""Scores of predicted masks against COCO ground truth (docs/design.md §6).

Label-free masks (decoders/) are scored three ways:

- **Jaccard** per image: P = union of the image's predicted masks, G = union of its non-crowd ground-truth masks;
  crowd pixels are removed from both; J = |P and G| / |P or G|. An image whose G is empty after crowd removal is
  left out (and counted by the caller through `PerImage.left_out`). Reported as the mean over images.
- **Class-agnostic mask AP / AP50 / AR@10** from pycocotools' COCOeval (`iouType="segm"`, `useCats=0`,
  `maxDets=[1, 10, 100]`), in percent. Crowd annotations are COCOeval's own ignore regions.
- **CorLoc** per image: 1 if the top-scoring predicted mask's box has IoU >= 0.5 with some non-crowd ground-truth
  box, else 0; an image without predictions is a miss; an image without non-crowd ground truth is left out.

Box convention (CorLoc): boxes are COCO `[x, y, w, h]` in continuous pixel coordinates, where pixel (r, c) covers
`[c, c+1) x [r, r+1)`. A mask's box is its tight box over inclusive pixel indices, so
`w = x_max - x_min + 1`, `h = y_max - y_min + 1` (exactly pycocotools' `maskUtils.toBbox`). Ground-truth boxes are
the annotations' own `bbox` fields. IoU = area(A and B) / area(A or B) on these continuous boxes (no further +1).

Per category and per image (`per_category_mean`, `extremes`): a score's mean over the images of each category, and
the worst and best images, for the tables and figures. Intervals come from `evaluate.scores.bootstrap`.
"""

from __future__ import annotations

import contextlib
import copy
import io
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
from pycocotools import mask as mask_utils

from evaluate.scores import ScoreError
from evaluate.scores.bootstrap import bootstrap_ci


# ---------------------------------------------------------------------------------------------------------- Jaccard


def jaccard(pred: np.ndarray, objects: np.ndarray, crowd: np.ndarray) -> float | None:
    """Jaccard index of one image with crowd pixels removed from prediction and ground truth.

    pred, objects, crowd: bool (H, W) — union of predicted masks, union of non-crowd ground-truth masks, union of
    crowd masks. Returns |P and G| / |P or G| in [0, 1] (P, G without crowd pixels), or None when G is empty after
    crowd removal (the image is left out of the mean).
    """
    pred = np.asarray(pred, dtype=bool)
    objects = np.asarray(objects, dtype=bool)
    crowd = np.asarray(crowd, dtype=bool)
    if not (pred.shape == objects.shape == crowd.shape) or pred.ndim != 2:
        raise ScoreError(
            f"jaccard: prediction {pred.shape}, objects {objects.shape} and crowd {crowd.shape} must be the same "
            "(H, W) shape"
        )
    keep = ~crowd
    p = pred & keep
    g = objects & keep
    g_count = int(np.count_nonzero(g))
    if g_count == 0:
        return None
    inter = int(np.count_nonzero(p & g))
    union = int(np.count_nonzero(p)) + g_count - inter
    return inter / union


@dataclass
class PerImage:
    """Per-image values of one score over a data set.

    image_ids: the scored images (sorted data-set order); values: float64 (n,) one value per scored image;
    left_out: ids of images left out (no non-crowd ground truth after crowd removal).
    """

    image_ids: list[int]
    values: np.ndarray
    left_out: list[int] = field(default_factory=list)

    @property
    def n_images(self) -> int:
        return len(self.image_ids)

    @property
    def n_left_out(self) -> int:
        return len(self.left_out)


def results_by_image(results: Iterable[dict[str, Any]], image_ids: Iterable[int]) -> dict[int, list[dict]]:
    """Group COCO results (dicts with `image_id`, `segmentation` RLE, `score`) by image; an unknown id is an error."""
    known = set(int(i) for i in image_ids)
    grouped: dict[int, list[dict]] = defaultdict(list)
    for k, res in enumerate(results):
        try:
            image_id = int(res["image_id"])
            res["segmentation"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ScoreError(f"COCO results entry {k} lacks a valid image_id or segmentation: {exc!r}") from None
        if image_id not in known:
            raise ScoreError(f"COCO results entry {k} names image_id {image_id}, which is not in the data set")
        grouped[image_id].append(res)
    return grouped


def _decode(res: dict[str, Any], height: int, width: int) -> np.ndarray:
    """One COCO result's mask as bool (H, W); its RLE size must equal the image's."""
    seg = res["segmentation"]
    if not isinstance(seg, dict) or "size" not in seg or "counts" not in seg:
        raise ScoreError(f"image {res['image_id']}: segmentation is not a COCO RLE dict with size and counts")
    if [int(s) for s in seg["size"]] != [height, width]:
        raise ScoreError(
            f"image {res['image_id']}: predicted mask size {list(seg['size'])} differs from the image's "
            f"{[height, width]}"
        )
    rle = dict(seg)
    if isinstance(rle["counts"], str):
        rle["counts"] = rle["counts"].encode("ascii")
    return mask_utils.decode(rle).astype(bool)


def predicted_union(results: Sequence[dict[str, Any]], height: int, width: int) -> np.ndarray:
    """Union of an image's predicted masks (COCO RLE results) as bool (H, W); no results -> all False."""
    union = np.zeros((height, width), dtype=bool)
    for res in results:
        union |= _decode(res, height, width)
    return union


def jaccard_per_image(dataset: Any, results: Iterable[dict[str, Any]]) -> PerImage:
    """Jaccard (in [0, 1]) of every image of `dataset` against COCO results.

    dataset: has `.image_ids` (sorted ints) and `.ground_truth(image_id) -> (objects bool (H,W), crowd bool (H,W))`
    (evaluate.datasets.coco.CocoDataset). results: COCO results (RLE segmentation), any number per image; an image with
    none has an empty prediction (J = 0 unless left out).
    """
    image_ids = [int(i) for i in dataset.image_ids]
    grouped = results_by_image(results, image_ids)
    scored, values, left_out = [], [], []
    for image_id in image_ids:
        objects, crowd = dataset.ground_truth(image_id)
        pred = predicted_union(grouped.get(image_id, []), *objects.shape)
        j = jaccard(pred, objects, crowd)
        if j is None:
            left_out.append(image_id)
        else:
            scored.append(image_id)
            values.append(j)
    return PerImage(scored, np.asarray(values, dtype=np.float64), left_out)


# ----------------------------------------------------------------------------------------------------------- CorLoc


def mask_box(mask: np.ndarray) -> list[float] | None:
    """Tight COCO box [x, y, w, h] of a bool (H, W) mask over inclusive pixels (w = x_max - x_min + 1); None if empty."""
    mask = np.asarray(mask, dtype=bool)
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    return [float(cols[0]), float(rows[0]), float(cols[-1] - cols[0] + 1), float(rows[-1] - rows[0] + 1)]


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """IoU of two COCO boxes [x, y, w, h] in continuous coordinates (0 when the union has no area)."""
    ax, ay, aw, ah = (float(v) for v in a)
    bx, by, bw, bh = (float(v) for v in b)
    iw = max(0.0, min(ax + aw, bx + bw) - max(ax, bx))
    ih = max(0.0, min(ay + ah, by + bh) - max(ay, by))
    inter = iw * ih
    union = aw * ah + bw * bh - inter
    return inter / union if union > 0 else 0.0


def corloc_hit(
    predictions: Sequence[tuple[np.ndarray, float]], gt_boxes: Sequence[Sequence[float]], threshold: float = 0.5
) -> bool | None:
    """CorLoc of one image: does the top-scoring mask's box have IoU >= `threshold` with some non-crowd GT box?

    predictions: (mask bool (H, W), score) pairs; the highest score wins, ties go to the earliest pair. gt_boxes:
    the image's non-crowd ground-truth boxes [x, y, w, h]. Returns None when there is no GT box (left out), False
    when there is no prediction or the top mask is empty, else whether some IoU reaches the threshold.
    """
    if len(gt_boxes) == 0:
        return None
    if len(predictions) == 0:
        return False
    scores = [float(s) for _, s in predictions]
    top = int(np.argmax(scores))  # first maximum
    box = mask_box(predictions[top][0])
    if box is None:
        return False
    return any(box_iou(box, g) >= threshold for g in gt_boxes)


def corloc_hits(dataset: Any, results: Iterable[dict[str, Any]]) -> PerImage:
    """CorLoc per image (values 1.0 hit, 0.0 miss) of COCO results over `dataset`.

    dataset: `.image_ids`, `.image_size(image_id) -> (h, w)`, `.instances(image_id) -> list[annotation dict]` with
    `bbox` and `iscrowd` (evaluate.datasets.coco.CocoDataset). Images without non-crowd instances are left out.
    """
    image_ids = [int(i) for i in dataset.image_ids]
    grouped = results_by_image(results, image_ids)
    scored, values, left_out = [], [], []
    for image_id in image_ids:
        boxes = [a["bbox"] for a in dataset.instances(image_id) if not a.get("iscrowd", 0)]
        if not boxes:
            left_out.append(image_id)
            continue
        res = grouped.get(image_id, [])
        hit = False
        if res:
            h, w = dataset.image_size(image_id)
            top = res[int(np.argmax([float(r.get("score", 0.0)) for r in res]))]
            hit = bool(corloc_hit([(_decode(top, int(h), int(w)), 1.0)], boxes))
        scored.append(image_id)
        values.append(1.0 if hit else 0.0)
    return PerImage(scored, np.asarray(values, dtype=np.float64), left_out)


# ------------------------------------------------------------------------------------------------------------ COCO AP


def coco_mask_ap(gt: Any, results: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Class-agnostic mask AP, AP50 and AR@10 in percent from pycocotools' COCOeval.

    gt: a pycocotools COCO holding the ground truth (all its images are evaluated; an image without results counts
    as missed objects). results: COCO results with RLE `segmentation` and `score` (category ids are ignored:
    `useCats = 0`). The results are copied, never modified. No results -> all 0. A value COCOeval cannot define
    (no non-crowd ground truth at all, reported as -1) comes back as NaN.
    """
    from pycocotools.cocoeval import COCOeval

    if len(results) == 0:
        return {"ap": 0.0, "ap50": 0.0, "ar10": 0.0}
    known = set(gt.getImgIds())
    for k, res in enumerate(results):
        if not isinstance(res, dict) or "segmentation" not in res or "score" not in res or "image_id" not in res:
            raise ScoreError(f"COCO results entry {k} needs image_id, segmentation (RLE) and score")
        if res["image_id"] not in known:
            raise ScoreError(f"COCO results entry {k} names image_id {res['image_id']}, absent from the ground truth")
    dets = copy.deepcopy(list(results))
    for res in dets:
        res.setdefault("category_id", 1)
    with contextlib.redirect_stdout(io.StringIO()):
        dt = gt.loadRes(dets)
        ev = COCOeval(gt, dt, iouType="segm")
        ev.params.useCats = 0
        ev.params.maxDets = [1, 10, 100]
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    stats = ev.stats

    def pct(v: float) -> float:
        return float("nan") if v < 0 else float(v) * 100.0

    return {"ap": pct(stats[0]), "ap50": pct(stats[1]), "ar10": pct(stats[7])}


# ------------------------------------------------------------------------------------- per-category and per-image


def image_categories(dataset: Any) -> list[list]:
    """[[image_id, [category name, ...]], ...] for every image of `dataset` (sorted ids): the sorted, distinct
    names of the categories with a non-crowd instance in the image (crowd regions are ignore regions, so they
    place no image in a category). What the decoder record keeps so per-category tables come from records alone.

    dataset: `.image_ids`, `.instances(image_id)` and `.coco.cats` (evaluate.datasets.coco.CocoDataset).
    """
    names = {int(c): str(cat["name"]) for c, cat in dataset.coco.cats.items()}
    return [
        [int(i), sorted({names[int(a["category_id"])] for a in dataset.instances(int(i)) if not a.get("iscrowd", 0)})]
        for i in dataset.image_ids
    ]


def per_category_mean(
    image_ids: Sequence[int], values: Sequence[float], categories: Sequence[Sequence], *, resamples: int,
    seed: int, level: float = 0.95,
) -> list[dict[str, Any]]:
    """Mean of a per-image score over the images of each category, with its percentile bootstrap interval.

    image_ids, values: the scored images and their per-image values (e.g. Jaccard in [0, 1]); categories: the
    `image_categories` pairs [[image_id, [names]], ...] (images absent from `image_ids`, i.e. left out, are
    skipped). An image with several categories counts in each of them. Returns, sorted by category name,
    {"category", "n_images", "value", "ci_low", "ci_high"} (unit-free, as the values), each interval from
    `bootstrap_ci(..., "mean")` over that category's images with the same `seed` (resamples restart per category).
    """
    value_of = {int(i): float(v) for i, v in zip(image_ids, values)}
    if len(value_of) != len(image_ids):
        raise ScoreError(f"per-category mean: {len(image_ids)} image ids but {len(values)} values or repeated ids")
    groups: dict[str, list[float]] = defaultdict(list)
    for image_id, names in categories:
        if int(image_id) in value_of:
            for name in names:
                groups[str(name)].append(value_of[int(image_id)])
    out = []
    for name in sorted(groups):
        v, lo, hi = bootstrap_ci(np.asarray(groups[name]), "mean", resamples=resamples, seed=seed, level=level)
        out.append({"category": name, "n_images": len(groups[name]), "value": v, "ci_low": lo, "ci_high": hi})
    return out


def extremes(image_ids: Sequence[int], values: Sequence[float], n: int) -> tuple[list[int], list[int]]:
    """(worst, best): the ids of the `n` lowest and the `n` highest values, worst first and best first.

    Ties go to the lower image id at both ends (the order is (value, id) for the worst and (-value, id) for the
    best). With fewer than 2n images the two lists overlap; with fewer than n each holds every image.
    """
    if n < 1:
        raise ScoreError(f"extremes: n must be >= 1, got {n}")
    pairs = [(float(v), int(i)) for i, v in zip(image_ids, values)]
    worst = [i for _, i in sorted(pairs)[:n]]
    best = [i for _, i in sorted(pairs, key=lambda p: (-p[0], p[1]))[:n]]
    return worst, best
