"""The video reading through the workflow: demo videos, one seeded checkpoint, the records in the ledger.

A tiny experiment (one seeded checkpoint, the demo's video set: two sequences of 5 frames, one with two objects in
palette masks, one with one object in a grayscale mask, read at height 96) is run for real, then:
- the results are in DAVIS's results layout, frame 0 the ground truth;
- the record's measures equal `score_results` on the same folder, with the per-object values, the settings and
  intervals over sequences;
- propagation opened only each sequence's first-frame mask, scoring every other one, each row naming its masks;
- a forced re-scoring reuses the record and opens nothing;
- a second video set added to the finished run runs only its jobs and opens only its labels.
And the real DAVIS-2016 sequences of ../shared/data/davis2016-mini through the workflow, for time cut to every
fourth frame (a copy in a temporary folder) and read at height 96, not 480.
"""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from workspace import Workspace, checkpoint_entry, planned_jobs
from videos import davis_mini

from evaluate.datasets.davis import DavisDataset, first_mask, read_mask
from evaluate.ledger.records import read_records
from evaluate.ledger.verify import verify_ledger
from evaluate.plumbing import paths
from evaluate.plumbing.atomic import read_json
from evaluate.video.measures import MEASURES
from evaluate.video.score import score_results

pytestmark = pytest.mark.slow
SETTING = "h96-n7-k5-r12-t0.1"


def demo_videos(name: str, n_sequences: int, seed: int, **extra) -> dict:
    return {"root": paths.DEMO_DATASET.format(section="videos", dataset=name),
            "demo": {"n_sequences": n_sequences, "n_frames": 5, "seed": seed}, **extra}


def video_config(videos: dict) -> dict:
    return {"checkpoints": {"a": checkpoint_entry("a", "dino-backbone", 0, 100)}, "videos": videos,
            "video": {"height": 96}, "bootstrap": {"resamples": 200, "seed": 0}}


def openings(ws: Workspace) -> list[dict]:
    with open(ws.work / paths.OPENINGS, newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["purpose"] != "budget"]


def record(ws: Workspace, dataset: str) -> dict:
    return read_json(ws.work / paths.VIDEO_RECORD.format(checkpoint="a", dataset=dataset))


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Workspace:
    ws = Workspace(tmp_path_factory.mktemp("video"))
    ws.write_config(video_config({"clip": demo_videos("clip", 2, 0, sealed=True, budget=3)}))
    ws.snakemake()
    return ws


def test_the_results_are_in_davis_s_layout_with_the_truth_as_frame_0(finished):
    davis = DavisDataset(finished.work / paths.DEMO_DATASET.format(section="videos", dataset="clip"))
    assert davis.names == ["seq00", "seq01"]
    for sequence in davis.sequences:
        folder = finished.work / paths.VIDEO_RESULTS.format(checkpoint="a", dataset="clip", sequence=sequence.name)
        assert sorted(p.name for p in folder.glob("*.png")) == [f"{f.stem}.png" for f in sequence.frames]
        first = first_mask(sequence)
        np.testing.assert_array_equal(read_mask(folder / "00000.png", result=True), first.labels)
        for png in folder.glob("*.png"):
            with Image.open(png) as image:
                assert image.mode == "P" and image.size == (128, 96)
                assert int(np.asarray(image).max()) <= first.n_objects
    assert not list((finished.work / paths.VIDEO_RESULTS_ROOT.format(checkpoint="a", dataset="clip")).glob("*.tmp"))


def test_the_record_holds_the_scorer_s_measures_on_the_same_folder(finished):
    rec = record(finished, "clip")
    davis = DavisDataset(finished.work / paths.DEMO_DATASET.format(section="videos", dataset="clip"))
    scores = score_results(finished.work / paths.VIDEO_RESULTS_ROOT.format(checkpoint="a", dataset="clip"), davis)
    summary = scores.summary()
    measures = {m["measure"]: m for m in rec["measures"]}
    assert list(measures) == list(MEASURES)
    for name in MEASURES:
        assert measures[name]["value"] == pytest.approx(summary[name], abs=1e-9)
        assert measures[name]["n_images"] == 2 and measures[name]["reducer"] == "ratio"  # units: the sequences
        assert measures[name]["ci_low"] <= measures[name]["value"] <= measures[name]["ci_high"]
    assert measures["jf_mean"]["value"] == pytest.approx((summary["j_mean"] + summary["f_mean"]) / 2)
    assert measures["j_mean"]["per_image"] == [[sum(o.j.mean() for o in scores.objects if o.sequence == s),
                                                 sum(o.sequence == s for o in scores.objects)]
                                                for s in ("seq00", "seq01")]
    assert rec["per_object"] == scores.per_object() and [o["object"] for o in rec["per_object"]] == [1, 2, 1]
    assert [r["sequence"] for r in rec["per_sequence"]] == rec["sequences"] == ["seq00", "seq01"]
    assert rec["setting"] == SETTING and rec["kind"] == "video" and rec["role"] == "eval"
    assert rec["propagation"] == {"height": 96, "n_last_frames": 7, "topk": 5, "neighbourhood": 12,
                                  "temperature": 0.1}
    assert rec["architecture"] == "vit-s16"
    assert verify_ledger(finished.work / paths.LEDGER)["records"] == 1


def test_the_tables_and_the_report_show_j_and_f(finished):
    table = (finished.work / paths.TABLES / "checkpoints_clip.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| run"))
    assert header.index("J&F") < header.index("| J |") < header.index("| F |") < header.index("J decay")
    assert "checkpoints_clip" in (finished.work / paths.REPORT).read_text()


def test_propagation_opens_only_first_frame_masks_and_scoring_the_rest(finished):
    davis = DavisDataset(finished.work / paths.DEMO_DATASET.format(section="videos", dataset="clip"))
    rows = openings(finished)
    propagate = [r for r in rows if r["purpose"] == "propagate"]
    assert sorted(r["annotations_sha256"] for r in propagate) == sorted(
        davis.labels_sha256("first", [name]) for name in davis.names)
    assert {(r["n_images"], r["setting"], r["checkpoint"]) for r in propagate} == {("1", SETTING, "a")}
    for name in davis.names:
        run = read_json(finished.work / paths.VIDEO_RUN.format(checkpoint="a", dataset="clip", sequence=name))
        assert run["opening_row_sha256"] in {r["row_sha256"] for r in propagate}
    scoring = [r for r in rows if r["purpose"] == "video-eval"]
    assert len(scoring) == 1 and scoring[0]["annotations_sha256"] == davis.labels_sha256("rest")
    assert int(scoring[0]["n_images"]) == len(davis.label_paths("rest")) == 8
    assert record(finished, "clip")["opening_row_sha256"] == scoring[0]["row_sha256"]


def test_a_forced_re_scoring_reuses_the_record_and_opens_nothing(finished):
    target = paths.VIDEO_RECORD.format(checkpoint="a", dataset="clip")
    before, rows = (finished.work / target).read_bytes(), openings(finished)
    out = finished.snakemake(target, "--forcerun", "score_video")
    assert "rule score_video:" in out and "rule propagate:" not in out
    assert (finished.work / target).read_bytes() == before and openings(finished) == rows


def test_adding_a_video_set_runs_only_its_jobs_and_opens_only_its_labels(finished):
    results = finished.work / paths.RESULTS
    stamps = {p: p.stat().st_mtime_ns for p in sorted((results / "video").rglob("*")) if p.is_file()}
    before = Counter(r["dataset"] for r in openings(finished))
    finished.write_config(video_config({"clip": demo_videos("clip", 2, 0, sealed=True, budget=3),
                                        "clip2": demo_videos("clip2", 1, 5)}))
    assert planned_jobs(finished.snakemake("--dry-run")) == {
        "demo_dataset": 1, "manifest": 1, "score_video": 1, "scores": 1, "tables": 1, "figures": 1,
        "html_report": 1, "all": 1}  # its propagate jobs are known once its sequences are listed
    ran = finished.snakemake(paths.VIDEO_RECORD.format(checkpoint="a", dataset="clip2"))  # tables aside, for time
    assert {rule: ran.count(f"rule {rule}:") for rule in ("propagate", "score_video", "demo_checkpoint")} == {
        "propagate": 1, "score_video": 1, "demo_checkpoint": 0}
    assert Counter(r["dataset"] for r in openings(finished)) - before == Counter({"clip2": 2})
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert [r["dataset"] for r in read_records(finished.work / paths.RECORDS)] == ["clip", "clip2"]


def every_fourth_frame(source: Path, out: Path) -> Path:
    """A copy of a DAVIS-layout folder holding every fourth frame of each sequence (and its mask), for time."""
    for sequence in DavisDataset(source).sequences:
        for frame in sequence.frames[::4]:
            mask = source / "Annotations" / "480p" / sequence.name / f"{frame.stem}.png"
            for src in (frame, mask):
                dst = out / src.relative_to(source)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
    return out


def test_the_real_davis_sequences_run_through_the_workflow(tmp_path):
    root = every_fourth_frame(davis_mini(), tmp_path / "davis-mini")  # and read at height 96, not 480: for time
    davis = DavisDataset(root)
    ws = Workspace(tmp_path / "ws")
    ws.write_config(video_config({"davis-mini": {"root": str(root)}}))
    target = paths.VIDEO_RECORD.format(checkpoint="a", dataset="davis-mini")
    ws.snakemake(target)
    for sequence in davis.sequences:
        folder = ws.work / paths.VIDEO_RESULTS.format(checkpoint="a", dataset="davis-mini", sequence=sequence.name)
        assert sorted(p.name for p in folder.glob("*.png")) == [f"{f.stem}.png" for f in sequence.frames]
        with Image.open(folder / f"{sequence.frames[-1].stem}.png") as image:
            assert image.size == (854, 480)
    rec = read_json(ws.work / target)
    summary = score_results(ws.work / paths.VIDEO_RESULTS_ROOT.format(checkpoint="a", dataset="davis-mini"),
                            davis).summary()
    assert rec["sequences"] == davis.names and len(rec["per_object"]) == 3  # DAVIS-2016: one object each
    for m in rec["measures"]:
        assert m["value"] == pytest.approx(summary[m["measure"]], abs=1e-9) and m["n_images"] == 3
    assert 0 < summary["j_mean"] < 100
    propagate = [r for r in openings(ws) if r["purpose"] == "propagate"]
    assert sorted(r["annotations_sha256"] for r in propagate) == sorted(
        davis.labels_sha256("first", [name]) for name in davis.names)
