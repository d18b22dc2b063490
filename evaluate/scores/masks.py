"""Scores of predicted masks against COCO ground truth, and bootstrap intervals over images (docs/design.md §6).

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

Bootstrap (`bootstrap_ci`, `paired_bootstrap_diff`): percentile intervals over images. With
`rng = numpy.random.default_rng(seed)`, resample r (r = 0 .. resamples-1, in that order) takes the images
`rng.integers(0, n, size=n)`. Every reducer is a function of per-image sums, so a resample's value is computed
from `counts @ stats` (counts: how often each image was drawn), in chunks of resamples. The interval is
`numpy.percentile` (linear interpolation) of the resample values at (1 - level) / 2 and (1 + level) / 2;
resamples whose value is undefined (a zero denominator) are left out of the percentiles. Reducers are unit-free:
"mean" of the given scalars, "ratio" sum(num) / sum(den), "miou" the mean IoU in [0, 1]; callers scale to percent
(percentiles commute with a positive scale).
"""

from __future__ import annotations

import contextlib
import copy
import io
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from pycocotools import mask as mask_utils

from evaluate import EvaluationError

REDUCERS = ("mean", "ratio", "miou", "miou-counts")
_CHUNK_VALUES = 4_000_000  # resample-by-image count entries held at once (memory bound of the vectorised bootstrap)


class ScoreError(EvaluationError):
    """Predictions or per-image statistics that cannot be scored; the message says which image or array and why."""


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


# ---------------------------------------------------------------------------------------------------------- bootstrap


def miou_counts_from_confusion(confusions: np.ndarray) -> np.ndarray:
    """Per-image confusion matrices (n, C, C) (rows true, columns predicted) -> (n, 3, C) int64 sufficient counts.

    Row 0: intersection (diagonal), row 1: true pixels of the class (row sums), row 2: predicted pixels (column
    sums). Pooled over images, class c's IoU is I / (T + P - I).
    """
    conf = np.asarray(confusions)
    if conf.ndim != 3 or conf.shape[1] != conf.shape[2]:
        raise ScoreError(f"miou: per-image confusion matrices must be (n, C, C), got {conf.shape}")
    diag = np.diagonal(conf, axis1=1, axis2=2)
    return np.stack([diag, conf.sum(axis=2), conf.sum(axis=1)], axis=1).astype(np.int64)


def _miou_from_sums(sums: np.ndarray) -> np.ndarray:
    """(R, 3C) pooled [intersection | true | predicted] -> (R,) mean IoU over classes with a nonzero union."""
    c = sums.shape[1] // 3
    inter, true, pred = sums[:, :c], sums[:, c : 2 * c], sums[:, 2 * c :]
    union = true + pred - inter
    present = union > 0
    iou = np.divide(inter, union, out=np.zeros_like(inter, dtype=np.float64), where=present)
    n_present = present.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_present > 0, iou.sum(axis=1) / n_present, np.nan)


def _ratio_from_sums(sums: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sums[:, 1] != 0, sums[:, 0] / np.where(sums[:, 1] != 0, sums[:, 1], 1.0), np.nan)


def _sufficient(stats: Any, reducer: str) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """Per-image statistics -> (matrix (n, d) float64 to sum over drawn images, function of the (R, d) sums)."""
    if reducer not in REDUCERS:
        raise ScoreError(f"bootstrap: unknown reducer {reducer!r}; use one of {', '.join(REDUCERS)}")
    arr = np.asarray(stats)
    if arr.dtype == object or arr.ndim == 0 or arr.shape[0] == 0:
        raise ScoreError(f"bootstrap ({reducer}): need per-image statistics for at least one image, got {arr.shape}")
    n = arr.shape[0]
    if reducer == "mean":
        if arr.ndim != 1:
            raise ScoreError(f"bootstrap (mean): per-image values must be (n,), got {arr.shape}")
        return arr.astype(np.float64).reshape(n, 1), lambda s: s[:, 0] / n
    if reducer == "ratio":
        if arr.shape != (n, 2):
            raise ScoreError(f"bootstrap (ratio): per-image [numerator, denominator] must be (n, 2), got {arr.shape}")
        return arr.astype(np.float64), _ratio_from_sums
    if reducer == "miou":
        arr = miou_counts_from_confusion(arr)
    elif arr.ndim != 3 or arr.shape[1] != 3:
        raise ScoreError(f"bootstrap (miou-counts): per-image counts must be (n, 3, C), got {arr.shape}")
    return arr.reshape(n, -1).astype(np.float64), _miou_from_sums


def _resample_values(
    matrices: list[np.ndarray], finishes: list[Callable], resamples: int, seed: int
) -> list[np.ndarray]:
    """Values of each statistic on the same `resamples` bootstrap resamples (row r: rng.integers(0, n, size=n))."""
    n = matrices[0].shape[0]
    rng = np.random.default_rng(seed)
    chunk = max(1, min(resamples, _CHUNK_VALUES // n))
    out = [np.empty(resamples, dtype=np.float64) for _ in matrices]
    idx = np.empty((chunk, n), dtype=np.int64)
    offsets = (np.arange(chunk, dtype=np.int64) * n)[:, None]
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        for r in range(m):
            idx[r] = rng.integers(0, n, size=n)
        counts = np.bincount((idx[:m] + offsets[:m]).ravel(), minlength=m * n).reshape(m, n).astype(np.float64)
        for mat, fin, dest in zip(matrices, finishes, out):
            dest[start : start + m] = fin(counts @ mat)
    return out


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    finite = values[~np.isnan(values)]
    if finite.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(finite, [100.0 * (1.0 - level) / 2.0, 100.0 * (1.0 + level) / 2.0])
    return float(lo), float(hi)


def _check_args(resamples: int, level: float) -> None:
    if int(resamples) < 1:
        raise ScoreError(f"bootstrap: resamples must be >= 1, got {resamples}")
    if not 0.0 < float(level) < 1.0:
        raise ScoreError(f"bootstrap: level must lie in (0, 1), got {level}")


def bootstrap_ci(
    stats: Any, reducer: str, *, resamples: int, seed: int, level: float = 0.95
) -> tuple[float, float, float]:
    """(value, lo, hi): the reducer on all images and its percentile bootstrap interval over images.

    stats by reducer — "mean": float (n,) per-image values; "ratio": (n, 2) per-image [numerator, denominator],
    value sum(num) / sum(den); "miou": (n, C, C) per-image confusion matrices (rows true, columns predicted),
    value = mean over classes with nonzero pooled union of I / (T + P - I), in [0, 1]; "miou-counts": the same
    from (n, 3, C) [intersection, true, predicted] counts (see `miou_counts_from_confusion`; what sparse
    per-image confusions reduce to). Resampling: see the module docstring.
    """
    _check_args(resamples, level)
    mat, fin = _sufficient(stats, reducer)
    value = float(fin(mat.sum(axis=0, keepdims=True))[0])
    (vals,) = _resample_values([mat], [fin], int(resamples), seed)
    lo, hi = _interval(vals, level)
    return value, lo, hi


def paired_bootstrap_diff(
    stats_a: Any, stats_b: Any, reducer: str, *, resamples: int, seed: int, level: float = 0.95
) -> tuple[float, float, float]:
    """(diff, lo, hi) of reducer(a) - reducer(b) with the same images resampled for both (paired bootstrap).

    stats_a, stats_b: per-image statistics of the same images in the same order (shapes as for `bootstrap_ci`).
    Identical inputs give exactly (0, 0, 0).
    """
    _check_args(resamples, level)
    mat_a, fin_a = _sufficient(stats_a, reducer)
    mat_b, fin_b = _sufficient(stats_b, reducer)
    if mat_a.shape[0] != mat_b.shape[0]:
        raise ScoreError(
            f"paired bootstrap: the two score sets cover {mat_a.shape[0]} and {mat_b.shape[0]} images; "
            "they must be the same images"
        )
    diff = float(fin_a(mat_a.sum(axis=0, keepdims=True))[0] - fin_b(mat_b.sum(axis=0, keepdims=True))[0])
    va, vb = _resample_values([mat_a, mat_b], [fin_a, fin_b], int(resamples), seed)
    lo, hi = _interval(va - vb, level)
    return diff, lo, hi


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


def bootstrap_values(
    stats: Sequence[tuple[Any, str]], resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Several statistics of the same images on the same bootstrap resamples (the draws of the module docstring).

    stats: (per-image statistics, reducer) pairs, all over the same n images in the same order (shapes as for
    `bootstrap_ci`). Returns (values float64 (k,) on all images, resampled float64 (k, resamples)); undefined
    values (a zero denominator) are NaN.
    """
    if not stats:
        raise ScoreError("bootstrap_values: no statistics given")
    _check_args(resamples, 0.95)
    pairs = [_sufficient(s, r) for s, r in stats]
    sizes = {mat.shape[0] for mat, _ in pairs}
    if len(sizes) != 1:
        raise ScoreError(f"bootstrap_values: the statistics cover different numbers of images {sorted(sizes)}")
    values = np.array([float(fin(mat.sum(axis=0, keepdims=True))[0]) for mat, fin in pairs])
    resampled = _resample_values([m for m, _ in pairs], [f for _, f in pairs], int(resamples), seed)
    return values, np.stack(resampled)
