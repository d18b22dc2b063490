"""The video record's measures from the scorer's: the truth as results gives 100 (decay 0) for every sequence, and
intervals over sequences; a prediction with one sequence wrong moves only that sequence's row."""

from __future__ import annotations

import numpy as np
import pytest
from videos import truth_as_results

from evaluate.datasets.davis import DavisDataset, write_mask
from evaluate.demo.videos import make_demo_videos
from evaluate.video.protocol import per_sequence_rows, video_measures
from evaluate.video.score import score_results


@pytest.fixture()
def davis(tmp_path) -> DavisDataset:
    return DavisDataset(make_demo_videos(tmp_path / "davis", n_sequences=3, n_frames=4, seed=2))


def test_the_truth_as_results_scores_100_with_no_decay(davis, tmp_path):
    scores = score_results(truth_as_results(davis, tmp_path / "results"), davis)
    measures = {m["measure"]: m for m in video_measures(scores, resamples=200, seed=0)}
    for name in ("jf_mean", "j_mean", "f_mean", "j_recall", "f_recall"):
        assert (measures[name]["value"], measures[name]["ci_low"], measures[name]["ci_high"]) == (100, 100, 100)
    assert measures["j_decay"]["value"] == measures["f_decay"]["value"] == 0
    assert measures["j_mean"]["image_ids"] == [0, 1, 2] and measures["j_mean"]["per_image"] == [[2, 2], [1, 1],
                                                                                                [2, 2]]
    assert [(r["sequence"], r["objects"], r["jf_mean"]) for r in per_sequence_rows(scores)] == [
        ("seq00", 2, 100), ("seq01", 1, 100), ("seq02", 2, 100)]


def test_an_empty_prediction_on_one_sequence_moves_its_row_and_widens_the_interval(davis, tmp_path):
    results = truth_as_results(davis, tmp_path / "results")
    for mask in davis.sequence("seq01").masks[1:]:  # object 1 of seq01 lost after frame 0
        write_mask(results / "seq01" / mask.name, np.zeros((96, 128), np.uint8))
    scores = score_results(results, davis)
    rows = {r["sequence"]: r for r in per_sequence_rows(scores)}
    assert rows["seq00"]["j_mean"] == rows["seq02"]["j_mean"] == 100 and rows["seq01"]["j_mean"] == 0
    j = {m["measure"]: m for m in video_measures(scores, resamples=500, seed=0)}["j_mean"]
    assert j["value"] == pytest.approx(100 * 4 / 5)  # over objects: 4 of 5 perfect
    assert j["ci_low"] < j["value"] <= j["ci_high"] == 100
