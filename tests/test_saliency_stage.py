"""The saliency stage (docs/design.md §16): a set's manifest (listings only), a checkpoint's reading of a shard, the
record with TokenCut's and PySODMetrics' measures before and after the solver, its figure; the `max-mean` measure
of the ledger; the config's `saliency:` entries; the demo's saliency set."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image
from test_saliency_reading import FRAMES, davis_saliency_set  # noqa: F401 (a fixture)

from evaluate.demo.saliency import make_demo_saliency
from evaluate.demo.scenes import make_scene
from evaluate.experiment import ConfigError, Experiment, load_config
from evaluate.datasets import DataSetError
from evaluate.datasets.kinds import spec_of
from evaluate.datasets.saliency import open_saliency_set
from evaluate.saliency.measures import SaliencyTally, image_scores, sod_measures, tokencut_measures
from evaluate.scores.measures import make_measure, stats_array

SALIENCY_NAMES = ["saliency_iou", "saliency_accuracy", "saliency_maxf", "sod_maxf", "sod_mae", "sod_smeasure",
                  "sod_emeasure"]


# ------------------------------------------------------------------------------------------- the ledger's measure


def test_a_max_mean_measure_is_the_largest_column_mean_in_percent():
    curves = [[0.2, 0.6, 0.1], [0.4, 0.2, 0.1]]  # column means 0.3, 0.4, 0.1
    entry = make_measure("saliency_maxf", image_ids=[7, 9], per_image=curves, reducer="max-mean", resamples=200, seed=0)
    assert entry["value"] == pytest.approx(40.0)
    assert entry["reducer"] == "max-mean" and entry["per_image"] == curves
    # every resample is a pair of the two curves: its max-mean lies between the smaller and the larger best
    assert 20.0 <= entry["ci_low"] <= entry["value"] <= entry["ci_high"] <= 60.0
    array, reducer = stats_array(curves, "max-mean")
    assert reducer == "max-mean" and array.shape == (2, 3)


def test_the_tally_gives_the_whole_set_measures_one_image_at_a_time():
    rng = np.random.default_rng(3)
    levels = [np.where(rng.random((9, 11)) > 0.6, 255, 0).astype(np.uint8) for _ in range(3)]
    preds = [np.clip(0.6 * (lv > 0) + 0.5 * rng.random(lv.shape) - 0.1, 0, 1) for lv in levels]
    tally = SaliencyTally()
    for pred, lv in zip(preds, levels):
        tally.add(pred, lv)
    entries = {e["measure"]: e for e in tally.measure_entries([1, 2, 3], suffix="_bs", resamples=100, seed=0)}
    assert list(entries) == [name + "_bs" for name in SALIENCY_NAMES]
    whole = tokencut_measures(image_scores(preds, [lv > 0 for lv in levels]), resamples=100, seed=0)
    sod = sod_measures(preds, levels, resamples=100, seed=0)
    for name in ("saliency_iou", "saliency_accuracy"):
        assert entries[name + "_bs"]["value"] == pytest.approx(whole[name].value, abs=1e-9)
    # the record keeps the F curves to 6 decimals: its maxF moves by at most half a millionth of a unit
    assert entries["saliency_maxf_bs"]["value"] == pytest.approx(whole["saliency_maxf"].value, abs=1e-4)
    for name in ("sod_maxf", "sod_mae", "sod_smeasure", "sod_emeasure"):  # the library's fractions, in percent
        assert entries[name + "_bs"]["value"] == pytest.approx(100.0 * sod[name].value, abs=1e-4)
    assert all(len(e["per_image"]) == 3 for e in entries.values())


# ------------------------------------------------------------------------------------------------- the manifest


def _tiny_set(root, names=("b", "a")):
    for sub in ("images", "ground_truth_mask"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for name in names:
        Image.new("RGB", (20, 12), (10, 20, 30)).save(root / "images" / f"{name}.jpg")
        (root / "ground_truth_mask" / f"{name}.png").write_bytes(b"not a png: listing never decodes a mask")
    return root


def test_the_manifest_lists_pairs_and_shards_without_decoding_a_mask(tmp_path):
    from evaluate.datasets.manifest import write_manifest
    from evaluate.plumbing.atomic import read_json

    root = _tiny_set(tmp_path / "set", names=("c", "b", "a"))
    spec = spec_of("saliency", "s", root=str(root), bilateral=True)
    manifest = write_manifest(spec=spec, roles=("eval",), shard_size=2, out=tmp_path / "saliency.json")
    assert manifest["names"] == ["a", "b", "c"] and manifest["image_ids"] == [0, 1, 2]
    assert (manifest["dataset"], manifest["kind"]) == ("s", "saliency")
    assert manifest["masks"] == str(root / "ground_truth_mask")
    assert manifest["shards"] == [[0, 1], [2]]
    assert manifest["annotations_sha256"] == open_saliency_set(root).annotations_sha256
    assert read_json(tmp_path / "saliency.json") == manifest


# -------------------------------------------------------------------------------------- reading and scoring


@pytest.fixture(scope="module")
def demo_vit(tmp_path_factory):
    from evaluate.demo.checkpoints import make_demo_checkpoint

    return make_demo_checkpoint(tmp_path_factory.mktemp("ckpt") / "dino.pth", fmt="dino-backbone", seed=0,
                                architecture="vit-s16")


def _reference_measures(preds, truths):
    """TokenCut's metric.py written out here: IoU and accuracy at 0.5, maxF over numpy.arange(0, 1, 1/255)."""
    iou = [np.count_nonzero((p > 0.5) & g) / np.count_nonzero((p > 0.5) | g) for p, g in zip(preds, truths)]
    acc = [np.mean((p > 0.5) == g) for p, g in zip(preds, truths)]
    curves = []
    for p, g in zip(preds, truths):
        row = []
        for t in np.arange(0, 1, 1 / 255):
            tp = np.count_nonzero((p > t) & g)
            prec = tp / np.count_nonzero(p > t) if np.count_nonzero(p > t) else 1.0
            rec = tp / np.count_nonzero(g)
            row.append(1.3 * prec * rec / (0.3 * prec + rec) if 0.3 * prec + rec > 0 else 0.0)
        curves.append(row)
    return 100 * np.mean(iou), 100 * np.mean(acc), 100 * np.max(np.mean(curves, axis=0))


@pytest.mark.slow
def test_a_read_shard_scored_on_the_record_gives_tokencuts_measures(davis_saliency_set, demo_vit,  # noqa: F811
                                                                     tmp_path, monkeypatch):
    from evaluate.ledger.scoring import Scoring
    from evaluate.networks.checkpoints import load_backbone
    from evaluate.outputs.saliency_figures import saliency_figures
    from decoders.bilateral import TOKENCUT_SOLVER, refined_from_vertices
    from evaluate.datasets.saliency import read_image, read_truth
    from evaluate.datasets.manifest import write_manifest
    from evaluate.readings.saliency import ShardReadings, read_saliency
    from evaluate.saliency.protocol import read_shard, score_saliency

    monkeypatch.chdir(tmp_path)
    spec = spec_of("saliency", "davis-sal", images=str(davis_saliency_set.images),
                   masks=str(davis_saliency_set.masks), benchmark="ecssd", bilateral=True)
    checkpoint = {"name": "dino", "which": "teacher", "position_rule": None}
    write_manifest(spec=spec, roles=("eval",), shard_size=8, out=tmp_path / "saliency.json")
    meta = read_shard(checkpoint=checkpoint, checkpoint_file=demo_vit, spec=spec,
                      manifest_file=tmp_path / "saliency.json", shard="000", out_reading=tmp_path / "000.npz",
                      out_meta=tmp_path / "000.json", features={})
    assert (meta["reading"], meta["form"], meta["precision"], meta["device"]) == ("saliency", "released", "float32",
                                                                                 "cpu")
    shard = ShardReadings(tmp_path / "000.npz")
    model = load_backbone(demo_vit, which="teacher", form="released").model.eval()
    preds, refined, truths = [], [], []
    for k, pair in enumerate(davis_saliency_set.pairs):
        img = read_image(pair)
        expected = read_saliency(model, img, bilateral=TOKENCUT_SOLVER)
        np.testing.assert_array_equal(shard.grid_mask(k), expected.grid_mask)
        rebuilt = refined_from_vertices(np.asarray(img), shard.vertex_values(k))
        assert rebuilt.tobytes() == expected.refined.tobytes()
        preds.append(expected.mask)
        refined.append(expected.refined)
        truths.append(read_truth(pair))

    scoring = Scoring(checkpoint="dino", run="dino", epoch=1, features_meta=tmp_path / "000.json",
                      dataset="davis-sal", sealed=False, budget=None, config_hash="test")
    kwargs = dict(spec=spec, manifest_file=tmp_path / "saliency.json", reading_files=[tmp_path / "000.npz"],
                  meta_files=[tmp_path / "000.json"], resamples=100, seed=0, code="test")
    record = score_saliency(scoring, out_record=tmp_path / "record.json", **kwargs)
    values = {m["measure"]: m["value"] for m in record["measures"]}
    assert list(values) == SALIENCY_NAMES + [n + "_bs" for n in SALIENCY_NAMES]
    for suffix, maps in (("", preds), ("_bs", refined)):
        iou, acc, maxf = _reference_measures(maps, truths)
        assert values["saliency_iou" + suffix] == pytest.approx(iou, abs=1e-9)
        assert values["saliency_accuracy" + suffix] == pytest.approx(acc, abs=1e-9)
        assert values["saliency_maxf" + suffix] == pytest.approx(maxf, abs=1e-4)
    assert record["benchmark"] == "ecssd" and record["setting"] == "tokencut+bs"
    assert record["bilateral"]["cg_maxiter"] == 25

    again = score_saliency(scoring, out_record=tmp_path / "again.json", **kwargs)  # the same inputs: reused
    assert again["measures"] == record["measures"]
    with open(tmp_path / "results/ledger/openings.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["dataset"], r["setting"]) for r in rows] == [("davis-sal", "tokencut+bs")]

    files = saliency_figures([record], tmp_path / "figures", overlay_images=2)
    assert [f.name for f in files] == ["saliency_dino_davis-sal.png"] and files[0].stat().st_size > 1000

    (davis_saliency_set.images / f"{FRAMES[0][0]}.jpg").rename(tmp_path / "moved.jpg")  # the set changed on disk
    (davis_saliency_set.masks / f"{FRAMES[0][0]}.png").rename(tmp_path / "moved.png")
    try:
        with pytest.raises(DataSetError, match=r"saliency\.json: the data set's files no longer hold the images"):
            read_shard(checkpoint=checkpoint, checkpoint_file=demo_vit, spec=spec,
                       manifest_file=tmp_path / "saliency.json", shard="000", out_reading=tmp_path / "001.npz",
                       out_meta=tmp_path / "001.json", features={})
        assert not (tmp_path / "001.npz").exists()
    finally:
        (tmp_path / "moved.jpg").rename(davis_saliency_set.images / f"{FRAMES[0][0]}.jpg")
        (tmp_path / "moved.png").rename(davis_saliency_set.masks / f"{FRAMES[0][0]}.png")


# ------------------------------------------------------------------------------------------------- the config


def saliency_only(**entry) -> dict:
    return {"checkpoints": {"a": {"path": "a.pth"}}, "saliency": {"ecssd": entry}}


def test_a_saliency_set_is_an_eval_set_with_the_solver_on_by_default(tmp_path):
    exp = Experiment(load_config(saliency_only(root=str(tmp_path), benchmark="ecssd")))
    entry = exp.datasets["ecssd"]
    assert entry.roles == ("eval",) and entry.fields["bilateral"] is True and entry.fields["benchmark"] == "ecssd"
    assert entry.spec == spec_of("saliency", "ecssd", root=str(tmp_path), benchmark="ecssd", bilateral=True)
    assert entry.spec["opener"] == "evaluate.datasets.saliency:SaliencySet.from_spec"
    assert exp.run_time("ecssd").sealed is False


@pytest.mark.parametrize("entry, message", [
    ({"root": "r", "images": "i", "masks": "m"}, r"saliency\.ecssd: give its root or its images and masks"),
    ({"images": "i"}, r"saliency\.ecssd: give its root"),
    ({"root": "r", "sealed": True}, r"saliency\.ecssd is sealed but has no 'budget'"),
    ({"root": "elsewhere", "demo": {"n_images": 2, "seed": 0}},
     r"saliency\.ecssd\.root: a demo saliency set is drawn at results/demo/saliency/ecssd, so its root must lie"),
    ({"root": "no-such-folder"}, r"saliency\.ecssd\.root: no-such-folder is not a folder"),
])
def test_a_bad_saliency_entry_is_one_line_naming_it(entry, message):
    with pytest.raises(ConfigError, match=message):
        Experiment(load_config(saliency_only(**entry)))


def test_a_saliency_set_named_like_another_data_set_is_refused():
    config = saliency_only(root="r")
    config["discovery"] = {"ecssd": {"kind": "voc", "root": "v"}}
    with pytest.raises(ConfigError, match=r"saliency\.ecssd: the name is also a data set's under 'discovery:'"):
        Experiment(load_config(config))


# ------------------------------------------------------------------------------------------------- the demo set


def test_the_demo_saliency_set_is_the_demo_scenes_in_ecssds_layout(tmp_path):
    make_demo_saliency(tmp_path / "a", n_images=2, seed=6)
    make_demo_saliency(tmp_path / "b", n_images=2, seed=6)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert [str(f) for f in files] == ["ground_truth_mask/demo_0001.png", "ground_truth_mask/demo_0002.png",
                                       "images/demo_0001.jpg", "images/demo_0002.jpg"]
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    pairs = open_saliency_set(tmp_path / "a")
    assert [p.name for p in pairs.pairs] == ["demo_0001", "demo_0002"]
    for k, pair in enumerate(pairs.pairs):
        _, _, painted = make_scene(6, k + 1)
        with Image.open(pair.mask) as mask:
            assert mask.mode == "L"
            np.testing.assert_array_equal(np.asarray(mask), np.where(painted > 0, 255, 0))
