"""The video figure: first, middle and last frames with the propagated objects filled, the truth outlined, none
drawn for a sealed set (it then reads no mask but the results), the same bytes on a re-run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from videos import truth_as_results

from evaluate.datasets.davis import DavisDataset, VideoDatasetError
from evaluate.demo.videos import make_demo_videos
from evaluate.outputs.drawing import PALETTE, FigureError
from evaluate.outputs.overlays import ALPHA
from evaluate.outputs.video_figures import paint_objects, shown_frames, video_figure


@pytest.fixture()
def drawn(tmp_path) -> tuple[DavisDataset, Path]:
    """The demo's videos (2 sequences of 5 frames) and their ground truth written as a results folder."""
    davis = DavisDataset(make_demo_videos(tmp_path / "davis", n_sequences=2, n_frames=5, seed=1))
    return davis, truth_as_results(davis, tmp_path / "results")


def test_the_shown_frames_are_the_first_the_middle_and_the_last():
    assert shown_frames(5) == [0, 2, 4] and shown_frames(2) == [0, 1, 1] and shown_frames(1) == [0, 0, 0]


def test_objects_are_painted_in_their_palette_colour():
    picture = np.full((2, 3, 3), 100, np.uint8)
    labels = np.array([[0, 1, 2], [0, 0, 1]], np.uint8)
    out = paint_objects(picture, labels)
    np.testing.assert_array_equal(out[0, 0], [100, 100, 100])
    for (y, x), k in (((0, 1), 1), ((0, 2), 2), ((1, 2), 1)):
        np.testing.assert_array_equal(out[y, x], np.rint((1 - ALPHA) * 100 + ALPHA * PALETTE[k - 1]))


def test_a_sealed_set_s_figure_reads_no_truth_and_a_re_run_gives_the_same_bytes(drawn, tmp_path):
    davis, results = drawn
    sealed = video_figure(davis, results, davis.names, tmp_path / "sealed.png", title="a on clip", truth=False)
    for sequence in davis.sequences:  # the truth made unreadable: a figure without it never opens a mask
        for mask in sequence.masks:
            mask.write_bytes(b"not a png")
    again = video_figure(davis, results, davis.names, tmp_path / "again.png", title="a on clip", truth=False)
    assert sealed.read_bytes() == again.read_bytes()
    assert sealed.with_suffix(".pdf").is_file()
    with pytest.raises(VideoDatasetError, match="not an image"):
        video_figure(davis, results, davis.names, tmp_path / "truth.png", title="a on clip", truth=True)


def test_the_truth_is_outlined_when_the_set_is_not_sealed(drawn, tmp_path):
    davis, results = drawn
    with_truth = video_figure(davis, results, davis.names[:1], tmp_path / "t.png", title="t", jf={"seq00": 50.0})
    without = video_figure(davis, results, davis.names[:1], tmp_path / "f.png", title="t", jf={"seq00": 50.0},
                           truth=False)
    assert with_truth.read_bytes() != without.read_bytes()


def test_a_missing_result_frame_is_named(drawn, tmp_path):
    davis, results = drawn
    (results / "seq01" / "00004.png").unlink()
    with pytest.raises(FigureError, match=r"seq01.*00004"):
        video_figure(davis, results, davis.names, tmp_path / "x.png", title="x")
