"""Linear probe (docs/design.md §6): label maps, patch labels, training, mIoU and patch accuracy."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

from evaluate.experiment import config_defaults
from evaluate.probe import ProbeError
from evaluate.probe.labels import (
    IGNORE,
    class_index,
    label_map,
    label_map224,
    patch_labels,
    probe_classes,
    unmatched_categories,
)
from evaluate.probe.linear import LinearProbe, fit_probe, training_tokens
from evaluate.probe.scores import confusion, predict_map224, probe_measures, score_image, sparse_confusion
from evaluate.scores.bootstrap import bootstrap_ci
from evaluate.scores.measures import stats_array


PROBE = config_defaults("probe")  # the run's defaults: weight_decay, max_iter, tol, max_tokens


def fit(features, labels, n_classes, **settings):
    """`fit_probe` with the schema's defaults for every setting not given."""
    chosen = {k: PROBE[k] for k in ("weight_decay", "max_iter", "tol")}
    return fit_probe(features, labels, n_classes, **{**chosen, **settings})


def rle(mask):
    out = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    out["counts"] = out["counts"].decode("ascii")
    return out


def box(h, w, r0, r1, c0, c1):
    m = np.zeros((h, w), bool)
    m[r0:r1, c0:c1] = True
    return m


def make_coco(h, w, anns):
    dataset = {
        "images": [{"id": 1, "height": h, "width": w, "file_name": "1.jpg"}],
        "categories": [{"id": c, "name": str(c)} for c in (3, 7, 44)],
        "annotations": [
            {"id": a["id"], "image_id": 1, "category_id": a["cat"], "iscrowd": a.get("iscrowd", 0),
             "segmentation": rle(a["mask"]), "area": float(a["mask"].sum()), "bbox": [0, 0, 1, 1]}
            for a in anns
        ],
    }
    coco = COCO()
    coco.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


# ------------------------------------------------------------------------------------------------------- labels


def test_probe_classes_follow_category_id_order():
    assert probe_classes({44: "kite", 3: "car", 7: "train"}, "train.json") == ["car", "train", "kite"]
    with pytest.raises(ProbeError, match="empty"):
        probe_classes({}, "train.json")
    with pytest.raises(ProbeError, match="more than once"):
        probe_classes({1: "car", 2: "car"}, "train.json")


def test_class_index_matches_categories_by_name_not_by_id():
    classes = probe_classes({3: "car", 7: "train", 44: "kite"}, "train.json")
    assert class_index(classes, {3: "car", 7: "train", 44: "kite"}, "train.json") == {3: 1, 7: 2, 44: 3}
    # the same classes numbered differently by another data set land on the same probe classes
    assert class_index(classes, {1: "kite", 2: "car"}, "val.json") == {1: 3, 2: 1}
    # a category id the probe-train set uses for another class is not trusted: its name decides
    with pytest.raises(ProbeError, match=r"val\.json: category name\(s\) \['foreground'\].*probe: false"):
        class_index(classes, {3: "foreground"}, "val.json")
    assert unmatched_categories(classes, {1: "kite", 2: "zebra", 3: "ant"}) == ["ant", "zebra"]


def _classes_of(ids):
    """Category ids -> {id: class} by the probe's rule, for tests whose categories are named after their ids."""
    categories = {int(c): f"cat{c}" for c in ids}
    return class_index(probe_classes(categories, "test"), categories, "test")


def test_label_map_overlaps_crowd_and_background():
    h, w = 6, 10
    classes = _classes_of([3, 7, 44])  # 3 -> 1, 7 -> 2, 44 -> 3
    coco = make_coco(
        h,
        w,
        [
            {"id": 5, "cat": 3, "mask": box(h, w, 0, 4, 0, 4)},  # 16 px
            {"id": 6, "cat": 7, "mask": box(h, w, 2, 4, 2, 5)},  # 6 px: smaller, wins over id 5 at rows 2-3 cols 2-3
            {"id": 9, "cat": 44, "mask": box(h, w, 0, 2, 6, 8)},  # 4 px
            {"id": 8, "cat": 3, "mask": box(h, w, 1, 3, 7, 9)},  # 4 px, equal area: id 9 wins at (1, 7)
            {"id": 10, "cat": 7, "mask": box(h, w, 4, 6, 5, 10), "iscrowd": 1},  # crowd
            {"id": 11, "cat": 44, "mask": box(h, w, 5, 6, 8, 10)},  # instance over crowd
        ],
    )
    expected = np.array(
        [
            # cols 0 1 2 3 4 5 6 7 8 9
            [1, 1, 1, 1, 0, 0, 3, 3, 0, 0],
            [1, 1, 1, 1, 0, 0, 3, 3, 1, 0],
            [1, 1, 2, 2, 2, 0, 0, 1, 1, 0],
            [1, 1, 2, 2, 2, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 255, 255, 255, 255, 255],
            [0, 0, 0, 0, 0, 255, 255, 255, 3, 3],
        ],
        dtype=np.uint8,
    )
    out = label_map(coco, 1, classes)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, expected)

    class Holder:  # anything with .coco works (evaluate.datasets.coco.CocoDataset)
        pass

    holder = Holder()
    holder.coco = coco
    np.testing.assert_array_equal(label_map(holder, 1, classes), expected)
    with pytest.raises(ProbeError, match="category 44"):
        label_map(coco, 1, {3: 1, 7: 2})
    with pytest.raises(ProbeError, match="image 2"):
        label_map(coco, 2, classes)


def test_label_map224_uses_the_tokens224_geometry():
    h, w = 480, 640  # 640 x 480 -> 298 x 224, crop from x = 37 (docs/design.md §3)
    cols = (np.arange(w) // 3 % 250).astype(np.uint8)
    rows = (np.arange(h) // 5 % 250).astype(np.uint8)
    for lm, axis in ((np.repeat(cols[None, :], h, 0), 1), (np.repeat(rows[:, None], w, 1), 0)):
        out = label_map224(lm)
        assert out.shape == (224, 224) and out.dtype == np.uint8
        if axis == 1:
            centre = (np.arange(37, 37 + 224) + 0.5) * w / 298  # nearest: source pixel holding the centre
            got, src = out[0], np.floor(centre).astype(int)
            expect = cols[src]
        else:
            centre = (np.arange(224) + 0.5) * h / 224
            got, src = out[:, 0], np.floor(centre).astype(int)
            expect = rows[src]
        clear = np.abs(centre - np.round(centre)) > 1e-6  # PIL's rounding on exact pixel borders is its own
        assert clear.sum() > 150
        np.testing.assert_array_equal(got[clear], expect[clear])
    portrait = label_map224(np.zeros((500, 300), np.uint8))
    assert portrait.shape == (224, 224)


def paint_patch(m, index, values, patch=16):
    """Write `values` (patch^2 labels) into patch `index` (row by row over the 224 / patch grid) of label map m."""
    r, c = divmod(index, 224 // patch)
    m[r * patch : (r + 1) * patch, c * patch : (c + 1) * patch] = np.asarray(values, np.uint8).reshape(patch, patch)


def test_patch_labels_majority_tie_and_ignore():
    m = np.zeros((224, 224), np.uint8)

    def put(index, values):
        paint_patch(m, index, values)

    put(0, [3] * 130 + [1] * 126)  # majority 3
    put(1, [5] * 128 + [2] * 128)  # tie -> lowest label 2
    put(2, [255] * 129 + [4] * 127)  # more than 128 ignore -> ignored
    put(3, [255] * 128 + [4] * 100 + [0] * 28)  # exactly 128 ignore: still labelled, 4 wins
    put(14, [7] * 90 + [0] * 80 + [255] * 86)  # row 1, col 0: 7 wins over background, ignore not counted
    put(15, [255] * 256)
    put(195, [9] * 256)
    labels = patch_labels(m)
    assert labels.dtype == np.uint8 and labels.shape == (196,)
    assert labels[[0, 1, 2, 3, 14, 15, 195]].tolist() == [3, 2, 255, 4, 7, 255, 9]
    others = np.setdiff1d(np.arange(196), [0, 1, 2, 3, 14, 15, 195])
    assert (labels[others] == 0).all()
    with pytest.raises(ProbeError, match="224"):
        patch_labels(np.zeros((16, 16), np.uint8))


# --------------------------------------------------------------------------------------------- mIoU / accuracy


def test_confusion_miou_and_accuracy_by_hand():
    true = np.array([0, 0, 1, 1, 2, 255])
    pred = np.array([0, 1, 1, 1, 0, 2])
    conf = confusion(true, pred, 3)
    # rows true, columns predicted; the 255 pixel is left out
    np.testing.assert_array_equal(conf, [[1, 1, 0], [0, 2, 0], [1, 0, 0]])
    # IoU0 = 1 / (2 + 2 - 1) = 1/3; IoU1 = 2 / (2 + 3 - 2) = 2/3; IoU2 = 0 / (1 + 0 - 0) = 0 -> mean 1/3
    def miou(conf):  # the product's pooled mIoU in percent: per-image sparse confusion -> counts -> reducer
        counts, reducer = stats_array([sparse_confusion(conf)], "miou", len(conf))
        return 100 * bootstrap_ci(counts, reducer, resamples=10, seed=0)[0]

    assert miou(conf) == pytest.approx(100 / 3)
    # a class absent from truth and prediction is not averaged
    assert miou(confusion(true, pred, 5)) == pytest.approx(100 / 3)
    triples = sparse_confusion(conf)
    assert triples == [[0, 0, 1], [0, 1, 1], [1, 1, 2], [2, 0, 1]]
    rebuilt = np.zeros((3, 3), np.int64)
    for t, p, k in triples:
        rebuilt[t, p] += k
    np.testing.assert_array_equal(rebuilt, conf)
    counts, reducer = stats_array([triples, [[1, 1, 5]]], "miou", 3)
    np.testing.assert_array_equal(counts[0], [[1, 2, 0], [2, 2, 1], [2, 3, 0]])
    # pooled: IoU0 1/3, IoU1 7 / (7 + 8 - 7) = 7/8, IoU2 0 -> (1/3 + 7/8) / 3
    value = bootstrap_ci(counts, reducer, resamples=10, seed=0)[0]
    assert value == pytest.approx((1 / 3 + 7 / 8) / 3)
    assert 100 * bootstrap_ci(np.array([[3, 4], [1, 4]]), "ratio", resamples=10, seed=0)[0] == 50.0
    assert math.isnan(bootstrap_ci(np.array([[0, 0]]), "ratio", resamples=10, seed=0)[0])


def bilinear_reference(logits):
    """Independent align_corners=False bilinear upsampling of a (14, 14, C) grid by 16, with edge clamping."""
    pos = (np.arange(224) + 0.5) / 16 - 0.5
    pos = np.clip(pos, 0, 13)
    i0 = np.floor(pos).astype(int)
    i1 = np.minimum(i0 + 1, 13)
    f = pos - i0
    g = logits.reshape(14, 14, -1).astype(np.float64)
    rows = g[i0] * (1 - f)[:, None, None] + g[i1] * f[:, None, None]
    return rows[:, i0] * (1 - f)[None, :, None] + rows[:, i1] * f[None, :, None]


def test_predict_map224_is_bilinear_upsampling_then_argmax():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(196, 5)).astype(np.float32)
    ours = predict_map224(logits)
    ref = bilinear_reference(logits)
    top2 = np.sort(ref, axis=2)[..., -2:]
    clear = (top2[..., 1] - top2[..., 0]) > 1e-4  # skip pixels where float32 vs float64 could flip the argmax
    assert clear.mean() > 0.99
    np.testing.assert_array_equal(ours[clear], ref.argmax(axis=2)[clear])


def test_score_image_and_probe_measures_by_hand():
    probe = LinearProbe(np.zeros((3, 384), np.float32), np.array([0.0, 1.0, 0.0], np.float32))  # always class 1
    map224 = np.zeros((224, 224), np.uint8)
    map224[:32, :] = 1  # first two patch rows: class 1 (28 patches, 7168 px)
    map224[32:48, :16] = 255  # one ignored patch (256 px)
    stats = score_image(probe, np.ones((196, 384), np.float32), map224)
    n_bg = 224 * 224 - 7168 - 256
    assert stats.confusion == [[0, 1, n_bg], [1, 1, 7168]]
    assert (stats.correct, stats.valid) == (28, 195)
    res = probe_measures(probe, [(7, np.ones((196, 384)), map224), (8, np.ones((196, 384)), map224)], resamples=50, seed=0)
    miou_m, accuracy = res
    # IoU0 = 0; IoU1 = 7168 / (7168 + n_bg) -> mIoU = IoU1 / 2
    assert miou_m["value"] == pytest.approx(100 * 7168 / (7168 + n_bg) / 2)
    assert accuracy["value"] == pytest.approx(100 * 28 / 195)
    assert accuracy["ci_low"] == pytest.approx(accuracy["value"])  # identical images: no spread
    assert miou_m["image_ids"] == [7, 8]
    assert miou_m["per_image"][0] == stats.confusion and accuracy["per_image"][0] == [28, 195]


# ------------------------------------------------------------------------------------------------------ training


def toy_tokens(seed=0, n=3000, k=4, scale=None):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, 384)) * 0.4
    y = rng.integers(0, k, size=n)
    x = centres[y] + rng.normal(size=(n, 384))
    x = x * (np.exp(rng.normal(size=384)) if scale is None else scale) + rng.normal(size=384) * 5
    return x.astype(np.float32), y


def test_two_training_runs_are_identical():
    x, y = toy_tokens()
    a = fit(x, y, 5, max_iter=60)
    b = fit(x.copy(), y.copy(), 5, max_iter=60)
    assert np.array_equal(a.weight, b.weight) and np.array_equal(a.bias, b.bias)
    assert a.meta == b.meta


def test_fit_learns_and_ignores_255_and_absent_classes():
    x_all, y_all = toy_tokens(n=6000)
    x, y, x_test, y_test = x_all[:4000], y_all[:4000], x_all[4000:], y_all[4000:]
    labels = y.copy()
    labels[::10] = IGNORE
    probe = fit(x, labels, 6, max_iter=100)  # classes 4 and 5 never occur
    assert probe.meta["n_train_tokens"] == 3600 and probe.meta["n_ignored_tokens"] == 400
    assert probe.weight.shape == (6, 384) and probe.bias.shape == (6,)
    pred = probe.logits(x_test).argmax(axis=1)  # held-out tokens
    assert (pred == y_test).mean() > 0.9
    assert not np.isin(pred, [4, 5]).any()
    with pytest.raises(ProbeError, match="0..5"):
        fit(x, np.full(len(y), 6), 6)
    with pytest.raises(ProbeError, match=r"\(N, D\) with labels \(N,\)"):
        fit(x, y[:10], 6)
    with pytest.raises(ProbeError, match="tokens 384 wide"):  # a probe reads its own network's width only
        probe.logits(x_test[:, :10])


def test_objective_matches_scikit_learn_mapping():
    """C = 1 / (weight_decay * N) makes scikit-learn minimise the same objective: both reach the same minimum."""
    from sklearn.linear_model import LogisticRegression

    x, y = toy_tokens(n=1500, k=3)
    lam = 1e-2
    probe = fit(x, y, 3, weight_decay=lam, max_iter=500, tol=1e-8)
    mean, std = x.astype(np.float64).mean(0), x.astype(np.float64).std(0)
    xs = (x - mean) / std
    sk = LogisticRegression(C=1 / (lam * len(y)), max_iter=2000, tol=1e-10).fit(xs, y)

    def objective(w, b):
        z = xs @ w.T + b
        z = z - z.max(1, keepdims=True)
        ce = -(z[np.arange(len(y)), y] - np.log(np.exp(z).sum(1)))
        return ce.mean() + lam / 2 * (w**2).sum()

    ours_w = probe.weight.astype(np.float64) * std  # unfold the standardisation
    ours_b = probe.bias.astype(np.float64) + ours_w / std @ mean
    assert objective(ours_w, ours_b) == pytest.approx(objective(sk.coef_, sk.intercept_), rel=1e-4)
    assert probe.meta["final_objective"] == pytest.approx(objective(ours_w, ours_b), rel=1e-4)
    np.testing.assert_allclose(ours_w, sk.coef_, atol=2e-3)


def test_probe_save_load_roundtrip(tmp_path):
    x, y = toy_tokens(n=500)
    probe = fit(x, y, 4, max_iter=20)
    probe.save(tmp_path / "probe.safetensors")
    back = LinearProbe.load(tmp_path / "probe.safetensors")
    assert np.array_equal(back.weight, probe.weight) and np.array_equal(back.bias, probe.bias)
    assert back.meta == probe.meta
    np.testing.assert_array_equal(back.logits(x[:5]), probe.logits(x[:5]))
    (tmp_path / "bad.safetensors").write_bytes(b"not a probe")
    with pytest.raises(ProbeError, match="bad.safetensors"):
        LinearProbe.load(tmp_path / "bad.safetensors")


class FakeReader:
    """FeatureReader protocol: image_ids and iter_shards("tokens224") over in-memory shards."""

    def __init__(self, tokens, shard):
        self.tokens = tokens
        self.image_ids = list(range(100, 100 + len(tokens)))
        self.shard = shard

    def iter_shards(self, kind):
        assert kind == "tokens224"
        for s in range(0, len(self.tokens), self.shard):
            yield self.image_ids[s : s + self.shard], self.tokens[s : s + self.shard].astype(np.float16)


def test_training_tokens_subsample_is_seeded_and_streamed():
    rng = np.random.default_rng(0)
    tokens = rng.normal(size=(7, 196, 384)).astype(np.float16).astype(np.float32)
    labels = rng.integers(0, 4, size=(7, 196)).astype(np.uint8)
    labels[2, :150] = IGNORE
    feats, y = training_tokens(FakeReader(tokens, 3), labels, max_tokens=10**6, seed=0)
    valid = labels.ravel() != IGNORE
    np.testing.assert_array_equal(feats, tokens.reshape(-1, 384)[valid])
    np.testing.assert_array_equal(y, labels.ravel()[valid])
    sub_x, sub_y = training_tokens(FakeReader(tokens, 2), labels, max_tokens=300, seed=4)
    pick = np.sort(np.random.default_rng(4).choice(valid.sum(), 300, replace=False))
    np.testing.assert_array_equal(sub_x, tokens.reshape(-1, 384)[valid][pick])
    np.testing.assert_array_equal(sub_y, labels.ravel()[valid][pick])


# ---------------------------------------------------------------------------------------------- real-data checks


def _read_coco(path):
    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(str(path))


@pytest.mark.coco
def test_label_maps_on_coco_mini(coco_mini):
    val = _read_coco(coco_mini / "annotations.json")
    train = _read_coco(coco_mini / "annotations_train.json")
    classes = class_index(probe_classes({c: train.cats[c]["name"] for c in train.getCatIds()}, "train"),
                            {c: val.cats[c]["name"] for c in val.getCatIds()}, "val")
    assert len(classes) == 80
    for image_id in sorted(val.getImgIds())[:25]:
        lm = label_map(val, image_id, classes)
        info = val.imgs[image_id]
        assert lm.shape == (info["height"], info["width"])
        anns = val.imgToAnns[image_id]
        crowd = np.zeros(lm.shape, bool)
        inst = np.zeros(lm.shape, bool)
        for a in anns:
            (crowd if a["iscrowd"] else inst)[val.annToMask(a).astype(bool)] = True
        np.testing.assert_array_equal(lm == 255, crowd & ~inst)
        np.testing.assert_array_equal(lm == 0, ~crowd & ~inst)
        labels = patch_labels(label_map224(lm))
        assert set(np.unique(labels)) <= set(range(81)) | {255}


@pytest.mark.coco
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:lbfgs failed to converge")
def test_probe_parity_with_scikit_learn_on_coco_mini(coco_mini_features):
    """Seeded random vit_small tokens224 of the 79 coco2017-mini val images: train on the 40 at even places of the
    sorted ids, score the 39 at odd places.

    Our probe's patch accuracy is within 1.0 point of scikit-learn's LogisticRegression with the matched penalty
    C = 1 / (weight_decay * N) on the same standardised tokens.
    """
    from sklearn.linear_model import LogisticRegression

    from evaluate.readings.features import FeatureReader

    dataset, _, dirs = coco_mini_features["val"]
    names = probe_classes(dataset.categories, "train")
    classes = class_index(names, dataset.categories, "train")
    reader = FeatureReader(dirs, kinds=("tokens224",))
    tokens = np.stack([reader.tokens224(i) for i in range(len(reader))])
    maps = [label_map224(label_map(dataset.coco, i, classes)) for i in reader.image_ids]
    assert len(reader) == 79
    train_tokens, train_maps = tokens[0::2], maps[0::2]
    val_ids, val_tokens, val_maps = reader.image_ids[1::2], tokens[1::2], maps[1::2]
    train_labels = np.concatenate([patch_labels(m) for m in train_maps])
    x = train_tokens.reshape(-1, 384)
    lam = 1e-4
    probe = fit(x, train_labels, len(classes) + 1, weight_decay=lam, max_iter=150)
    miou_m, accuracy = probe_measures(probe, zip(val_ids, val_tokens, val_maps), resamples=200, seed=0)

    keep = train_labels != IGNORE
    mean, std = x[keep].astype(np.float64).mean(0), x[keep].astype(np.float64).std(0)
    std[std <= 1e-12] = 1.0
    sk = LogisticRegression(C=1 / (lam * keep.sum()), max_iter=150).fit((x[keep] - mean) / std, train_labels[keep])
    val_labels = np.concatenate([patch_labels(m) for m in val_maps])
    vk = val_labels != IGNORE
    sk_pred = sk.predict((val_tokens.reshape(-1, 384)[vk] - mean) / std)
    sk_acc = 100 * float((sk_pred == val_labels[vk]).mean())
    ours_acc = accuracy["value"]
    print(f"parity: ours {ours_acc:.2f}% ({probe.meta['iterations']} it), scikit-learn {sk_acc:.2f}%")
    assert abs(ours_acc - sk_acc) <= 1.0, (ours_acc, sk_acc)
    assert 0 < miou_m["value"] < 100 and miou_m["ci_low"] <= miou_m["value"] <= miou_m["ci_high"]


def test_onednn_and_mkl_products_fit_the_same_probe(monkeypatch):
    """The oneDNN products (two layouts of the tokens) and the plain MKL fallback minimise the same objective."""
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN: only the MKL path exists")
    x, y = toy_tokens(n=3000)
    fast = fit(x, y, 4, weight_decay=1e-2, max_iter=300, tol=1e-7)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    plain = fit(x, y, 4, weight_decay=1e-2, max_iter=300, tol=1e-7)
    assert (fast.meta["products"], plain.meta["products"]) == ("onednn-fp32", "mkl-fp32")
    assert fast.meta["final_objective"] == pytest.approx(plain.meta["final_objective"], rel=1e-4)
    centred = [p.logits(x[:500]) - p.logits(x[:500]).mean(axis=1, keepdims=True) for p in (fast, plain)]
    np.testing.assert_allclose(*centred, atol=1e-3)  # softmax is blind to a shift shared by all classes


# ------------------------------------------------------------------------- other networks' geometry (§6, §11)


def test_patch14_labels_on_a_16_by_16_grid_by_hand():
    """DINOv2 /14: 16 x 16 patches of 14 x 14 = 196 pixels; more than 98 ignore pixels -> ignored."""
    m = np.zeros((224, 224), np.uint8)

    def put(index, values):
        paint_patch(m, index, values, 14)

    put(0, [3] * 100 + [1] * 96)  # majority 3
    put(1, [5] * 98 + [2] * 98)  # tie -> lowest label 2
    put(2, [255] * 99 + [4] * 97)  # 99 > 98 ignore -> ignored
    put(3, [255] * 98 + [4] * 60 + [0] * 38)  # exactly 98 ignore: still labelled, 4 wins
    put(16, [7] * 70 + [0] * 60 + [255] * 66)  # row 1, col 0: 7 wins over background, ignore not counted
    put(255, [9] * 196)  # the last patch, row 15, col 15
    labels = patch_labels(m, 14)
    assert labels.dtype == np.uint8 and labels.shape == (256,)
    assert labels[[0, 1, 2, 3, 16, 255]].tolist() == [3, 2, 255, 4, 7, 9]
    assert (labels[np.setdiff1d(np.arange(256), [0, 1, 2, 3, 16, 255])] == 0).all()
    assert patch_labels(m).shape == (196,)  # the seed's 16-px patches unless the features' patch is given
    with pytest.raises(ProbeError, match="patch 12 does not divide"):
        patch_labels(m, 12)


def test_patch8_labels_on_a_28_by_28_grid_by_hand():
    """ViT-S/8: 28 x 28 patches of 64 pixels; more than 32 ignore pixels -> ignored."""
    m = np.zeros((224, 224), np.uint8)
    m[:8, 8:16] = np.asarray([255] * 33 + [6] * 31, np.uint8).reshape(8, 8)  # patch 1: ignored
    m[:8, 16:24] = np.asarray([255] * 32 + [6] * 32, np.uint8).reshape(8, 8)  # patch 2: 6
    m[8:16, :8] = 4  # patch 28 (row 1, col 0)
    labels = patch_labels(m, 8)
    assert labels.shape == (784,)
    assert labels[[0, 1, 2, 28, 783]].tolist() == [0, 255, 6, 4, 0]


def test_probe_trains_and_scores_on_width_768_tokens_of_a_16_by_16_grid():
    """ViT-B (D 768) with patch 14: the probe's width comes from the tokens, logits (256, C) go through the 16 x 16
    grid to 224 x 224, and the patch accuracy uses 14-px patch labels."""
    rng = np.random.default_rng(5)
    n_images, d = 4, 768
    centres = rng.normal(size=(3, d)).astype(np.float32)
    maps = np.zeros((n_images, 224, 224), np.uint8)
    for i in range(n_images):
        maps[i, 14 * (2 + i) : 14 * (9 + i), 28:140] = 1 + i % 2  # whole 14-px patches of class 1 or 2
    labels = np.stack([patch_labels(m, 14) for m in maps])
    tokens = (centres[labels.astype(np.int64)] + 0.3 * rng.normal(size=(n_images, 256, d))).astype(np.float32)

    x, y = training_tokens(FakeReader(tokens, 3), labels, max_tokens=10**6, seed=0)
    assert x.shape == (n_images * 256, d)
    probe = fit(x, y, 3, max_iter=50)
    assert probe.weight.shape == (3, d) and probe.width == d
    stats = score_image(probe, tokens[0], maps[0])
    assert (stats.correct, stats.valid) == (256, 256)  # every patch right: the labels are on the tokens' grid
    assert sum(count for _, _, count in stats.confusion) == 224 * 224
    predicted = predict_map224(probe.logits(tokens[1]))
    assert predicted.shape == (224, 224)
    assert predicted[7::14, 7::14].tolist() == labels[1].reshape(16, 16).tolist()  # each 14-px patch's centre
    with pytest.raises(ProbeError, match="not \\(m, 196, D\\)"):  # the seed's 196 labels for 256 tokens: refused
        training_tokens(FakeReader(tokens, 3), np.stack([patch_labels(m) for m in maps]), max_tokens=10, seed=0)
