"""Bootstrap intervals over images (docs/design.md §6): `bootstrap_ci`, `paired_bootstrap_diff`, `bootstrap_values`.

Percentile intervals over images. With `rng = numpy.random.default_rng(seed)`, resample r (r = 0 .. resamples-1, in
that order) takes the images `rng.integers(0, n, size=n)`. Every reducer is a function of per-image sums, so a
resample's value is computed from `counts @ stats` (counts: how often each image was drawn), in chunks of
resamples. The interval is `numpy.percentile` (linear interpolation) of the resample values at (1 - level) / 2 and
(1 + level) / 2; resamples whose value is undefined (a zero denominator) are left out of the percentiles. Reducers
are unit-free: "mean" of the given scalars, "ratio" sum(num) / sum(den), "miou" the mean IoU in [0, 1], "max-mean"
the largest column mean of per-image curves (a maximum F over thresholds, one threshold for the whole set); callers
scale to percent (percentiles commute with a positive scale).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from evaluate.scores import ScoreError

REDUCERS = ("mean", "ratio", "miou", "miou-counts", "max-mean")
_CHUNK_VALUES = 4_000_000  # resample-by-image count entries held at once (memory bound of the vectorised bootstrap)


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
    if reducer == "max-mean":
        if arr.ndim != 2:
            raise ScoreError(f"bootstrap (max-mean): per-image curves must be (n, T), got {arr.shape}")
        return arr.astype(np.float64), lambda s: (s / n).max(axis=1)
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
    per-image confusions reduce to); "max-mean": (n, T) per-image curves, value = the largest over columns of the
    mean over images. Resampling: see the module docstring.
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
