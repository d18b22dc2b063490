"""The Snakemake workflow end to end on a tiny demo: every stage runs, and a re-run does only what changed.

A copy of the repository's code (evaluate/, decoders/, workflow/, Snakefile) runs a tiny experiment (three demo
data sets of two images, one demo checkpoint, a two-setting sweep) for real, then dry runs show:
- nothing to do on an unchanged config;
- after adding one checkpoint, only that checkpoint's jobs (extraction, decoding, scoring, probe), not the sweep;
  the shards' decoded inputs (results/inputs/, made once per data set) are reused, not decoded again;
- with `features.keep: false` a finished run leaves no keys480/tokens224 behind, its tables equal those of a run
  that kept them, and adding a checkpoint afterwards runs only its jobs and leaves no arrays either; a forced
  re-selection then reuses its record, re-extracts every shard, and the scoring jobs reuse their records: no label
  is opened;
- values read at run time (seal, budget, roles, features.keep, features.workers) re-run nothing;
- after editing what code in evaluate/ does, the jobs that depend on it re-run; editing a comment re-runs nothing.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workspace import TINY_SHARDS, Workspace, checkpoint_entry, planned_jobs, tiny_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(finished_template, tmp_path_factory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("workflow"), template=finished_template)


def test_a_copied_finished_workspace_has_nothing_to_do(finished_template, tmp_path):
    """The shared fixture's premise: a copy of a finished run is finished (no absolute path or mtime is lost)."""
    copy = Workspace(tmp_path / "copy", template=finished_template)
    assert planned_jobs(copy.snakemake("--dry-run")) == {}


def test_a_full_run_produces_every_stage_s_outputs(finished):
    results = finished.work / "results"
    for shard in ("000", "001"):
        for name in ("keys480.npy", "tokens224.npy", "image_ids.json", "meta.json"):
            assert (results / "features" / "a" / "val" / shard / name).is_file()
    selected = yaml.safe_load((results / "decoder" / "selected.yaml").read_text())
    assert selected["n_settings"] == 2
    with open(results / "ledger" / "scores.csv", newline="") as handle:
        measures = {row["measure"] for row in csv.DictReader(handle)}
    assert {"jaccard", "ap", "ap50", "ar10", "corloc", "probe_miou", "probe_accuracy"} <= measures
    assert any(p.suffix == ".md" for p in (results / "tables").iterdir())
    assert len(list((results / "inputs").glob("*/*/images480.npy"))) == TINY_SHARDS  # decoded once per shard, kept
    assert any(p.suffix == ".png" for p in (results / "figures").iterdir())
    verify = subprocess.run([sys.executable, "-m", "evaluate.ledger", "verify", str(results / "ledger")],
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(finished.code)))
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_an_unchanged_config_has_nothing_to_do(finished):
    assert planned_jobs(finished.snakemake("--dry-run")) == {}


def test_adding_a_checkpoint_plans_only_its_jobs_and_not_the_sweep(finished):
    config = yaml.safe_load((finished.work / "config.yaml").read_text())
    config["checkpoints"]["b"] = checkpoint_entry("b", "selfpatch-train", 1, 200)
    finished.write_config(config)
    try:
        out = finished.snakemake("--dry-run")
    finally:
        config["checkpoints"].pop("b")
        finished.write_config(config)
    jobs = planned_jobs(out)
    assert jobs.get("extract") == TINY_SHARDS, jobs  # every shard of the three data sets, checkpoint b only
    assert "preprocess" not in jobs, jobs  # the shards' decoded inputs are reused
    assert jobs.get("decode") == 2 and jobs.get("score_decoder") == 1, jobs
    assert jobs.get("train_probe") == 1 and jobs.get("score_probe") == 1, jobs
    assert "sweep_decode" not in jobs and "select_setting" not in jobs and "manifest" not in jobs, jobs
    assert "checkpoint=a" not in out
    assert set(re.findall(r"checkpoint=(\w+)", out)) == {"b"}


UPSTREAM = {"demo_dataset", "demo_checkpoint", "manifest", "extract"}
DECODER_JOBS = {"sweep_decode", "select_setting", "decode", "merge_masks", "score_decoder"}


def edited_plan(ws: Workspace, relative: str, addition: str) -> dict[str, int]:
    """The dry run's jobs after appending `addition` to one code file of the workspace (restored afterwards)."""
    path = ws.code / relative
    original = path.read_text()
    try:
        path.write_text(original + addition)
        return planned_jobs(ws.snakemake("--dry-run"))
    finally:
        path.write_text(original)


def test_editing_evaluate_code_reruns_its_jobs_but_a_comment_does_not(finished):
    assert edited_plan(finished, "evaluate/networks/vit.py", "\n# a comment changes nothing the code does\n") == {}
    jobs = edited_plan(finished, "evaluate/networks/vit.py", "\nUNUSED_CONSTANT = 1\n")
    assert jobs.get("extract") == TINY_SHARDS, jobs  # every shard of checkpoint a: its features depend on vit.py
    assert "demo_dataset" not in jobs, jobs


def test_editing_the_decoder_job_module_or_a_helper_re_plans_the_decoder_jobs_and_nothing_upstream(finished):
    jobs = edited_plan(finished, "evaluate/jobs/decoder.py", "\nUNUSED_CONSTANT = 1\n")
    assert DECODER_JOBS <= set(jobs), jobs
    assert not UPSTREAM & set(jobs) and "train_probe" not in jobs and "score_probe" not in jobs, jobs
    # decoders/shards.py is imported by the sweep and decode jobs only (not by any hand-written list)
    jobs = edited_plan(finished, "decoders/shards.py", "\nUNUSED_CONSTANT = 1\n")
    assert {"sweep_decode", "decode"} <= set(jobs), jobs
    assert not UPSTREAM & set(jobs) and "train_probe" not in jobs, jobs


def test_editing_table_code_re_plans_only_tables_and_figures(finished):
    # (and the report page, which shows them)
    jobs = edited_plan(finished, "evaluate/outputs/tables.py", "\nUNUSED_CONSTANT = 1\n")
    assert "tables" in jobs and set(jobs) - {"all"} <= {"tables", "figures", "html_report"}, jobs
    jobs = edited_plan(finished, "evaluate/outputs/figures.py", "\nUNUSED_CONSTANT = 1\n")
    assert "figures" in jobs and "tables" not in jobs and set(jobs) - {"all"} <= {"figures", "html_report"}, jobs
    jobs = edited_plan(finished, "evaluate/jobs/decoder.py", "\n# only a comment\n")
    assert jobs == {}, jobs


def planned_after(ws: Workspace, edit) -> tuple[dict[str, int], str]:
    """The dry run's jobs and output after `edit(config)` (the config restored afterwards)."""
    config = yaml.safe_load((ws.work / "config.yaml").read_text())
    original = yaml.safe_dump(config, sort_keys=False)
    edit(config)
    ws.write_config(config)
    try:
        out = ws.snakemake("--dry-run")
        return planned_jobs(out), out
    finally:
        (ws.work / "config.yaml").write_text(original)


# values a job reads when it runs (a RunTime param, docs/design.md §8): each also changes the config's hash, which
# every record holds, so none of them may re-run a job either; an unsealed data set's ground truth is drawn in the
# figures again (a param of the figures rule, docs/design.md §11), and nothing else
RUN_TIME_EDITS = {
    "a raised budget": (lambda config: config["datasets"]["val"].update(budget=20), {}),
    "an unsealed data set": (lambda config: config["datasets"]["val"].update(sealed=False),
                             {"figures": 1, "html_report": 1, "all": 1}),
    "features dropped": (lambda config: config["features"].update(keep=False), {}),
    "fewer decoding workers": (lambda config: config["features"].update(workers=1), {}),
}


@pytest.mark.parametrize("edit", list(RUN_TIME_EDITS))
def test_a_value_read_at_run_time_re_runs_nothing(finished, edit):
    """Seal, budget, features.keep and features.workers are read at run time: changing them must not spend
    openings or re-extract."""
    change, expected = RUN_TIME_EDITS[edit]
    jobs, _ = planned_after(finished, change)
    assert jobs == expected, jobs


def test_a_new_role_plans_only_the_new_jobs_of_its_data_set(finished):
    """Roles are read at run time too: giving the probe-train set the eval role scores it, and neither its manifest
    nor its features nor the probe trained on it are made again."""
    def also_eval(config: dict) -> None:
        config["datasets"]["train"]["roles"] = ["probe-train", "eval"]

    jobs, out = planned_after(finished, also_eval)
    assert jobs.get("decode") == 1 and jobs.get("score_decoder") == 1 and jobs.get("score_probe") == 1, jobs  # 1 shard
    for absent in ("manifest", "preprocess", "extract", "train_probe", "sweep_decode", "select_setting"):
        assert absent not in jobs, jobs
    assert set(re.findall(r"dataset=(\w+)", out)) == {"train"}


def test_every_record_holds_the_hash_of_the_config_the_run_validated(finished):
    from evaluate.experiment import load_config
    from evaluate.plumbing.provenance import config_hash

    expected = config_hash(load_config(yaml.safe_load((finished.work / "config.yaml").read_text())))
    records = sorted((finished.work / "results" / "ledger" / "records").rglob("*.json"))
    # the sweep's, the decoder's and the probe's (the tiny experiment leaves the attention reading off)
    assert len(records) == 3 and {json.loads(p.read_text())["config_hash"] for p in records} == {expected}


# ---- features.keep: false -------------------------------------------------------------------------------------------


def feature_arrays(work: Path) -> list[Path]:
    """Every keys480/tokens224 array and decoded-input array under results/."""
    results = work / "results"
    return sorted([*results.rglob("keys480.npy"), *results.rglob("tokens224.npy"), *(results / "inputs").rglob("*.npy")])


@pytest.fixture(scope="module")
def dropped(tmp_path_factory) -> Workspace:
    ws = Workspace(tmp_path_factory.mktemp("workflow-dropped"))
    config = tiny_config({"a": checkpoint_entry("a", "dino-backbone", 0, 100)})
    config["features"]["keep"] = False
    ws.write_config(config)
    ws.snakemake()
    return ws


def test_dropped_features_leave_no_arrays_and_the_same_tables(finished, dropped):
    assert feature_arrays(dropped.work) == []  # neither features nor decoded inputs
    assert len(list((dropped.work / "results" / "inputs").glob("*/*.json"))) == TINY_SHARDS  # the records of them
    assert feature_arrays(finished.work)  # the run that kept them has them
    shards = sorted((dropped.work / "results" / "features" / "a").glob("*/*"))
    assert len(shards) == TINY_SHARDS
    assert all((s / "meta.json").is_file() and (s / "image_ids.json").is_file() for s in shards)
    for kept in ("results/probe/a/probe.safetensors", "results/decoder/masks/a/val.json",
                 "results/ledger/records/decoder/a/val.json", "results/ledger/records/probe/a/val.json"):
        assert (dropped.work / kept).is_file(), kept
    tables = sorted(p.relative_to(finished.work) for p in (finished.work / "results" / "tables").iterdir())
    assert tables and tables == sorted(p.relative_to(dropped.work) for p in (dropped.work / "results" / "tables").iterdir())
    for name in tables:
        assert (dropped.work / name).read_bytes() == (finished.work / name).read_bytes(), name
    for masks in ("results/decoder/masks/a/val.json", "results/decoder/eigenvector/a/val.npz"):
        assert (dropped.work / masks).read_bytes() == (finished.work / masks).read_bytes(), masks
    assert planned_jobs(dropped.snakemake("--dry-run")) == {}  # deleted arrays are not a reason to re-extract


def test_adding_a_checkpoint_with_features_dropped_runs_only_its_jobs(dropped):
    config = yaml.safe_load((dropped.work / "config.yaml").read_text())
    config["checkpoints"]["b"] = checkpoint_entry("b", "selfpatch-train", 1, 200)
    dropped.write_config(config)
    jobs = planned_jobs(dropped.snakemake("--dry-run"))
    assert jobs.get("extract") == TINY_SHARDS, jobs  # b only, decoding the images itself: the inputs were dropped
    assert jobs.get("decode") == 2 and jobs.get("score_decoder") == 1, jobs
    assert jobs.get("train_probe") == 1 and jobs.get("score_probe") == 1, jobs
    for absent in ("preprocess", "sweep_decode", "select_setting", "eigenvector", "manifest"):
        assert absent not in jobs, jobs
    records = dropped.work / "results" / "ledger" / "records"
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in records.rglob("*.json")}
    out = dropped.snakemake()
    assert "checkpoint=a" not in out
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before  # a's records untouched
    assert (records / "decoder" / "b" / "val.json").is_file() and (records / "probe" / "b" / "val.json").is_file()
    assert feature_arrays(dropped.work) == []
    assert planned_jobs(dropped.snakemake("--dry-run")) == {}


def test_a_forced_re_selection_opens_no_labels_again(dropped):
    """A forced re-selection on the same sweep reuses its record: no select labels are opened, selected.yaml and the
    sweep table are byte-identical. It still rewrites selected.yaml, so every checkpoint is decoded again, which
    re-extracts its dropped shards and so rewrites the tokens the probe was scored on: the scoring jobs run again,
    but on the same bytes, so they reuse their records and the sealed eval set's labels are not opened again."""
    results = dropped.work / "results"
    records = results / "ledger" / "records"
    kept = sorted([*records.rglob("*.json"), results / "decoder" / "selected.yaml", results / "decoder" / "sweep.csv"])
    before = {p: p.read_bytes() for p in kept}
    openings_file = results / "ledger" / "openings.csv"
    rows_before = list(csv.DictReader(openings_file.open()))
    jobs = planned_jobs(dropped.snakemake("--dry-run", "--forcerun", "select_setting"))
    assert jobs.get("extract") and jobs.get("score_probe") == 2 and jobs.get("score_decoder") == 2, jobs
    out = dropped.snakemake("--forcerun", "select_setting")
    assert "rule select_setting:" in out
    assert list(csv.DictReader(openings_file.open())) == rows_before  # not a row more: nothing opened
    assert {p: p.read_bytes() for p in kept} == before  # selected.yaml, sweep.csv, every record, byte for byte
    assert feature_arrays(dropped.work) == []
