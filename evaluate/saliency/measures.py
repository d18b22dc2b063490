"""Saliency measures (docs/design.md §16): TokenCut's three, and PySODMetrics' four named apart.

TokenCut's (`metric.py`; percent), per image with p (H, W) in [0, 1] (soft or 0/1) and truth g (H, W) bool:
- `saliency_iou`: |p > 0.5 and g| / |p > 0.5 or g| (both empty: 1); the mean over images.
- `saliency_accuracy`: the share of pixels where (p > 0.5) equals g; the mean over images.
- `saliency_maxf`: for each of the 255 thresholds t = `numpy.arange(0, 1, 1 / 255)` (float64), P_t = |p > t and g|
  / |p > t| (1 when nothing is predicted), R_t = |p > t and g| / |g| (1 when g is empty), F_t = 1.3 P_t R_t /
  (0.3 P_t + R_t) (0 where undefined); maxF = the largest over t of the mean of F_t over images: ONE threshold for
  the whole set. The per-image curves F (n, 255) are kept, so its interval is cheap: resample images, take the
  largest column mean (the bootstrap's "max-mean" reducer).
Intervals: section 6's percentile bootstrap over images (`evaluate.scores.bootstrap`), the three measures on the
same resamples.

PySODMetrics' (`py_sod_metrics`, the salient-object community's library, as its own examples call it: the
prediction as the 8-bit map a method writes, round(255 p), and the mask's own 8-bit levels; the library
min-max normalises each prediction and reads the truth as levels > 128):
- `sod_maxf`: the largest over its 256 thresholds (p >= k / 255) of the mean over images of F (beta^2 0.3), with
  P = 0 when nothing is predicted and R = 0 when g is empty;
- `sod_mae`: the mean over images of mean |p - g|; `sod_smeasure`: the mean S-measure (alpha 0.5);
- `sod_emeasure`: the mean over images and thresholds of the E-measure (its "mean E").
Their intervals bootstrap the library's own per-image values (curves for maxF and E, scalars for MAE and S).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluate.saliency import SaliencyError
from evaluate.scores.bootstrap import bootstrap_values

THRESHOLDS = np.arange(0, 1, 1 / 255)  # 255 float64 thresholds; 24 lie one ulp below k / 255, as TokenCut's do
BETA_SQUARED = 0.3
BINARY_THRESHOLD = 0.5
PERCENT = 100.0


@dataclass(frozen=True)
class SaliencyValue:
    """One measure on a set: value and 95% interval (ci_low, ci_high), in `unit` ("percent", or "fraction" for the
    PySODMetrics measures, as that library reports them); per_image: what the bootstrap resampled, (n,) float64 or
    (n, T) float64 curves; reducer: "mean" or "max-mean"."""

    measure: str
    value: float
    ci_low: float
    ci_high: float
    unit: str
    reducer: str
    per_image: np.ndarray


def _checked(pred: np.ndarray, truth: np.ndarray, index: int) -> tuple[np.ndarray, np.ndarray]:
    pred = np.asarray(pred)
    truth = np.asarray(truth)
    if pred.ndim != 2 or pred.shape != truth.shape:
        raise SaliencyError(f"saliency image {index}: prediction {pred.shape} and truth {truth.shape} must be the "
                            "same (H, W)")
    if truth.dtype != bool:
        raise SaliencyError(f"saliency image {index}: the truth must be bool (mask levels > 0), got {truth.dtype}")
    if not (np.issubdtype(pred.dtype, np.floating) or pred.dtype == bool
            or (np.issubdtype(pred.dtype, np.integer) and pred.size and 0 <= pred.min() and pred.max() <= 1)):
        raise SaliencyError(f"saliency image {index}: the prediction must be a soft map in [0, 1] or a 0/1 mask, "
                            f"got {pred.dtype}")
    return pred, truth


def image_iou(pred: np.ndarray, truth: np.ndarray) -> float:
    """|p > 0.5 and g| / |p > 0.5 or g|; 1 when both are empty."""
    binary = pred > BINARY_THRESHOLD
    union = np.count_nonzero(binary | truth)
    return 1.0 if union == 0 else np.count_nonzero(binary & truth) / union


def image_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    """The share of pixels where (p > 0.5) equals g."""
    return float(np.count_nonzero((pred > BINARY_THRESHOLD) == truth)) / truth.size


def image_f_curve(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """F_t at each of the 255 `THRESHOLDS`: (255,) float64 (module docstring)."""
    values = np.sort(pred.astype(np.float64, copy=False).ravel())
    hits = np.sort(pred[truth].astype(np.float64, copy=False))
    predicted = values.size - np.searchsorted(values, THRESHOLDS, side="right")  # |p > t|
    tp = hits.size - np.searchsorted(hits, THRESHOLDS, side="right")  # |p > t and g|
    precision = np.where(predicted > 0, tp / np.maximum(predicted, 1), 1.0)
    recall = tp / hits.size if hits.size else np.ones(THRESHOLDS.size)
    denominator = BETA_SQUARED * precision + recall
    return np.where(denominator > 0, (1 + BETA_SQUARED) * precision * recall / np.where(denominator > 0,
                                                                                          denominator, 1.0), 0.0)


@dataclass(frozen=True)
class SaliencyImageScores:
    """TokenCut's per-image statistics of n images: iou (n,), accuracy (n,) in [0, 1]; f_curves (n, 255)."""

    iou: np.ndarray
    accuracy: np.ndarray
    f_curves: np.ndarray


def image_scores(preds: Sequence[np.ndarray], truths: Sequence[np.ndarray]) -> SaliencyImageScores:
    """Per-image statistics: preds, each (H, W) float in [0, 1] (or a bool / integer 0/1 mask); truths, each (H, W)
    bool, the same size."""
    if len(preds) != len(truths) or not preds:
        raise SaliencyError(f"saliency scores need one prediction per truth, got {len(preds)} and {len(truths)}")
    iou, acc, curves = [], [], []
    for i, (pred, truth) in enumerate(zip(preds, truths)):
        pred, truth = _checked(pred, truth, i)
        iou.append(image_iou(pred, truth))
        acc.append(image_accuracy(pred, truth))
        curves.append(image_f_curve(pred, truth))
    return SaliencyImageScores(np.array(iou), np.array(acc), np.stack(curves))


def _with_intervals(stats: list[tuple[str, np.ndarray, str]], unit: str, scale: float, *, resamples: int,
                    seed: int, level: float) -> dict[str, SaliencyValue]:
    values, resampled = bootstrap_values([(per_image, reducer) for _, per_image, reducer in stats], resamples, seed)
    q = [100.0 * (1.0 - level) / 2.0, 100.0 * (1.0 + level) / 2.0]
    out = {}
    for (name, per_image, reducer), value, draws in zip(stats, values, resampled):
        lo, hi = np.percentile(draws[~np.isnan(draws)], q)
        out[name] = SaliencyValue(name, scale * float(value), scale * float(lo), scale * float(hi), unit, reducer,
                                  per_image)
    return out


def tokencut_measures(scores: SaliencyImageScores, *, resamples: int, seed: int, level: float = 0.95
                      ) -> dict[str, SaliencyValue]:
    """`saliency_iou`, `saliency_accuracy`, `saliency_maxf` in percent with their intervals (same resamples)."""
    stats = [("saliency_iou", scores.iou, "mean"), ("saliency_accuracy", scores.accuracy, "mean"),
             ("saliency_maxf", scores.f_curves, "max-mean")]
    return _with_intervals(stats, "percent", PERCENT, resamples=resamples, seed=seed, level=level)


def prediction_levels(pred: np.ndarray) -> np.ndarray:
    """A soft prediction as the 8-bit map a method writes: round(255 clip(p, 0, 1)), (H, W) uint8."""
    return np.rint(np.clip(np.asarray(pred, dtype=np.float64), 0.0, 1.0) * 255.0).astype(np.uint8)


class SodTally:
    """PySODMetrics' four measures, one image at a time (`add`), as the library's own examples call it."""

    def __init__(self) -> None:
        import py_sod_metrics  # OpenCV and scikit-image come with it: imported only where these measures run

        self._f_handler = py_sod_metrics.FmeasureHandler(with_dynamic=True, with_adaptive=False, beta=BETA_SQUARED)
        self._fmeasure = py_sod_metrics.FmeasureV2(metric_handlers={"fm": self._f_handler})
        self._mae, self._smeasure = py_sod_metrics.MAE(), py_sod_metrics.Smeasure()
        self._emeasure = py_sod_metrics.Emeasure()
        self.n = 0

    def add(self, pred: np.ndarray, levels: np.ndarray) -> None:
        """One image: pred (H, W) float in [0, 1]; levels, its mask's (H, W) uint8 levels."""
        levels = np.asarray(levels)
        if levels.dtype != np.uint8 or np.shape(pred) != levels.shape:
            raise SaliencyError(f"saliency image {self.n}: PySODMetrics needs the mask's uint8 levels of the "
                                f"prediction's size, got {levels.dtype} {levels.shape} for {np.shape(pred)}")
        mapped = prediction_levels(pred)
        for metric in (self._fmeasure, self._mae, self._smeasure, self._emeasure):
            metric.step(pred=mapped, gt=levels)
        self.n += 1

    def per_image(self) -> list[tuple[str, np.ndarray, str]]:
        """(measure, per-image statistics, reducer) of each of the four, checked against the library's own summary:
        sod_maxf (n, 256) F curves, "max-mean"; sod_mae, sod_smeasure, sod_emeasure (n,) (the E-measure's mean over
        thresholds), "mean"."""
        if not self.n:
            raise SaliencyError("PySODMetrics needs at least one image")
        stats = [("sod_maxf", np.array(self._f_handler.dynamic_results, dtype=np.float64), "max-mean"),
                 ("sod_mae", np.array(self._mae.maes, dtype=np.float64), "mean"),
                 ("sod_smeasure", np.array(self._smeasure.sms, dtype=np.float64), "mean"),
                 ("sod_emeasure", np.array(self._emeasure.changeable_ems, dtype=np.float64).mean(axis=1), "mean")]
        library = {"sod_maxf": self._fmeasure.get_results()["fm"]["dynamic"].max(),
                   "sod_mae": self._mae.get_results()["mae"], "sod_smeasure": self._smeasure.get_results()["sm"],
                   "sod_emeasure": self._emeasure.get_results()["em"]["curve"].mean()}
        for name, per_image, reducer in stats:  # the library's summary is the value; per-image stats only resample
            ours = per_image.mean(axis=0).max() if reducer == "max-mean" else per_image.mean()
            if not np.isclose(ours, float(library[name]), rtol=0, atol=1e-12):
                raise SaliencyError(f"{name}: PySODMetrics' summary {float(library[name])} differs from its "
                                    f"per-image mean {ours}")
        return stats


def sod_measures(preds: Sequence[np.ndarray], mask_levels: Sequence[np.ndarray], *, resamples: int, seed: int,
                 level: float = 0.95) -> dict[str, SaliencyValue]:
    """PySODMetrics' `sod_maxf`, `sod_mae`, `sod_smeasure`, `sod_emeasure` (fractions, as the library reports them)
    with intervals: preds, each (H, W) float in [0, 1]; mask_levels, each the mask's (H, W) uint8 levels."""
    if len(preds) != len(mask_levels) or not preds:
        raise SaliencyError(f"PySODMetrics needs one prediction per mask, got {len(preds)} and {len(mask_levels)}")
    tally = SodTally()
    for pred, levels in zip(preds, mask_levels):
        tally.add(pred, levels)
    return _with_intervals(tally.per_image(), "fraction", 1.0, resamples=resamples, seed=seed, level=level)


CURVE_DECIMALS = 6  # a record keeps each image's F curve to this many decimals (its maxF is computed from them)


class SaliencyTally:
    """One prediction kind's measures on a set, one image at a time (a set need not fit in memory): TokenCut's
    three per-image statistics (`image_iou`, `image_accuracy`, `image_f_curve`) and PySODMetrics' (`SodTally`)."""

    def __init__(self) -> None:
        self.iou: list[float] = []
        self.accuracy: list[float] = []
        self.f_curves: list[np.ndarray] = []
        self.sod = SodTally()

    def add(self, pred: np.ndarray, levels: np.ndarray) -> None:
        """One image: pred (H, W) float in [0, 1] or a 0/1 mask; levels, its mask's (H, W) uint8 levels (the
        truth is levels > 0)."""
        pred, truth = _checked(pred, np.asarray(levels) > 0, len(self.iou))
        self.iou.append(image_iou(pred, truth))
        self.accuracy.append(image_accuracy(pred, truth))
        self.f_curves.append(image_f_curve(pred, truth))
        self.sod.add(np.clip(pred.astype(np.float64, copy=False), 0.0, 1.0), levels)

    def measure_entries(self, image_ids: Sequence[int], *, suffix: str, resamples: int, seed: int) -> list[dict]:
        """The ledger's measure entries (`evaluate.scores.measures.make_measure`, percent, 95% intervals over
        images): TokenCut's three, then PySODMetrics' four, each named with `suffix` ("" or "_bs"). maxF's per-image
        F curves are kept to CURVE_DECIMALS decimals, its value the largest column mean of those."""
        from evaluate.scores.measures import make_measure

        curves = np.round(np.stack(self.f_curves), CURVE_DECIMALS)
        stats = [("saliency_iou", np.array(self.iou), "mean"), ("saliency_accuracy", np.array(self.accuracy), "mean"),
                 ("saliency_maxf", curves, "max-mean")]
        stats += [(name, np.round(per_image, CURVE_DECIMALS) if reducer == "max-mean" else per_image, reducer)
                  for name, per_image, reducer in self.sod.per_image()]
        return [make_measure(name + suffix, image_ids=list(image_ids), per_image=per_image.tolist(), reducer=reducer,
                             resamples=resamples, seed=seed) for name, per_image, reducer in stats]
