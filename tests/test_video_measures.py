"""The official semi-supervised DAVIS measures, against values worked out by hand (docs/design.md §12)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from evaluate.scores.bootstrap import bootstrap_ci
from evaluate.video.measures import (
    ObjectScores,
    VideoScores,
    boundary_f,
    boundary_map,
    boundary_radius,
    decay_bins,
    frame_scores,
    jaccard,
    statistics,
)


def _mask(shape, rows, cols):
    m = np.zeros(shape, bool)
    m[rows[0] : rows[1] + 1, cols[0] : cols[1] + 1] = True
    return m


def _pixels(mask):
    return {(int(r), int(c)) for r, c in zip(*np.nonzero(mask))}


def test_the_boundary_radius_is_8_at_854_by_480():
    assert boundary_radius(480, 854) == 8  # ceil(0.008 * 979.65) = ceil(7.84)
    assert boundary_radius(10, 10) == 1  # ceil(0.113)
    assert boundary_radius(1080, 1920) == 18  # ceil(17.62)


def test_boundary_map_of_a_single_pixel():
    # the pixel itself (its right neighbour differs) and the three whose right, lower or lower-right it is
    assert _pixels(boundary_map(_mask((5, 5), (2, 2), (2, 2)))) == {(1, 1), (1, 2), (2, 1), (2, 2)}


def test_boundary_map_of_a_square():
    b = boundary_map(_mask((10, 10), (2, 5), (2, 5)))
    inside = {(r, 5) for r in range(2, 6)} | {(5, c) for c in range(2, 6)}
    outside = {(1, c) for c in range(1, 6)} | {(r, 1) for r in range(2, 6)}
    assert _pixels(b) == inside | outside and len(inside | outside) == 16


def test_boundary_map_ignores_neighbours_outside_the_image():
    assert not boundary_map(np.ones((6, 7), bool)).any()  # a full frame has no boundary
    left = np.zeros((4, 4), bool)
    left[:, 0] = True
    assert _pixels(boundary_map(left)) == {(r, 0) for r in range(4)}
    right = np.zeros((4, 4), bool)
    right[:, 3] = True  # the last column's own pixels compare only downwards: the boundary is column 2
    assert _pixels(boundary_map(right)) == {(r, 2) for r in range(4)}
    bottom = np.zeros((4, 4), bool)
    bottom[3, :] = True
    assert _pixels(boundary_map(bottom)) == {(2, c) for c in range(4)}


def test_j_and_f_of_a_square_against_a_shifted_square_by_hand():
    p = _mask((10, 10), (2, 5), (2, 5))
    g = _mask((10, 10), (2, 5), (5, 8))  # three columns to the right: they share column 5
    assert jaccard(p, g) == pytest.approx(4 / 28)
    # radius 1: 9 of P's 16 boundary pixels lie within 1 px of G's boundary, and 9 of G's 16 of P's (worked out
    # pixel by pixel from the boundary maps above): precision = recall = 9/16, F = 9/16
    assert boundary_f(p, g, 1) == pytest.approx(9 / 16)
    assert boundary_f(p, g, 3) == pytest.approx(1.0)  # every boundary pixel within 3 px
    one_right = _mask((10, 10), (2, 5), (3, 6))
    assert jaccard(p, one_right) == pytest.approx(12 / 20)


def test_j_and_f_with_empty_masks():
    square = _mask((10, 10), (2, 5), (2, 5))
    empty = np.zeros((10, 10), bool)
    assert jaccard(empty, square) == 0.0 and boundary_f(empty, square, 1) == 0.0  # P = 1, R = 0
    assert jaccard(square, empty) == 0.0 and boundary_f(square, empty, 1) == 0.0  # P = 0, R = 1
    assert jaccard(empty, empty) == 1.0 and boundary_f(empty, empty, 1) == 1.0
    full = np.ones((10, 10), bool)
    assert jaccard(full, full) == 1.0 and boundary_f(full, full, 1) == 1.0  # both boundaries empty
    assert boundary_f(full, square, 1) == 0.0  # the full frame has no boundary


def test_f_equals_davis_dilation_with_a_disk_on_random_shapes():
    rng = np.random.default_rng(0)
    for trial in range(6):
        shape = (int(rng.integers(40, 90)), int(rng.integers(40, 120)))
        p = ndimage.gaussian_filter(rng.standard_normal(shape), 3) > 0  # blobs with ragged boundaries
        g = ndimage.gaussian_filter(rng.standard_normal(shape), 4) > 0.02
        r = int(rng.integers(1, 6))
        y, x = np.mgrid[-r : r + 1, -r : r + 1]
        disk = x**2 + y**2 <= r**2
        bp, bg = boundary_map(p), boundary_map(g)
        precision = (bp & ndimage.binary_dilation(bg, disk)).sum() / bp.sum()
        recall = (bg & ndimage.binary_dilation(bp, disk)).sum() / bg.sum()
        assert boundary_f(p, g, r) == pytest.approx(2 * precision * recall / (precision + recall), abs=1e-12)


def test_frame_scores_take_objects_by_id():
    truth = np.zeros((10, 10), np.uint8)
    truth[2:6, 2:6] = 1
    truth[7:9, 7:9] = 2
    pred = truth.copy()
    pred[7:9, 7:9] = 0  # object 2 missed
    j, f = frame_scores(pred, truth, 3)  # object 3: in neither
    assert j.tolist() == [1.0, 0.0, 1.0] and f.tolist() == [1.0, 0.0, 1.0]


def test_recall_and_decay_of_a_hand_made_sequence():
    x = [0.9, 0.8, 0.6, 0.5, 0.4, 0.3, 0.2]
    # linspace(1, 7, 5) = 1, 2.5, 4, 5.5, 7: halves rounded UP (the official + 1e-10) -> ids 0, 2, 3, 5, 6
    assert decay_bins(7) == [(0, 2), (2, 3), (3, 5), (5, 6)]
    s = statistics(x)
    assert s["mean"] == pytest.approx(3.7 / 7)
    assert s["recall"] == pytest.approx(3 / 7)  # strictly above 0.5: 0.5 itself does not count
    assert s["decay"] == pytest.approx((0.9 + 0.8 + 0.6) / 3 - (0.3 + 0.2) / 2)
    assert statistics([0.7])["decay"] == 0.0 and decay_bins(1) == [(0, 0)] * 4


def test_decay_indices_do_not_wrap_beyond_256_frames():
    x = np.linspace(1.0, 0.0, 300)
    # linspace(1, 300, 5) = 1, 75.75, 150.5, 225.25, 300; a uint8 cast would make the last index 299 into 43
    assert decay_bins(300) == [(0, 75), (75, 150), (150, 224), (224, 299)]
    assert statistics(x)["decay"] == pytest.approx(x[:76].mean() - x[224:].mean())


def _scores():
    def obj(seq, k, j, f):
        return ObjectScores(seq, k, tuple(str(i) for i in range(len(j))), np.asarray(j, float), np.asarray(f, float))

    return VideoScores((
        obj("a", 1, [1.0, 1.0, 1.0], [0.8, 0.8, 0.8]),
        obj("a", 2, [0.0, 0.0, 0.0], [0.2, 0.2, 0.2]),
        obj("b", 1, [0.9, 0.6, 0.3], [0.6, 0.6, 0.3]),
    ))


def test_data_set_means_average_over_objects_not_sequences():
    scores = _scores()
    summary = scores.summary()
    assert summary["j_mean"] == pytest.approx(100 * (1.0 + 0.0 + 0.6) / 3)  # per sequence it would be 55
    assert summary["f_mean"] == pytest.approx(100 * (0.8 + 0.2 + 0.5) / 3)
    assert summary["jf_mean"] == pytest.approx((summary["j_mean"] + summary["f_mean"]) / 2)
    assert summary["j_recall"] == pytest.approx(100 * (1 + 0 + 2 / 3) / 3)
    # b_1 over 3 frames: linspace(1, 3, 5) = 1, 1.5, 2, 2.5, 3 -> bins [0, 1] and [2, 2]: (0.9 + 0.6) / 2 - 0.3
    assert summary["j_decay"] == pytest.approx(100 * (0 + 0 + 0.45) / 3)
    assert [row["name"] for row in scores.per_object()] == ["a_1", "a_2", "b_1"]


def test_per_sequence_pairs_give_the_measure_through_the_ratio_reducer_and_resample_sequences():
    scores = _scores()
    pairs = scores.per_sequence("j_mean")
    assert pairs == [[1.0, 2.0], [pytest.approx(0.6), 1.0]]
    for measure, value in scores.summary().items():
        stats = np.asarray(scores.per_sequence(measure))
        v, lo, hi = bootstrap_ci(stats, "ratio", resamples=200, seed=0)
        assert 100 * v == pytest.approx(value)
        assert lo <= v <= hi
