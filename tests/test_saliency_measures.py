"""TokenCut's saliency measures and PySODMetrics' (docs/design.md §16) on hand-made 4 x 4 cases.

Every expected number is worked out by hand in the comments from the definitions: F_t = 1.3 P R / (0.3 P + R).
"""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.saliency import SaliencyError
from evaluate.saliency.measures import (
    THRESHOLDS,
    image_f_curve,
    image_scores,
    sod_measures,
    tokencut_measures,
)

G = np.zeros((4, 4), dtype=bool)
G[:2, :2] = True  # truth: the top-left 2 x 2 block, 4 of 16 pixels

# A soft prediction: the truth's pixels 0.9, 0.9, 0.6, 0.6; two background pixels 0.7; the rest 0.
P_SOFT = np.zeros((4, 4))
P_SOFT[0, :2] = 0.9
P_SOFT[1, :2] = 0.6
P_SOFT[2, :2] = 0.7
# t < 0.6:          6 predicted, 4 hits: P = 2/3, R = 1   -> F = 1.3 (2/3) / 1.2 = 13/18
# 0.6 <= t < 0.7:   4 predicted, 2 hits: P = 1/2, R = 1/2 -> F = 0.325 / 0.65 = 1/2
# 0.7 <= t < 0.9:   2 predicted, 2 hits: P = 1,   R = 1/2 -> F = 0.65 / 0.8 = 13/16 (the best)
# t >= 0.9:         nothing predicted:  P = 1,   R = 0   -> F = 0
# Another image whose own best threshold is lower: the truth's pixels 0.65, nothing else -> F = 1 for t < 0.65.
P_LOW = np.where(G, 0.65, 0.0)


def test_a_soft_prediction_scores_its_hand_computed_iou_accuracy_and_max_f():
    scores = image_scores([P_SOFT], [G])
    assert scores.iou[0] == pytest.approx(4 / 6)  # p > 0.5: 6 pixels, 4 of them truth; union 6
    assert scores.accuracy[0] == pytest.approx(14 / 16)  # the two 0.7 pixels are the only errors
    curve = scores.f_curves[0]
    assert curve.shape == (255,)
    expected = np.select([THRESHOLDS < 0.6, THRESHOLDS < 0.7, THRESHOLDS < 0.9], [13 / 18, 1 / 2, 13 / 16], 0.0)
    np.testing.assert_allclose(curve, expected, rtol=0, atol=1e-12)
    best = np.flatnonzero(curve == curve.max())
    assert THRESHOLDS[best[0]] == pytest.approx(179 / 255) and THRESHOLDS[best[-1]] == pytest.approx(229 / 255)
    values = tokencut_measures(scores, resamples=50, seed=0)
    assert values["saliency_maxf"].value == pytest.approx(100 * 13 / 16)
    assert values["saliency_iou"].value == pytest.approx(100 * 4 / 6)
    assert values["saliency_accuracy"].value == pytest.approx(100 * 14 / 16)


def test_max_f_takes_one_threshold_for_the_whole_set_not_each_image_its_own():
    values = tokencut_measures(image_scores([P_SOFT, P_LOW], [G, G]), resamples=50, seed=0)
    # The mean curve: t < 0.6 -> (13/18 + 1) / 2 = 31/36; [0.6, 0.65) -> 3/4; [0.65, 0.7) -> 1/4; [0.7, 0.9) -> 13/32.
    assert values["saliency_maxf"].value == pytest.approx(100 * 31 / 36)
    # FOUND's and SelfMask's mean of each image's own best would be (13/16 + 1) / 2 = 90.625: not this measure.
    assert values["saliency_maxf"].value < 90.0


def test_an_empty_prediction_scores_zero_and_an_empty_pair_scores_one():
    empty = np.zeros((4, 4))
    scores = image_scores([empty, empty], [G, np.zeros((4, 4), dtype=bool)])
    assert scores.iou.tolist() == [0.0, 1.0]  # both empty: 1 by definition
    assert scores.accuracy.tolist() == [12 / 16, 1.0]
    assert np.all(scores.f_curves[0] == 0.0)  # nothing predicted: P = 1, R = 0 -> F = 0
    assert np.all(scores.f_curves[1] == 1.0)  # nothing predicted, nothing true: P = R = 1 -> F = 1
    # Something predicted on an empty truth: P = 0, R = 1 -> F = 0 at every threshold below the prediction.
    assert np.all(image_f_curve(P_LOW, np.zeros((4, 4), dtype=bool))[THRESHOLDS < 0.65] == 0.0)


def test_thresholds_are_numpy_arange_with_24_of_them_one_ulp_below_k_over_255():
    assert THRESHOLDS.dtype == np.float64 and THRESHOLDS.size == 255
    below = [k for k in range(255) if THRESHOLDS[k] < k / 255]
    exact = [k for k in range(1, 255) if THRESHOLDS[k] == k / 255]
    assert len(below) == 24 and len(below) + len(exact) == 254
    truth = np.ones((4, 4), dtype=bool)
    # A prediction of exactly k/255 passes thresholds 0..k-1, and threshold k too where it lies one ulp below.
    for k in (below[0], exact[0]):
        passed = int(np.count_nonzero(image_f_curve(np.full((4, 4), k / 255), truth) > 0))
        assert passed == k + (k in below)


def test_the_max_f_interval_resamples_images_and_takes_the_max_of_the_mean_curve():
    rng = np.random.default_rng(5)
    preds = [np.clip(G + rng.normal(0, 0.35, (4, 4)), 0, 1) for _ in range(6)]
    scores = image_scores(preds, [G] * 6)
    values = tokencut_measures(scores, resamples=300, seed=7)
    # Independent resampling: draw r is rng.integers(0, n, size=n) of default_rng(seed), in order (design §6).
    draws = np.random.default_rng(7)
    maxima = [scores.f_curves[draws.integers(0, 6, size=6)].mean(axis=0).max() for _ in range(300)]
    lo, hi = np.percentile(maxima, [2.5, 97.5])
    assert values["saliency_maxf"].ci_low == pytest.approx(100 * lo, abs=1e-9)
    assert values["saliency_maxf"].ci_high == pytest.approx(100 * hi, abs=1e-9)
    assert values["saliency_maxf"].value == pytest.approx(100 * scores.f_curves.mean(axis=0).max())
    assert values["saliency_maxf"].per_image.shape == (6, 255)


def test_pysodmetrics_reads_the_truth_above_128_and_thresholds_at_8_bit_levels():
    levels = np.where(G, 255, 0).astype(np.uint8)
    levels[3, 3] = 200  # salient for PySODMetrics (> 128)
    levels[3, 0] = 100  # not salient for it (TokenCut's > 0 would count it)
    pred = G.astype(np.float64)
    values = sod_measures([pred], [levels], resamples=20, seed=0)
    assert values["sod_mae"].value == pytest.approx(1 / 16)  # one truth pixel (the 200) missed
    # Level 0: all 16 pixels predicted (p >= 0), P = 5/16, R = 1 -> 0.40625 / 1.09375; levels 1..255: 4 predicted,
    # P = 1, R = 4/5 -> F = 1.04 / 1.1 = 52/55, the best.
    assert values["sod_maxf"].value == pytest.approx(52 / 55)
    assert 0.0 < values["sod_smeasure"].value < 1.0 and 0.0 < values["sod_emeasure"].value <= 1.0
    assert all(v.unit == "fraction" for v in values.values())


def test_a_prediction_and_truth_of_different_sizes_are_refused():
    with pytest.raises(SaliencyError, match="image 1"):
        image_scores([P_SOFT, P_SOFT], [G, np.zeros((4, 5), dtype=bool)])
    with pytest.raises(SaliencyError, match="bool"):
        image_scores([P_SOFT], [G.astype(np.uint8)])
