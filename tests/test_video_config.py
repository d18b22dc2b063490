"""Video data sets in the config, the demo's video set, and the openings of the video reading.

- `videos:` and `video:` as the schema and `evaluate.experiment` read them: DINO's defaults, one line for each bad
  entry (a name shared with an image data set, sealed without a budget, a root that is not a folder, a demo set
  drawn elsewhere than its root, a height that is not a multiple of 16);
- the demo's video set: the same bytes for the same arguments, a palette mask for two objects, a grayscale 0/255
  mask for one, and masks that are exactly the drawn ids;
- a sealed video set's budget counts its `video-eval` openings and never its `propagate` ones.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from snakemake_interface_common.exceptions import WorkflowError

from evaluate.datasets.davis import DavisDataset, first_mask, read_mask
from evaluate.demo import DemoError
from evaluate.demo.videos import FRAME_SIZE, make_demo_videos, make_sequence
from evaluate.experiment import ConfigError, Experiment, load_config
from evaluate.ledger import BudgetExceeded
from evaluate.ledger.openings import opening, verify_openings
from evaluate.video.propagate import PropagationSettings

DINO_DEFAULTS = {"height": 480, "n_last_frames": 7, "topk": 5, "neighbourhood": 12, "temperature": 0.1}


def video_only(root: str, **entry) -> dict:
    """A config of one checkpoint and one video data set (no image data set)."""
    return {"checkpoints": {"a": {"path": "a.pth"}}, "videos": {"clip": {"root": root, **entry}}}


def test_the_shipped_demo_video_set_is_an_eval_set_read_at_a_reduced_height(shipped_config):
    exp = Experiment(load_config(shipped_config))
    assert list(exp.section("videos")) == ["demo-videos"]
    video = exp.datasets["demo-videos"]
    assert video.roles == ("eval",) and video.fields["resolution"] == "480p" and video.sealed and video.budget == 50
    assert (video.section, video.kind) == ("videos", "davis")
    assert exp.propagation == PropagationSettings(**{**DINO_DEFAULTS, "height": 96})
    run_time = exp.run_time("demo-videos")
    assert (run_time.roles, run_time.sealed, run_time.budget) == (("eval",), True, 50)


def test_the_schema_holds_dino_s_propagation_defaults(tmp_path):
    config = load_config(video_only(str(tmp_path)))
    assert {k: config["video"][k] for k in DINO_DEFAULTS} == DINO_DEFAULTS
    assert config["video"]["threads"] == 1
    assert config["videos"]["clip"]["resolution"] == "480p" and config["datasets"] == {}
    exp = Experiment(config)
    assert exp.propagation.name == "h480-n7-k5-r12-t0.1"
    assert exp.section("datasets") == {} and not exp.datasets["clip"].sealed and exp.datasets["clip"].budget is None


def test_a_config_without_any_data_set_is_refused():
    with pytest.raises(ConfigError, match="no data sets"):
        Experiment(load_config({"checkpoints": {"a": {"path": "a.pth"}}}))


def test_a_video_set_named_as_an_image_data_set_is_refused(shipped_config, tmp_path):
    shipped_config["videos"]["demo-val"] = {"root": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"videos\.demo-val: the name is also a data set's"):
        Experiment(load_config(shipped_config))


def test_a_sealed_video_set_without_a_budget_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"videos\.clip is sealed but has no 'budget'"):
        Experiment(load_config(video_only(str(tmp_path), sealed=True)))


def test_a_video_root_that_is_not_a_folder_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"videos\.clip\.root: .*missing is not a folder"):
        Experiment(load_config(video_only(str(tmp_path / "missing"))))


def test_a_demo_video_set_must_live_where_it_is_drawn(shipped_config):
    shipped_config["videos"]["demo-videos"]["root"] = "elsewhere"
    with pytest.raises(ConfigError, match=r"videos\.demo-videos\.root: .*results/demo/videos/demo-videos"):
        Experiment(load_config(shipped_config))


@pytest.mark.parametrize("edit, match", [
    ({"height": 100}, "multiple of 16"),
    ({"temperature": 0}, "temperature"),
    ({"topk": 0}, "topk"),
    ({"threads": 0}, "threads"),
    ({"stride": 4}, "stride"),
])
def test_bad_video_settings_are_refused_naming_the_setting(tmp_path, edit, match):
    config = video_only(str(tmp_path))
    config["video"] = edit
    with pytest.raises(WorkflowError, match=match):  # the schema's refusal, never a KeyError naming the key
        Experiment(load_config(config))


def test_a_setting_missing_from_an_unvalidated_config_is_one_config_line(tmp_path):
    config = load_config(video_only(str(tmp_path)))
    del config["video"]["n_last_frames"]
    with pytest.raises(ConfigError, match="config.yaml: video: no setting 'n_last_frames'"):
        Experiment(config)


# ------------------------------------------------------------------------------------------- the demo's videos


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_demo_video_set_is_the_same_bytes_for_the_same_arguments(tmp_path):
    a = files(make_demo_videos(tmp_path / "a", n_sequences=3, n_frames=4, seed=7))
    b = files(make_demo_videos(tmp_path / "b", n_sequences=3, n_frames=4, seed=7))
    c = files(make_demo_videos(tmp_path / "c", n_sequences=3, n_frames=4, seed=8))
    assert len(a) == 3 * 4 * 2 and a == b
    assert a.keys() == c.keys() and a != c
    assert "JPEGImages/480p/seq02/00003.jpg" in a and "Annotations/480p/seq00/00000.png" in a


def test_demo_masks_are_the_drawn_ids_as_palette_or_grayscale_pngs(tmp_path):
    root = make_demo_videos(tmp_path, n_sequences=2, n_frames=5, seed=3)
    davis = DavisDataset(root)
    assert davis.names == ["seq00", "seq01"]
    for index, (name, mode, objects) in enumerate([("seq00", "P", 2), ("seq01", "L", 1)]):
        _, masks, n_objects = make_sequence(3, index, 5)
        assert n_objects == objects
        sequence = davis.sequence(name)
        assert first_mask(sequence).n_objects == objects
        for t, path in enumerate(sequence.masks):
            with Image.open(path) as png:
                assert png.mode == mode and png.size == FRAME_SIZE
                raw = np.asarray(png)
            assert set(np.unique(raw)) <= ({0, 1, 2} if mode == "P" else {0, 255})
            np.testing.assert_array_equal(read_mask(path), masks[t])
            assert all((masks[t] == k).sum() > 100 for k in range(objects + 1))  # every object visible
        with Image.open(sequence.frames[0]) as jpeg:
            assert jpeg.format == "JPEG" and jpeg.size == FRAME_SIZE
    moved = [np.argwhere(m == 1).mean(0) for m in make_sequence(3, 0, 5)[1]]
    assert np.abs(moved[-1] - moved[0]).max() > 2  # the objects move


def test_the_demo_refuses_a_sequence_too_short_to_score(tmp_path):
    with pytest.raises(DemoError, match="at least 3 frames"):
        make_demo_videos(tmp_path, n_sequences=1, n_frames=2, seed=0)


# ------------------------------------------------------------------------------------------- openings


def open_video(ledger: Path, purpose: str, checkpoint: str, budget: int = 1) -> None:
    with opening(ledger, dataset="clip", role="eval", purpose=purpose, checkpoint=checkpoint, setting="s",
                 n_images=1, annotations_sha256="a" * 64, sealed=True, budget=budget) as handle:
        handle.result_sha256 = "r" * 64


def test_propagation_openings_are_recorded_but_never_count_against_the_budget(tmp_path):
    for checkpoint in ("a", "b", "c"):
        open_video(tmp_path, "propagate", checkpoint)
    open_video(tmp_path, "video-eval", "a")
    open_video(tmp_path, "propagate", "b")  # still allowed with the budget spent
    with pytest.raises(BudgetExceeded, match="opened 1 time"):
        open_video(tmp_path, "video-eval", "b")
    with open(tmp_path / "openings.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["purpose"] for r in rows] == ["budget", "propagate", "propagate", "propagate", "video-eval",
                                            "propagate"]
    assert verify_openings(tmp_path / "openings.csv") == 6


def test_propagation_in_flight_does_not_block_a_scoring(tmp_path):
    with opening(tmp_path, dataset="clip", role="eval", purpose="propagate", checkpoint="a", setting="s",
                 n_images=1, annotations_sha256="a" * 64, sealed=True, budget=1) as handle:
        open_video(tmp_path, "video-eval", "a")
        handle.result_sha256 = "r" * 64

