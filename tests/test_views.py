"""Per-category, per-class and per-image views, and rank agreement, against hand-computed values and scipy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from evaluate.scores.agreement import kendall_tau_b, pair_agreement, rank_agreement
from evaluate.datasets.coco import CocoDataset, rle_from_mask
from evaluate.scores.measures import make_measure
from evaluate.probe.labels import class_names, probe_classes
from evaluate.probe.scores import per_class_iou
from evaluate.scores.masks import extremes, image_categories, jaccard_per_image, per_category_mean
from evaluate.outputs.views import gallery_tables


def box(rows, cols, shape=(4, 4)) -> np.ndarray:
    m = np.zeros(shape, dtype=bool)
    m[rows, cols] = True
    return m


def hand_made_coco(root: Path) -> CocoDataset:
    """Four 4 x 4 images: categories cat (id 3) and dog (id 7); image 3 has a crowd cat, image 4 only a crowd cat.

    image 1: cat = top-left 2 x 2                       -> categories [cat]
    image 2: dog = column 0, cat = column 3             -> [cat, dog]
    image 3: dog = everything, crowd cat = bottom row   -> [dog] (a crowd region places no image in a category)
    image 4: crowd cat = everything                     -> [] and left out of Jaccard (no non-crowd truth)
    """
    (root / "images").mkdir(parents=True)
    anns = [
        (1, 3, box(slice(0, 2), slice(0, 2)), 0),
        (2, 7, box(slice(None), 0), 0), (2, 3, box(slice(None), 3), 0),
        (3, 7, box(slice(None), slice(None)), 0), (3, 3, box(3, slice(None)), 1),
        (4, 3, box(slice(None), slice(None)), 1),
    ]
    data = {
        "images": [{"id": i, "file_name": f"{i}.png", "height": 4, "width": 4} for i in (1, 2, 3, 4)],
        "categories": [{"id": 3, "name": "cat"}, {"id": 7, "name": "dog"}],
        "annotations": [
            {"id": k + 1, "image_id": i, "category_id": c, "segmentation": rle_from_mask(m), "iscrowd": crowd,
             "area": float(m.sum()), "bbox": [0.0, 0.0, 4.0, 4.0]}
            for k, (i, c, m, crowd) in enumerate(anns)
        ],
    }
    (root / "annotations.json").write_text(json.dumps(data))
    return CocoDataset(root / "images", root / "annotations.json")


def coco_result(image_id: int, mask: np.ndarray) -> dict:
    from pycocotools import mask as mask_utils

    enc = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"image_id": image_id, "category_id": 1, "score": 1.0,
            "segmentation": {"size": enc["size"], "counts": enc["counts"].decode("ascii")}}


def test_per_category_jaccard_of_hand_made_masks_equals_hand_computed_values(tmp_path):
    dataset = hand_made_coco(tmp_path)
    results = [
        coco_result(1, box(slice(0, 2), slice(None))),  # P = top 2 rows (8): I 4, U 8 -> 1/2
        coco_result(2, box(slice(None), slice(0, 2))),  # P = columns 0-1 (8), G = columns 0 and 3: I 4, U 12 -> 1/3
        coco_result(3, box(slice(0, 2), slice(None))),  # crowd row removed: G 12, P 8 inside: I 8, U 12 -> 2/3
    ]
    jac = jaccard_per_image(dataset, results)
    assert jac.image_ids == [1, 2, 3] and jac.left_out == [4]
    assert jac.values.tolist() == pytest.approx([1 / 2, 1 / 3, 2 / 3], abs=1e-15)
    categories = image_categories(dataset)
    assert categories == [[1, ["cat"]], [2, ["cat", "dog"]], [3, ["dog"]], [4, []]]
    per = per_category_mean(jac.image_ids, jac.values.tolist(), categories, resamples=500, seed=0)
    assert [(e["category"], e["n_images"]) for e in per] == [("cat", 2), ("dog", 2)]
    assert per[0]["value"] == pytest.approx((1 / 2 + 1 / 3) / 2, abs=1e-15)  # 5/12
    assert per[1]["value"] == pytest.approx((1 / 3 + 2 / 3) / 2, abs=1e-15)  # 1/2
    for e, (lo, hi) in zip(per, ((1 / 3, 1 / 2), (1 / 3, 2 / 3))):
        assert lo - 1e-12 <= e["ci_low"] <= e["value"] <= e["ci_high"] <= hi + 1e-12


def test_class_names_follow_the_probe_labels(tmp_path):
    dataset = hand_made_coco(tmp_path)
    assert class_names(probe_classes(dataset.categories, "test")) == ["background", "cat", "dog"]


def test_per_class_iou_pools_confusions_over_images():
    # image A: background 10 right, 2 background called cat; cat 4 right. image B: cat 3 called dog, dog 5 right.
    per_image = [[[0, 0, 10], [0, 1, 2], [1, 1, 4]], [[1, 2, 3], [2, 2, 5]]]
    out = per_class_iou(per_image, 4, resamples=300, seed=1)
    # background: I 10, T 12, P 10 -> 10 / 12; cat: I 4, T 7, P 6 -> 4 / 9; dog: I 5, T 5, P 8 -> 5 / 8
    assert [e["value"] for e in out[:3]] == pytest.approx([10 / 12, 4 / 9, 5 / 8], abs=1e-15)
    assert [e["n_images"] for e in out] == [1, 2, 1, 0]
    assert out[3]["value"] is None and out[3]["ci_low"] is None  # class 3 never seen nor predicted
    # the pooled per-class values are the terms of mIoU as the ledger computes it
    m = make_measure("probe_miou", image_ids=[1, 2], per_image=per_image, reducer="miou", resamples=10, seed=0)
    assert m["value"] == pytest.approx(100 * (10 / 12 + 4 / 9 + 5 / 8) / 3, abs=1e-12)


def test_gallery_picks_what_a_hand_computed_ranking_picks():
    ids, values = [5, 3, 9, 1, 7, 4], [0.2, 0.9, 0.2, 0.5, 0.9, 0.6]
    # worst by (value, id): (0.2, 5), (0.2, 9), (0.5, 1); best by (-value, id): (0.9, 3), (0.9, 7), (0.6, 4)
    assert extremes(ids, values, 3) == ([5, 9, 1], [3, 7, 4])
    assert extremes(ids, values, 1) == ([5], [3])
    rec = {"kind": "decoder", "role": "eval", "checkpoint": "ck", "dataset": "val", "setting": "s",
           "measures": [{"measure": "jaccard", "image_ids": ids, "per_image": values, "n_images": 6,
                         "n_left_out": 0, "value": 55.0, "ci_low": 1.0, "ci_high": 2.0, "reducer": "mean"}],
           "image_categories": [[5, ["cat"]], [3, ["cat", "dog"]]]}
    (table,) = gallery_tables([rec], 2)
    picked = [(r[1].text, r[2].text, r[3].text, r[4].value, r[5].text) for r in table.rows]
    assert picked == [("worst", "1", "5", 20.0, "cat"), ("worst", "2", "9", 20.0, ""),
                      ("best", "1", "3", 90.0, "cat, dog"), ("best", "2", "7", 90.0, "")]


def test_kendall_tau_b_equals_scipy_with_and_without_ties():
    rng = np.random.default_rng(4)
    for _ in range(50):
        x = rng.integers(0, 4, size=6).astype(float)
        y = rng.integers(0, 4, size=6).astype(float)
        want = scipy.stats.kendalltau(x, y).statistic
        got = float(kendall_tau_b(x, y))
        assert (np.isnan(want) and np.isnan(got)) or got == pytest.approx(want, abs=1e-12)
    rows = rng.random((5, 7)), rng.random((5, 7))
    assert kendall_tau_b(*rows) == pytest.approx([scipy.stats.kendalltau(a, b).statistic for a, b in zip(*rows)])


def mean_measure(name, ids, values):
    return {"measure": name, "value": 100 * float(np.mean(values)), "ci_low": None, "ci_high": None,
            "n_images": len(ids), "n_left_out": 0, "reducer": "mean", "image_ids": list(ids),
            "per_image": list(values)}


def test_rank_agreement_of_hand_made_records_equals_scipy_and_an_independent_bootstrap():
    rng = np.random.default_rng(11)
    ids = list(range(20, 30))
    a_vals = {f"ck{k}": rng.random(10) for k in range(4)}
    b_vals = {f"ck{k}": rng.random(10) for k in range(4)}
    # checkpoint ck3's records list the images in another order: the pairing is by image id
    order = rng.permutation(10)
    a = {c: mean_measure("jaccard", ids, v) for c, v in a_vals.items()}
    b = {c: mean_measure("probe_accuracy", ids, v) for c, v in b_vals.items()}
    b["ck3"] = mean_measure("probe_accuracy", [ids[i] for i in order], b_vals["ck3"][order])
    got = pair_agreement(a, b, resamples=200, seed=3)
    names = sorted(a)
    want = scipy.stats.kendalltau([a_vals[c].mean() for c in names], [b_vals[c].mean() for c in names]).statistic
    assert got["tau"] == pytest.approx(want, abs=1e-12) and got["n_images"] == 10 and got["checkpoints"] == names
    draw = np.random.default_rng(3)
    taus = []
    for _ in range(200):
        idx = draw.integers(0, 10, size=10)
        taus.append(scipy.stats.kendalltau([a_vals[c][idx].mean() for c in names],
                                           [b_vals[c][idx].mean() for c in names]).statistic)
    taus = np.asarray(taus)
    lo, hi = np.percentile(taus[~np.isnan(taus)], [2.5, 97.5])
    assert (got["ci_low"], got["ci_high"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))


def test_identical_measures_agree_with_tau_one_and_a_zero_width_interval():
    rng = np.random.default_rng(2)
    ids = list(range(8))
    a = {f"ck{k}": mean_measure("jaccard", ids, rng.random(8)) for k in range(5)}
    got = pair_agreement(a, dict(a), resamples=300, seed=0)
    assert (got["tau"], got["ci_low"], got["ci_high"]) == (1.0, 1.0, 1.0)


def test_measures_without_per_image_statistics_get_a_point_tau_and_no_interval():
    ids = [1, 2, 3]
    jac = {c: mean_measure("jaccard", ids, v) for c, v in (("x", [0.1, 0.2, 0.3]), ("y", [0.5, 0.6, 0.7]),
                                                           ("z", [0.3, 0.3, 0.3]))}
    ap = {c: {"measure": "ap", "value": v, "ci_low": None, "ci_high": None, "n_images": 3, "n_left_out": 0,
              "reducer": None, "image_ids": ids, "per_image": []} for c, v in (("x", 3.0), ("y", 1.0), ("z", 2.0))}
    (entry,) = rank_agreement({"jaccard": jac, "ap": ap}, ["jaccard", "ap"], resamples=50, seed=0)
    # Jaccard ranks x < z < y, AP ranks y < z < x: fully reversed
    assert (entry["measure_a"], entry["measure_b"], entry["tau"]) == ("jaccard", "ap", -1.0)
    assert entry["ci_low"] is None and entry["ci_high"] is None and entry["n_images"] is None
