"""Scoring a folder in DAVIS's results layout: the truth scores 100, a bad folder gets one line naming the sequence
and frame, the command line, and parity with the field's own scorer, vos-benchmark (docs/design.md §12)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage
from videos import davis_mini, small_davis

from evaluate.datasets.davis import DavisDataset, read_mask, write_mask
from evaluate.video.__main__ import main
from evaluate.video.score import VideoScoreError, score_results


def _truth_as_results(dataset: DavisDataset, out):
    """Every ground-truth mask written as a result (void read as background), under the sequence's folder."""
    for seq in dataset.sequences:
        for mask in seq.masks:
            write_mask(out / seq.name / mask.name, read_mask(mask))
    return out


def _assert_perfect(scores, n_objects):
    summary = scores.summary()
    assert len(scores.objects) == n_objects
    for measure in ("jf_mean", "j_mean", "f_mean", "j_recall", "f_recall"):
        assert summary[measure] == 100.0, measure
    assert summary["j_decay"] == 0.0 and summary["f_decay"] == 0.0
    for row in scores.per_object():
        assert row["j_mean"] == 100.0 and row["f_mean"] == 100.0


def test_the_ground_truth_scored_as_results_gives_100_on_a_drawn_data_set(tmp_path):
    dataset = DavisDataset(small_davis(tmp_path / "davis"))
    scores = score_results(_truth_as_results(dataset, tmp_path / "results"), dataset)
    _assert_perfect(scores, 3)  # shape1: one object; shapes2: two
    assert [obj.name for obj in scores.objects] == ["shape1_1", "shapes2_1", "shapes2_2"]
    assert scores.objects[1].frames == ("00001", "00002", "00003", "00004")  # not the first, not the last


@pytest.mark.slow  # 124 frames of 854 x 480
def test_the_ground_truth_scored_as_results_gives_100_on_davis2016_mini(tmp_path):
    dataset = DavisDataset(davis_mini())
    scores = score_results(_truth_as_results(dataset, tmp_path / "results"), dataset)
    _assert_perfect(scores, 3)
    assert [len(obj.frames) for obj in scores.objects] == [48, 38, 38]


def test_a_grayscale_result_is_object_1(tmp_path):
    dataset = DavisDataset(small_davis(tmp_path / "davis"))
    out = _truth_as_results(dataset, tmp_path / "results")
    for mask in dataset.sequence("shape1").masks:  # as many DAVIS-2016 methods write: 0 and 255
        Image.fromarray((read_mask(mask) * 255).astype(np.uint8)).save(out / "shape1" / mask.name)
    _assert_perfect(score_results(out, dataset, ["shape1"]), 1)


def test_a_worse_result_scores_lower_by_the_measures(tmp_path):
    dataset = DavisDataset(small_davis(tmp_path / "davis"))
    out = _truth_as_results(dataset, tmp_path / "results")
    seq = dataset.sequence("shapes2")
    write_mask(out / "shapes2" / seq.masks[2].name, np.zeros((96, 200), np.uint8))  # frame 2: nothing found
    scores = score_results(out, dataset, ["shapes2"])
    for obj in scores.objects:
        assert obj.j.tolist() == [1.0, 0.0, 1.0, 1.0] and obj.f.tolist() == [1.0, 0.0, 1.0, 1.0]
    summary = scores.summary()
    assert summary["j_mean"] == pytest.approx(75.0) and summary["j_recall"] == pytest.approx(75.0)
    # 4 scored frames: linspace(1, 4, 5) = 1, 1.75, 2.5, 3.25, 4 -> bins [0, 1] and [2, 3]: 0.5 - 1.0
    assert summary["j_decay"] == pytest.approx(-50.0)


def test_ids_above_m_in_a_later_truth_are_background_and_logged(tmp_path, caplog):
    dataset = DavisDataset(small_davis(tmp_path / "davis"))
    out = _truth_as_results(dataset, tmp_path / "results")
    seq = dataset.sequence("shapes2")
    ids = read_mask(seq.masks[1])
    ids[0, :4] = 7  # an object the first frame lacks; the results keep 0 there
    write_mask(seq.masks[1], ids)
    with caplog.at_level("WARNING"):
        _assert_perfect(score_results(out, DavisDataset(tmp_path / "davis"), ["shapes2"]), 2)
    assert "shapes2: 4 ground-truth pixel(s) hold an id above" in caplog.text


def _error(*args) -> str:
    with pytest.raises(VideoScoreError) as info:
        score_results(*args)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_folder_that_cannot_be_scored_names_the_sequence_and_frame(tmp_path):
    dataset = DavisDataset(small_davis(tmp_path / "davis"))
    out = _truth_as_results(dataset, tmp_path / "results")
    (out / "shapes2" / "00003.png").unlink()
    message = _error(out, dataset)
    assert "sequence shapes2, frame 00003" in message and "missing" in message
    write_mask(out / "shapes2" / "00003.png", np.zeros((96, 201), np.uint8))
    message = _error(out, dataset)
    assert "sequence shapes2, frame 00003" in message and "201 x 96" in message and "200 x 96" in message
    ids = np.zeros((96, 200), np.uint8)
    ids[5, 5] = 3
    write_mask(out / "shapes2" / "00003.png", ids)
    message = _error(out, dataset)
    assert "sequence shapes2, frame 00003" in message and "id 3" in message and "2 object(s)" in message
    shutil.rmtree(out / "shape1")
    assert "sequence shape1: no results folder" in _error(out, dataset)
    assert "not found" in _error(tmp_path / "nowhere", dataset)


def test_a_palette_result_has_no_void(tmp_path):
    dataset = DavisDataset(small_davis(tmp_path / "davis"))
    out = _truth_as_results(dataset, tmp_path / "results")
    ids = read_mask(out / "shapes2" / "00002.png", result=True)
    ids[0, 0] = 255
    write_mask(out / "shapes2" / "00002.png", ids)
    assert "id 255" in _error(out, dataset, ["shapes2"])


def test_the_command_prints_the_measures_and_one_row_per_object(tmp_path, capsys):
    root = small_davis(tmp_path / "davis")
    out = _truth_as_results(DavisDataset(root), tmp_path / "results")
    (root / "val.txt").write_text("shapes2\n")
    assert main(["score", str(out), str(root), "--sequences-file", "val.txt"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["J&F-Mean", "J-Mean", "J-Recall", "J-Decay", "F-Mean", "F-Recall", "F-Decay"]
    assert lines[1].split() == ["100.00", "100.00", "100.00", "0.00", "100.00", "100.00", "0.00"]
    rows = [line.split() for line in lines if line.startswith("shapes2_")]
    assert [row[:2] for row in rows] == [["shapes2_1", "4"], ["shapes2_2", "4"]]
    (out / "shapes2" / "00001.png").unlink()
    assert main(["score", str(out), str(root), "--sequences", "shapes2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: sequence shapes2, frame 00001")


# ------------------------------------------------------------------------------------- the field's own scorer


def _perturbed(dataset: DavisDataset, out, grayscale: bool, seed: int):
    """Shifted, grown and shrunk copies of the truth: results both scorers must score alike, far from 100."""
    rng = np.random.default_rng(seed)
    for seq in dataset.sequences:
        (out / seq.name).mkdir(parents=True)
        for i, mask in enumerate(seq.masks):
            truth = read_mask(mask)
            pred = np.zeros_like(truth)
            for k in range(1, int(truth.max()) + 1):
                m = np.roll(truth == k, (int(rng.integers(-6, 7)), int(rng.integers(-9, 10))), axis=(0, 1))
                m = ndimage.binary_dilation(m, iterations=2) if i % 3 == 0 else ndimage.binary_erosion(m)
                pred[m] = k
            if grayscale:
                Image.fromarray(np.where(pred > 0, 255, 0).astype(np.uint8)).save(out / seq.name / mask.name)
            else:
                write_mask(out / seq.name / mask.name, pred)
    return out


@pytest.fixture
def vos_evaluator():
    """vos-benchmark's per-sequence evaluator (the official DAVIS measures, multi-threaded), or a skip."""
    module = pytest.importorskip(
        "vos_benchmark.evaluator",
        reason="vos-benchmark is not installed (test-only: pip install vos-benchmark; it pulls OpenCV and "
        "scikit-image)")
    return module.Evaluator


def _vos_benchmark(evaluator_class, dataset: DavisDataset, results) -> tuple[float, float]:
    """J-Mean and F-Mean by vos-benchmark's evaluator, over objects, as its `benchmark` averages them."""
    js, fs = [], []
    for seq in dataset.sequences:
        evaluator = evaluator_class(name=seq.name)
        for mask in seq.masks[1:-1]:
            evaluator.feed_frame(np.array(Image.open(results / seq.name / mask.name)), np.array(Image.open(mask)))
        j, f = evaluator.conclude()
        js.extend(j.values())
        fs.extend(f.values())
    return float(np.mean(js)), float(np.mean(fs))


@pytest.mark.slow
def test_j_and_f_equal_vos_benchmark_on_perturbed_davis2016_mini(tmp_path, vos_evaluator):
    dataset = DavisDataset(davis_mini())
    results = _perturbed(dataset, tmp_path / "results", grayscale=True, seed=0)  # the truth's own 0/255 form
    j_mean, f_mean = _vos_benchmark(vos_evaluator, dataset, results)
    summary = score_results(results, dataset).summary()
    assert 20 < summary["j_mean"] < 95 and 20 < summary["f_mean"] < 95
    assert summary["j_mean"] == pytest.approx(j_mean, abs=1e-6)
    assert summary["f_mean"] == pytest.approx(f_mean, abs=1e-6)


def test_j_and_f_equal_vos_benchmark_on_a_two_object_palette_data_set(tmp_path, vos_evaluator):
    dataset = DavisDataset(small_davis(tmp_path / "davis"))
    results = _perturbed(dataset, tmp_path / "results", grayscale=False, seed=1)
    for mask in dataset.sequence("shape1").masks:  # vos-benchmark compares raw values: keep shape1's 0/255 form
        pred = read_mask(results / "shape1" / mask.name, result=True)
        Image.fromarray(np.where(pred > 0, 255, 0).astype(np.uint8)).save(results / "shape1" / mask.name)
    j_mean, f_mean = _vos_benchmark(vos_evaluator, dataset, results)
    summary = score_results(results, dataset).summary()
    assert summary["j_mean"] < 95 and summary["f_mean"] < 95
    assert summary["j_mean"] == pytest.approx(j_mean, abs=1e-6)
    assert summary["f_mean"] == pytest.approx(f_mean, abs=1e-6)
