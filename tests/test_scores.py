"""Scores (docs/design.md §6): Jaccard with crowd, bootstrap intervals, class-agnostic mask AP, CorLoc.

Every expected number is worked out by hand here or drawn from an independent loop written here."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

from evaluate import EvaluationError
from evaluate.scores import ScoreError
from evaluate.scores import bootstrap as bootstrap_module
from evaluate.scores.bootstrap import bootstrap_ci, miou_counts_from_confusion, paired_bootstrap_diff
from evaluate.scores.masks import (
    box_iou,
    coco_mask_ap,
    corloc_hit,
    corloc_hits,
    jaccard,
    jaccard_per_image,
    mask_box,
)


# ------------------------------------------------------------------------------------------------------ helpers


def rle(mask: np.ndarray) -> dict:
    out = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    out["counts"] = out["counts"].decode("ascii")
    return out


def make_coco(images: list[tuple[int, int, int]], anns: list[dict]) -> COCO:
    """In-memory COCO from (id, h, w) images and annotations holding bool masks under `mask`."""
    dataset = {
        "images": [{"id": i, "height": h, "width": w, "file_name": f"{i}.jpg"} for i, h, w in images],
        "categories": [{"id": 1, "name": "thing"}, {"id": 2, "name": "other"}],
        "annotations": [],
    }
    for a in anns:
        m = a["mask"]
        seg = rle(m)
        dataset["annotations"].append(
            {
                "id": a["id"],
                "image_id": a["image_id"],
                "category_id": a.get("category_id", 1),
                "iscrowd": a.get("iscrowd", 0),
                "segmentation": seg,
                "area": float(m.sum()),
                "bbox": a.get("bbox", [float(v) for v in mask_utils.toBbox(seg)]),
            }
        )
    coco = COCO()
    coco.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


class CocoTruth:
    """The CocoDataset protocol over a pycocotools COCO (test stand-in; the real class lives in evaluate.datasets.coco)."""

    def __init__(self, coco: COCO):
        self.coco = coco
        self.image_ids = sorted(coco.getImgIds())

    def image_size(self, image_id):
        info = self.coco.imgs[image_id]
        return info["height"], info["width"]

    def instances(self, image_id):
        return self.coco.imgToAnns.get(image_id, [])

    def ground_truth(self, image_id):
        h, w = self.image_size(image_id)
        objects = np.zeros((h, w), bool)
        crowd = np.zeros((h, w), bool)
        for a in self.instances(image_id):
            m = self.coco.annToMask(a).astype(bool)
            if a["iscrowd"]:
                crowd |= m
            else:
                objects |= m
        return objects, crowd


def box_mask(h, w, r0, r1, c0, c1):
    m = np.zeros((h, w), bool)
    m[r0:r1, c0:c1] = True
    return m


# ------------------------------------------------------------------------------------------------------ Jaccard


def test_jaccard_hand_made_with_crowd():
    # P = top two rows of a 4 x 4 image (8 px), G = left two columns (8 px), crowd = (0,0) and (3,0).
    pred = box_mask(4, 4, 0, 2, 0, 4)
    objects = box_mask(4, 4, 0, 4, 0, 2)
    crowd = np.zeros((4, 4), bool)
    crowd[0, 0] = crowd[3, 0] = True
    # without crowd: P and G = {(0,0),(0,1),(1,0),(1,1)} = 4, P or G = 12 -> 1/3
    assert jaccard(pred, objects, np.zeros((4, 4), bool)) == pytest.approx(4 / 12)
    # crowd removed: P' = 7 px (drops (0,0)), G' = 6 px (drops (0,0), (3,0)); P' and G' = {(0,1),(1,0),(1,1)} = 3
    # P' or G' = 7 + 6 - 3 = 10 -> 3/10
    assert jaccard(pred, objects, crowd) == pytest.approx(3 / 10)


def test_jaccard_empty_ground_truth_is_left_out():
    crowd = box_mask(4, 4, 0, 2, 0, 2)
    objects = box_mask(4, 4, 0, 1, 0, 1)  # only inside the crowd region
    assert jaccard(np.ones((4, 4), bool), objects, crowd) is None
    assert jaccard(np.ones((4, 4), bool), np.zeros((4, 4), bool), np.zeros((4, 4), bool)) is None
    # empty prediction, non-empty G -> 0
    assert jaccard(np.zeros((4, 4), bool), box_mask(4, 4, 2, 4, 2, 4), crowd) == 0.0


def test_jaccard_shape_mismatch_is_an_evaluation_error():
    with pytest.raises(EvaluationError, match="same"):
        jaccard(np.ones((4, 4), bool), np.ones((4, 5), bool), np.zeros((4, 4), bool))


def test_jaccard_per_image_counts_left_out_images():
    h, w = 6, 8
    coco = make_coco(
        [(1, h, w), (2, h, w), (3, h, w)],
        [
            {"id": 1, "image_id": 1, "mask": box_mask(h, w, 0, 3, 0, 4)},  # 12 px
            {"id": 2, "image_id": 2, "mask": box_mask(h, w, 0, 6, 0, 8), "iscrowd": 1},  # crowd only
            {"id": 3, "image_id": 3, "mask": box_mask(h, w, 2, 4, 2, 4)},  # 4 px, no prediction
        ],
    )
    results = [
        {"image_id": 1, "category_id": 1, "score": 0.9, "segmentation": rle(box_mask(h, w, 0, 3, 0, 2))},  # 6 px
        {"image_id": 1, "category_id": 1, "score": 0.5, "segmentation": rle(box_mask(h, w, 0, 1, 0, 8))},  # 8 px
        {"image_id": 2, "category_id": 1, "score": 0.5, "segmentation": rle(box_mask(h, w, 0, 1, 0, 8))},
    ]
    per = jaccard_per_image(CocoTruth(coco), results)
    # image 1: P = rows 0-2 cols 0-1 (6) or row 0 cols 0-7 (8) -> 6 + 8 - 2 = 12 px; P and G = 6 + 2 = 8;
    # P or G = 12 + 12 - 8 = 16 -> 0.5. Image 3: no prediction -> 0. Image 2: left out.
    assert per.image_ids == [1, 3]
    assert per.values.tolist() == pytest.approx([0.5, 0.0])
    assert per.left_out == [2] and per.n_left_out == 1 and per.n_images == 2


def test_jaccard_per_image_rejects_unknown_image_and_wrong_size():
    coco = make_coco([(1, 4, 4)], [{"id": 1, "image_id": 1, "mask": box_mask(4, 4, 0, 2, 0, 2)}])
    with pytest.raises(ScoreError, match="image_id 7"):
        jaccard_per_image(CocoTruth(coco), [{"image_id": 7, "score": 1, "segmentation": rle(np.ones((4, 4)))}])
    with pytest.raises(ScoreError, match="size"):
        jaccard_per_image(CocoTruth(coco), [{"image_id": 1, "score": 1, "segmentation": rle(np.ones((5, 4)))}])


def _coco_mini_truth(root):
    try:
        from evaluate.datasets.coco import CocoDataset
    except ImportError:  # the data helper's module is not in this checkout yet
        with contextlib.redirect_stdout(io.StringIO()):
            return CocoTruth(COCO(str(root / "annotations.json")))
    return CocoDataset(root / "images", root / "annotations.json")


@pytest.mark.coco
def test_whole_image_mask_reference_value(coco_mini):
    """docs/design.md §6: one whole-image mask per image on coco2017-mini val gives mean Jaccard 33.04."""
    truth = _coco_mini_truth(coco_mini)
    results = []
    for image_id in truth.image_ids:
        h, w = truth.image_size(image_id)
        results.append(
            {"image_id": image_id, "category_id": 1, "score": 1.0, "segmentation": rle(np.ones((h, w), bool))}
        )
    per = jaccard_per_image(truth, results)
    assert per.n_images == 79 and per.n_left_out == 0
    assert round(float(per.values.mean()) * 100, 2) == 33.04


# ---------------------------------------------------------------------------------------------------- bootstrap


def slow_bootstrap(stats, reduce, resamples, seed, level=0.95):
    """Independent loop: resample r draws rng.integers(0, n, size=n), reduces the drawn images directly."""
    rng = np.random.default_rng(seed)
    n = len(stats)
    vals = []
    for _ in range(resamples):
        idx = rng.integers(0, n, size=n)
        vals.append(reduce(stats[idx]))
    vals = np.array(vals)
    vals = vals[~np.isnan(vals)]
    lo, hi = np.percentile(vals, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return reduce(stats), lo, hi


def slow_mean(x):
    return float(np.mean(x))


def slow_ratio(x):
    return float(x[:, 0].sum() / x[:, 1].sum()) if x[:, 1].sum() else float("nan")


def slow_miou(conf):
    pooled = conf.sum(axis=0).astype(float)
    ious = []
    for c in range(pooled.shape[0]):
        union = pooled[c, :].sum() + pooled[:, c].sum() - pooled[c, c]
        if union > 0:
            ious.append(pooled[c, c] / union)
    return float(np.mean(ious))


def random_confusions(rng, n, k):
    conf = np.zeros((n, k, k), dtype=np.int64)
    for i in range(n):
        present = rng.choice(k, size=rng.integers(1, 4), replace=False)
        for t in present:
            for p in rng.choice(k, size=2):
                conf[i, t, p] += rng.integers(1, 500)
    return conf


def test_bootstrap_constant_input_has_zero_width():
    value, lo, hi = bootstrap_ci(np.full(37, 0.3), "mean", resamples=2000, seed=0)
    assert value == pytest.approx(0.3, abs=1e-15)
    assert lo == pytest.approx(0.3, abs=1e-12) and hi == pytest.approx(0.3, abs=1e-12)
    assert hi - lo == pytest.approx(0.0, abs=1e-12)


def test_bootstrap_mean_matches_numpy_and_is_deterministic():
    x = np.random.default_rng(5).random(79)
    value, lo, hi = bootstrap_ci(x, "mean", resamples=3000, seed=0)
    assert value == pytest.approx(float(np.mean(x)), rel=1e-13)
    assert lo < value < hi
    assert bootstrap_ci(x, "mean", resamples=3000, seed=0) == (value, lo, hi)
    assert bootstrap_ci(x, "mean", resamples=3000, seed=1) != (value, lo, hi)


@pytest.mark.parametrize("reducer", ["mean", "ratio", "miou"])
def test_bootstrap_matches_a_slow_loop(reducer):
    rng = np.random.default_rng(11)
    if reducer == "mean":
        stats, reduce = rng.random(53), slow_mean
    elif reducer == "ratio":
        valid = rng.integers(0, 197, size=41)
        stats, reduce = np.stack([rng.integers(0, valid + 1), valid], axis=1), slow_ratio
    else:
        stats, reduce = random_confusions(rng, 30, 6), slow_miou
    fast = bootstrap_ci(stats, reducer, resamples=700, seed=3, level=0.9)
    slow = slow_bootstrap(stats, reduce, 700, 3, level=0.9)
    assert fast == pytest.approx(slow, rel=1e-10, abs=1e-12)


def test_bootstrap_chunks_do_not_change_the_draws(monkeypatch):
    x = np.random.default_rng(2).random(45)
    whole = bootstrap_ci(x, "mean", resamples=1001, seed=4)
    monkeypatch.setattr(bootstrap_module, "_CHUNK_VALUES", 45 * 7)  # chunks of 7 resamples, the last one partial
    chunked = bootstrap_ci(x, "mean", resamples=1001, seed=4)
    assert chunked == pytest.approx(whole, rel=1e-13)
    assert chunked == pytest.approx(slow_bootstrap(x, slow_mean, 1001, 4), rel=1e-12)


def test_miou_reducer_on_confusions_equals_counts_reducer():
    conf = random_confusions(np.random.default_rng(8), 25, 5)
    counts = miou_counts_from_confusion(conf)
    assert counts.shape == (25, 3, 5)
    from_counts = bootstrap_ci(counts, "miou-counts", resamples=500, seed=0)
    assert bootstrap_ci(conf, "miou", resamples=500, seed=0) == from_counts
    assert bootstrap_ci(conf, "miou", resamples=500, seed=0)[0] == pytest.approx(slow_miou(conf), rel=1e-14)


def test_paired_diff_of_identical_inputs_is_exactly_zero():
    x = np.random.default_rng(3).random(60)
    assert paired_bootstrap_diff(x, x.copy(), "mean", resamples=1000, seed=0) == (0.0, 0.0, 0.0)
    conf = random_confusions(np.random.default_rng(4), 20, 4)
    assert paired_bootstrap_diff(conf, conf.copy(), "miou", resamples=300, seed=0) == (0.0, 0.0, 0.0)


def test_paired_diff_matches_a_slow_paired_loop():
    rng = np.random.default_rng(9)
    a = rng.random(40)
    b = a * 0.5 + rng.random(40) * 0.3
    diff, lo, hi = paired_bootstrap_diff(a, b, "mean", resamples=800, seed=6)
    r = np.random.default_rng(6)
    diffs = []
    for _ in range(800):
        idx = r.integers(0, 40, size=40)
        diffs.append(a[idx].mean() - b[idx].mean())
    assert diff == pytest.approx(a.mean() - b.mean(), rel=1e-12)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])), rel=1e-10)
    # a constant shift is known exactly on every resample
    shifted = paired_bootstrap_diff(a + 1.0, a, "mean", resamples=500, seed=0)
    assert shifted == pytest.approx((1.0, 1.0, 1.0), abs=1e-12)


def test_bootstrap_bad_input_names_the_problem():
    with pytest.raises(ScoreError, match="unknown reducer"):
        bootstrap_ci(np.ones(3), "median", resamples=1000, seed=0)
    with pytest.raises(ScoreError, match=r"\(n, 2\)"):
        bootstrap_ci(np.ones(3), "ratio", resamples=1000, seed=0)
    with pytest.raises(ScoreError, match="at least one image"):
        bootstrap_ci(np.ones(0), "mean", resamples=1000, seed=0)
    with pytest.raises(ScoreError, match="same images"):
        paired_bootstrap_diff(np.ones(3), np.ones(4), "mean", resamples=1000, seed=0)


# ---------------------------------------------------------------------------------------------------------- AP


def small_ground_truth():
    h, w = 20, 30
    return make_coco(
        [(1, h, w), (2, h, w)],
        [
            {"id": 1, "image_id": 1, "mask": box_mask(h, w, 2, 10, 3, 12)},
            {"id": 2, "image_id": 1, "mask": box_mask(h, w, 12, 18, 15, 28), "category_id": 2},
            {"id": 3, "image_id": 2, "mask": box_mask(h, w, 0, 20, 0, 30), "iscrowd": 1},
            {"id": 4, "image_id": 2, "mask": box_mask(h, w, 5, 9, 5, 9)},
        ],
    )


def test_perfect_predictions_give_100_and_empty_results_0():
    gt = small_ground_truth()
    results = [
        {"image_id": a["image_id"], "category_id": 1, "score": 0.9, "segmentation": a["segmentation"]}
        for a in gt.dataset["annotations"]
        if not a["iscrowd"]
    ]
    before = json.dumps(results, sort_keys=True)
    ap = coco_mask_ap(gt, results)
    assert ap == pytest.approx({"ap": 100.0, "ap50": 100.0, "ar10": 100.0})
    assert json.dumps(results, sort_keys=True) == before  # the caller's results are not modified
    assert coco_mask_ap(gt, []) == {"ap": 0.0, "ap50": 0.0, "ar10": 0.0}


def test_coco_mask_ap_rejects_results_for_unknown_images():
    with pytest.raises(ScoreError, match="image_id 99"):
        coco_mask_ap(small_ground_truth(), [{"image_id": 99, "score": 1.0, "segmentation": rle(np.ones((2, 2)))}])


def test_coco_mask_ap_of_a_hand_worked_case():
    """Class-agnostic AP, AP50 and AR@10 worked out by hand on two 20 x 30 images (docs/design.md §6).

    Ground truth: image 1 holds A (rows 2-9, cols 3-11: 72 px, category 1) and B (rows 12-19, cols 16-23: 64 px,
    category 2); image 2 holds C (rows 2-7, cols 2-7: 36 px) and a crowd region (rows 10-19, every column).
    3 non-crowd objects. Predictions, by score (category ids are ignored: useCats = 0):
      d1 0.95 image 1 = A exactly (its category 2 differs from A's):  IoU(A) = 1
      d4 0.90 image 2 inside the crowd region:                         crowd IoU = |d4 & crowd| / |d4| = 1: ignored
      d2 0.80 image 2 rows 2-5, cols 2-7 (24 px, inside C):            IoU(C) = 24 / 36 = 2/3
      d3 0.60 image 1 rows 0-4, cols 20-29, touching no object:        false positive at every threshold
      d5 0.50 image 1 rows 12-18, cols 16-23 (56 px, inside B):        IoU(B) = 56 / 64 = 7/8
    The ten IoU thresholds 0.50, 0.55, ..., 0.95 fall in three groups (no IoU lies on a threshold):
      t <= 0.65 (4 thresholds): d1 TP, d2 TP, d3 FP, d5 TP. Recall 1/3, 2/3, 2/3, 1; precision 1, 1, 2/3, 3/4,
        made non-increasing from the right: 1, 1, 3/4, 3/4. Of the 101 recall points r = 0, 0.01, ..., 1, the 34
        with r <= 1/3 and the 33 with 1/3 < r <= 2/3 take precision 1; the 34 with r > 2/3 take 3/4.
        AP = (67 + 34 * 3/4) / 101 = 92.5 / 101.
      0.70 <= t <= 0.85 (4): d1 TP, d2 FP, d3 FP, d5 TP. Recall 1/3, 1/3, 1/3, 2/3; precision 1, 1/2, 1/3, 1/2 ->
        1, 1/2, 1/2, 1/2. 34 points at 1, 33 at 1/2, the 34 with r > 2/3 are out of reach: 0.
        AP = (34 + 33 / 2) / 101 = 50.5 / 101.
      t >= 0.90 (2): only d1 is a TP: recall 1/3 with precision 1 at its first point: AP = 34 / 101.
    AP = the mean over the ten thresholds = (4 * 92.5 + 4 * 50.5 + 2 * 34) / 1010 = 640 / 1010; AP50 = 92.5 / 101.
    AR@10 (every image has at most 10 predictions) = the mean of the final recalls, (4 * 1 + 4 * 2/3 + 2 * 1/3) / 10
    = 22 / 30. (COCOeval's precision is tp / (tp + fp + 2.2e-16), hence the tolerance.)
    """
    h, w = 20, 30
    gt = make_coco(
        [(1, h, w), (2, h, w)],
        [
            {"id": 1, "image_id": 1, "mask": box_mask(h, w, 2, 10, 3, 12)},  # A
            {"id": 2, "image_id": 1, "mask": box_mask(h, w, 12, 20, 16, 24), "category_id": 2},  # B
            {"id": 3, "image_id": 2, "mask": box_mask(h, w, 2, 8, 2, 8)},  # C
            {"id": 4, "image_id": 2, "mask": box_mask(h, w, 10, 20, 0, 30), "iscrowd": 1},
        ],
    )
    results = [
        {"image_id": 1, "category_id": 2, "score": 0.95, "segmentation": rle(box_mask(h, w, 2, 10, 3, 12))},  # d1
        {"image_id": 2, "category_id": 1, "score": 0.8, "segmentation": rle(box_mask(h, w, 2, 6, 2, 8))},  # d2
        {"image_id": 1, "category_id": 1, "score": 0.6, "segmentation": rle(box_mask(h, w, 0, 5, 20, 30))},  # d3
        {"image_id": 2, "category_id": 1, "score": 0.9, "segmentation": rle(box_mask(h, w, 12, 16, 5, 10))},  # d4
        {"image_id": 1, "category_id": 2, "score": 0.5, "segmentation": rle(box_mask(h, w, 12, 19, 16, 24))},  # d5
    ]
    ap = coco_mask_ap(gt, results)
    assert ap == pytest.approx({"ap": 100 * 640 / 1010, "ap50": 100 * 92.5 / 101, "ar10": 100 * 22 / 30}, abs=1e-9)
    # without the crowd region d4 is a false positive ranked second: every threshold's precision drops
    no_crowd = make_coco([(1, h, w), (2, h, w)], [a | {"mask": mask_utils.decode(a["segmentation"]).astype(bool)}
                                                  for a in gt.dataset["annotations"] if not a["iscrowd"]])
    assert coco_mask_ap(no_crowd, results)["ap"] < ap["ap"]
    assert coco_mask_ap(no_crowd, results)["ar10"] == pytest.approx(ap["ar10"], abs=1e-9)  # recall is unchanged


@pytest.mark.coco
def test_coco_mask_ap_of_true_masks_for_a_subset_of_coco_mini(coco_mini):
    """Real annotations: predicting the true mask of a seeded subset S of the N non-crowd objects (scores random)
    gives precision 1 up to recall |S| / N at every IoU threshold and nothing beyond, so AP = AP50 = (the number
    of the 101 recall points r = k / 100 with r <= |S| / N) / 101, and AR@10 = sum over images of
    min(10, |S in the image|) / N (at most 10 predictions count per image)."""
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(coco_mini / "annotations.json"))
    rng = np.random.default_rng(0)
    objects = [a for a in gt.dataset["annotations"] if not a["iscrowd"]]
    chosen = [a for a in objects if rng.random() < 0.7]
    results = [{"image_id": a["image_id"], "category_id": 1, "score": float(rng.random()),
                "segmentation": rle(gt.annToMask(a).astype(bool))} for a in chosen]
    per_image: dict[int, int] = {}
    for a in chosen:
        per_image[a["image_id"]] = per_image.get(a["image_id"], 0) + 1
    assert max(per_image.values()) > 10  # the AR@10 cap is exercised
    recall = len(chosen) / len(objects)
    points = sum(1 for k in range(101) if k <= 100 * recall)  # 100 * recall is not an integer here
    assert 100 * recall != int(100 * recall)
    ap = coco_mask_ap(gt, results)
    assert ap["ap"] == pytest.approx(100 * points / 101, abs=1e-9)
    assert ap["ap50"] == pytest.approx(100 * points / 101, abs=1e-9)
    assert ap["ar10"] == pytest.approx(100 * sum(min(10, n) for n in per_image.values()) / len(objects), abs=1e-9)


# ------------------------------------------------------------------------------------------------------ CorLoc


def test_mask_box_and_box_iou_conventions():
    m = box_mask(10, 12, 2, 6, 3, 9)  # rows 2..5, cols 3..8 inclusive
    assert mask_box(m) == [3.0, 2.0, 6.0, 4.0]
    assert mask_box(np.zeros((3, 3), bool)) is None
    single = np.zeros((4, 4), bool)
    single[1, 2] = True
    assert mask_box(single) == [2.0, 1.0, 1.0, 1.0]  # one pixel is a 1 x 1 box
    assert box_iou([3, 2, 6, 4], [3, 2, 6, 4]) == 1.0
    # x overlap [3, 6) = 3, y overlap [2, 4) = 2 -> 6 / (24 + 24 - 6) = 1/7
    assert box_iou([3, 2, 6, 4], [0, 0, 6, 4]) == pytest.approx(1 / 7)
    assert box_iou([0, 0, 1, 1], [5, 5, 1, 1]) == 0.0


def test_corloc_hit_hand_cases():
    top = box_mask(10, 12, 0, 2, 0, 4)  # box [0, 0, 4, 2], area 8
    half = [0.0, 0.0, 4.0, 1.0]  # IoU 4 / 8 = 0.5 exactly -> hit (>=)
    assert corloc_hit([(top, 0.9)], [half]) is True
    assert corloc_hit([(top, 0.9)], [[0.0, 0.0, 3.0, 1.0]]) is False  # IoU 3/8
    assert corloc_hit([(top, 0.9)], [[5, 5, 2, 2], half]) is True  # some GT box suffices
    other = box_mask(10, 12, 6, 10, 6, 12)
    # only the top-scoring mask counts
    assert corloc_hit([(other, 0.95), (top, 0.9)], [half]) is False
    assert corloc_hit([(other, 0.5), (top, 0.9)], [half]) is True
    # ties: the earliest
    assert corloc_hit([(top, 0.7), (other, 0.7)], [half]) is True
    assert corloc_hit([(other, 0.7), (top, 0.7)], [half]) is False
    assert corloc_hit([], [half]) is False  # no prediction = miss
    assert corloc_hit([(np.zeros((10, 12), bool), 1.0)], [half]) is False
    assert corloc_hit([(top, 0.9)], []) is None  # no non-crowd GT: left out


def test_corloc_hits_over_a_data_set():
    h, w = 20, 30
    gt = small_ground_truth()
    crowd_only = make_coco(
        [(1, h, w), (2, h, w), (3, h, w)],
        [
            {"id": 1, "image_id": 1, "mask": box_mask(h, w, 2, 10, 3, 12)},
            {"id": 2, "image_id": 2, "mask": box_mask(h, w, 0, 20, 0, 30), "iscrowd": 1},
            {"id": 3, "image_id": 3, "mask": box_mask(h, w, 5, 9, 5, 9)},
        ],
    )
    results = [
        {"image_id": 1, "score": 0.9, "segmentation": rle(box_mask(h, w, 2, 10, 3, 11))},  # IoU 64/72 -> hit
        {"image_id": 1, "score": 0.2, "segmentation": rle(box_mask(h, w, 15, 20, 0, 5))},
        {"image_id": 2, "score": 0.9, "segmentation": rle(box_mask(h, w, 0, 20, 0, 30))},  # crowd only: left out
    ]  # image 3: no prediction -> miss
    per = corloc_hits(CocoTruth(crowd_only), results)
    assert per.image_ids == [1, 3] and per.values.tolist() == [1.0, 0.0] and per.left_out == [2]
    assert corloc_hits(CocoTruth(gt), []).values.tolist() == [0.0, 0.0]
