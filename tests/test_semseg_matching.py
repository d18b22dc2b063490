"""Clusters matched to classes once (evaluate.semseg.matching): DESIGN 16's worked numbers, the measures' bootstrap
reducers against them, each image's cluster map, and the confusion's ignore rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evaluate.semseg import SemsegError
from evaluate.semseg.matching import (
    class_scores,
    cluster_confusion,
    cluster_map,
    match_clusters,
    score_set,
)

# DESIGN 16's worked confusion: rows clusters, columns classes (7 more pixels labelled 255 are counted nowhere)
M = np.array([[10, 0, 40], [30, 5, 0], [0, 20, 5]])


def absent_fourth_class() -> np.ndarray:
    m = np.zeros((4, 4), dtype=np.int64)
    m[:3, :3] = M
    m[3, 0] = 5
    return m


def surplus_cluster() -> np.ndarray:
    return np.vstack([M, [6, 0, 0]])


# ----------------------------------------------------------------------------------------- worked numbers


def test_the_worked_confusion_gives_81_82_and_68_69():
    scores = score_set([M], [1])
    assert scores.matching.cluster_to_class.tolist() == [2, 0, 1]
    assert scores.accuracy == pytest.approx(100 * 90 / 110)
    assert round(scores.accuracy, 2) == 81.82
    np.testing.assert_allclose(scores.iou, [30 / 45, 20 / 30, 40 / 55])
    assert round(scores.miou, 2) == 68.69
    assert scores.class_confusion.tolist() == [[30, 5, 0], [0, 20, 5], [10, 0, 40]]


def test_an_absent_class_whose_cluster_holds_pixels_counts_zero():
    """A 4th class no pixel has, its cluster holding 5 class-0 pixels: IoU 0 for it, mIoU 49.85, accuracy 78.26."""
    scores = score_set([absent_fourth_class()], [1])
    assert scores.matching.cluster_to_class.tolist() == [2, 0, 1, 3]
    np.testing.assert_allclose(scores.iou, [30 / 50, 20 / 30, 40 / 55, 0.0])
    assert (round(scores.miou, 2), round(scores.accuracy, 2)) == (49.85, 78.26)


def test_a_class_with_no_pixel_and_no_prediction_is_left_out():
    h = np.array([[5, 0, 0], [0, 0, 0], [1, 0, 4]])
    iou, miou, accuracy = class_scores(h)
    assert np.isnan(iou[1])
    assert miou == pytest.approx(100 * (5 / 6 + 4 / 5) / 2) and accuracy == pytest.approx(90.0)


def test_a_surplus_cluster_counts_as_its_majority_class_unlike_stegos_code():
    """K = 4, C = 3, the 4th cluster holding 6 class-0 pixels: 96 / 116 = 82.76 and mIoU 69.99; STEGO's `update`
    drops those pixels (81.82, 68.69), computed here as its code does."""
    m = surplus_cluster()
    scores = score_set([m], [1])
    assert scores.matching.cluster_to_class.tolist() == [2, 0, 1, 0]
    assert scores.matching.hungarian.tolist() == [True, True, True, False]
    assert (round(scores.accuracy, 2), round(scores.miou, 2)) == (82.76, 69.99)
    stego = m[:3][np.argsort([2, 0, 1])]  # STEGO keeps the matched clusters' rows only
    tp = np.diag(stego)
    stego_iou = tp / (stego.sum(axis=0) + stego.sum(axis=1) - tp)
    assert (round(100 * tp.sum() / stego.sum(), 2), round(100 * stego_iou.mean(), 2)) == (81.82, 68.69)


def test_a_tied_surplus_cluster_goes_to_the_lower_class():
    m = np.vstack([M, [0, 3, 3]])
    assert match_clusters(m).cluster_to_class.tolist() == [2, 0, 1, 1]


def test_fewer_clusters_than_classes_are_refused():
    with pytest.raises(SemsegError, match="K >= C"):
        match_clusters(M[:2])


# ------------------------------------------------------------------------------------------------- measures


def split_over_images(m: np.ndarray, n_images: int, seed: int) -> list[np.ndarray]:
    """M cut into per-image confusions that sum to it (each pixel given to a random image)."""
    rng = np.random.default_rng(seed)
    parts = [np.zeros_like(m) for _ in range(n_images)]
    for (k, c), count in np.ndenumerate(m):
        for image in rng.integers(0, n_images, size=count):
            parts[image][k, c] += 1
    return parts


@pytest.mark.parametrize("m, miou, acc", [(M, 68.69, 81.82), (absent_fourth_class(), 49.85, 78.26),
                                          (surplus_cluster(), 69.99, 82.76)])
def test_the_measures_pooled_value_is_the_worked_number_and_its_interval_brackets_it(m, miou, acc):
    """The ledger's "miou" reducer over per-image sparse class confusions and "ratio" over [correct, labelled] give,
    pooled, exactly the set's mIoU and accuracy; the interval resamples images with the matching held fixed."""
    parts = split_over_images(m, 12, seed=1)
    scores = score_set(parts, list(range(100, 112)))
    assert scores.matching.cluster_to_class.tolist() == score_set([m], [0]).matching.cluster_to_class.tolist()
    unsup_miou, unsup_acc = scores.measures(resamples=500, seed=0)
    assert unsup_miou["measure"] == "unsup_miou" and unsup_acc["measure"] == "unsup_acc"
    assert unsup_miou["value"] == pytest.approx(scores.miou, abs=1e-9) and round(unsup_miou["value"], 2) == miou
    assert unsup_acc["value"] == pytest.approx(scores.accuracy, abs=1e-9) and round(unsup_acc["value"], 2) == acc
    for entry in (unsup_miou, unsup_acc):
        assert entry["ci_low"] < entry["value"] < entry["ci_high"]
        assert entry["n_images"] == 12 and entry["image_ids"] == list(range(100, 112))


def test_an_image_without_a_labelled_pixel_is_left_out_and_counted():
    parts = split_over_images(M, 3, seed=2) + [np.zeros_like(M)]
    unsup_miou, unsup_acc = score_set(parts, [1, 2, 3, 4]).measures(resamples=50, seed=0)
    for entry in (unsup_miou, unsup_acc):
        assert (entry["n_images"], entry["n_left_out"], entry["image_ids"]) == (3, 1, [1, 2, 3])


# ------------------------------------------------------------------------------------------------ cluster maps


def test_cluster_maps_upsample_the_logits_bilinearly_and_take_the_first_of_equal_maxima():
    """A 2 x 2 grid whose left column is centre 0 and right column centre 1, upsampled to 3 x 3: the middle column's
    logits are exactly (0.5, 0.5) and go to cluster 0."""
    centres = np.eye(2)
    tokens = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], dtype=np.float32)  # row-major: (0,0) (0,1) (1,0) (1,1)
    assert cluster_map(tokens, centres, 3).tolist() == [[0, 0, 1]] * 3
    assert cluster_map(tokens, centres, 4).tolist() == [[0, 0, 1, 1]] * 4


def test_cluster_maps_equal_stegos_upsample_normalise_and_cosine():
    """STEGO upsamples the features, normalises each pixel and takes the cosine to the centres: the same argmax, as
    bilinear is linear and a pixel's norm does not move it (float64, random tokens)."""
    rng = np.random.default_rng(3)
    g, side, k, width = 5, 40, 6, 16
    tokens = rng.standard_normal((g * g, width)).astype(np.float32)
    centres = rng.standard_normal((k, width))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    grid = torch.from_numpy(tokens.astype(np.float64).T.reshape(1, width, g, g))
    features = torch.nn.functional.interpolate(grid, size=(side, side), mode="bilinear", align_corners=False)[0]
    features = features / features.norm(dim=0, keepdim=True)
    stego = torch.einsum("dhw,kd->khw", features, torch.from_numpy(centres)).argmax(dim=0).numpy()
    ours = cluster_map(tokens, centres, side)
    assert ours.shape == (side, side) and ours.dtype == np.uint8
    assert np.array_equal(ours, stego)
    assert len(np.unique(ours)) > 2


def test_the_confusion_counts_labelled_pixels_only_and_refuses_stray_values():
    clusters = np.array([[0, 1], [1, 2]], dtype=np.uint8)
    labels = np.array([[1, 255], [0, 0]], dtype=np.uint8)
    assert cluster_confusion(clusters, labels, 3, 2).tolist() == [[0, 1], [1, 0], [1, 0]]
    with pytest.raises(SemsegError, match="label value 7"):
        cluster_confusion(clusters, np.full((2, 2), 7, dtype=np.uint8), 3, 2)
    with pytest.raises(SemsegError, match="differ in size"):
        cluster_confusion(clusters, labels[:1], 3, 2)


# ------------------------------------------------------------------------------------ the pieces, end to end


def test_tokens_that_name_their_patchs_class_score_as_the_labels_upsampled_on_the_demo_set(tmp_path):
    """The demo set read by the folder kind, each label square (tokens320) cut into 16-px patches, each patch's token
    the one-hot of its majority class: the clusters are the classes, and the scores are those of the one-hot grid
    upsampled and compared with the labels, computed here; the same tokens transposed (columns for rows) score lower,
    so the token grid is read row by row on the square the labels are scored on."""
    from evaluate.datasets.label_folder import LabelFolderSet
    from evaluate.demo.semseg import make_demo_semseg
    from evaluate.semseg.cluster import ClusterSettings, TokenStream, fit_clusters
    from evaluate.pixels.tokens320 import tokens320_labels, tokens320_side

    out = make_demo_semseg(tmp_path / "demo", n_images=6, seed=2)
    data = LabelFolderSet(out / "images", out / "labels", out / "classes.txt")
    side, patch, c = tokens320_side(16), 16, len(data.class_names)
    g = side // patch
    squares, tokens = [], []
    for image_id in data.image_ids:
        square = tokens320_labels(data.labels(image_id), side)
        patches = square.reshape(g, patch, g, patch).transpose(0, 2, 1, 3).reshape(g * g, -1)
        majority = [np.bincount(p[p < c], minlength=c).argmax() if (p < c).any() else 0 for p in patches]
        squares.append(square)
        tokens.append(np.eye(c, dtype=np.float32)[majority])
    fit = fit_clusters(TokenStream.from_arrays(tokens), ClusterSettings(c, n_init=2))

    def scored(grids: list[np.ndarray]):
        confusions = [cluster_confusion(cluster_map(t, fit.centres, side), s, c, c) for t, s in zip(grids, squares)]
        return score_set(confusions, data.image_ids)

    scores = scored(tokens)
    correct = labelled = 0
    for t, square in zip(tokens, squares):
        logits = torch.from_numpy(t.T.reshape(1, c, g, g).astype(np.float64))
        up = torch.nn.functional.interpolate(logits, size=(side, side), mode="bilinear", align_corners=False)[0]
        predicted = up.numpy().argmax(axis=0)
        keep = square < c
        correct += int((predicted[keep] == square[keep]).sum())
        labelled += int(keep.sum())
    assert sorted(scores.matching.cluster_to_class.tolist()) == list(range(c))
    assert scores.accuracy == pytest.approx(100 * correct / labelled, abs=1e-12) and scores.accuracy > 90
    transposed = [t.reshape(g, g, c).transpose(1, 0, 2).reshape(g * g, c) for t in tokens]
    assert scored(transposed).accuracy < scores.accuracy - 5
