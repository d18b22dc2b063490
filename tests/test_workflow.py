"""The Snakemake workflow end to end on a tiny demo: every stage runs, and a re-run does only what changed.

A copy of the repository's code (evaluate/, decoders/, workflow/, Snakefile) runs a tiny experiment (three demo
data sets of two images, one demo checkpoint, a two-setting sweep) for real, then dry runs show:
- nothing to do on an unchanged config;
- after adding one checkpoint, only that checkpoint's jobs (extraction, decoding, scoring, probe), not the sweep;
  the shards' decoded inputs (results/inputs/, made once per data set) are reused, not decoded again;
- with `features.keep: false` a finished run leaves no keys480/tokens224 behind, its tables equal those of a run
  that kept them, and adding a checkpoint afterwards runs only its jobs and leaves no arrays either; a forced
  re-selection then re-extracts every shard, and the scoring jobs reuse their records, opening no eval labels;
- after editing what code in evaluate/ does, the jobs that depend on it re-run; editing a comment re-runs nothing.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"

pytestmark = pytest.mark.slow


def tiny_config(checkpoints: dict) -> dict:
    def demo_set(name, n, seed, first, roles, **extra):
        return {
            "images": f"results/demo/datasets/{name}/images",
            "annotations": f"results/demo/datasets/{name}/annotations.json",
            "roles": roles,
            "demo": {"n_images": n, "seed": seed, "first_image_id": first},
            **extra,
        }

    return {
        "checkpoints": checkpoints,
        "datasets": {
            "sel": demo_set("sel", 2, 1, 1, ["select"]),
            "train": demo_set("train", 2, 2, 101, ["probe-train"]),
            "val": demo_set("val", 2, 3, 201, ["eval"], sealed=True, budget=10),
        },
        "reference_checkpoint": "a",
        "compare_to": "a",
        "features": {"shard_size": 1, "batch_size": 2, "threads": 1},
        "decoder": {"sweep": {"tau": [0.2], "eps": [1e-5], "foreground": ["seed"], "split": ["mean"],
                              "component": ["seed", "all"]}},
        "probe": {"max_iter": 20},
        "bootstrap": {"resamples": 200, "seed": 0},
        "figures": {"overlay_images": 2},
    }


def checkpoint_entry(name: str, fmt: str, seed: int, epoch: int) -> dict:
    return {"path": f"results/demo/checkpoints/{name}.pth", "run": "tiny", "epoch": epoch,
            "demo": {"format": fmt, "seed": seed}}


class Workspace:
    """A copy of the code (so edits to it are safe) and a working directory with a config."""

    def __init__(self, root: Path):
        self.code = root / "code"
        self.work = root / "work"
        for part in ("evaluate", "decoders", "workflow", "Snakefile", "config.yaml", "pyproject.toml"):
            src = REPO / part
            if src.is_dir():
                shutil.copytree(src, self.code / part, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                self.code.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, self.code / part)
        self.work.mkdir()

    def write_config(self, config: dict) -> None:
        (self.work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    def snakemake(self, *args: str, check: bool = True, configfile: str = "config.yaml") -> str:
        env = dict(os.environ, PYTHONPATH=str(self.code))
        proc = subprocess.run(
            [str(SNAKEMAKE), "--snakefile", str(self.code / "Snakefile"), "--directory", str(self.work),
             "--configfile", str(self.work / configfile), "--replace-workflow-config", "--cores", "2", *args],
            capture_output=True, text=True, env=env, timeout=1800,
        )
        out = proc.stdout + proc.stderr
        if check and proc.returncode != 0:
            raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{out[-6000:]}")
        return out


def planned_jobs(dry_run_output: str) -> dict[str, int]:
    """rule -> count from the 'Job stats' table of a dry run ({} when there is nothing to be done)."""
    jobs: dict[str, int] = {}
    if "Nothing to be done" in dry_run_output:
        return jobs
    table = dry_run_output.split("Job stats:", 1)[1]
    for line in table.splitlines()[3:]:
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if not m:
            break
        if m.group(1) != "total":
            jobs[m.group(1)] = int(m.group(2))
    return jobs


def finished_workspace(root: Path) -> Workspace:
    """A Workspace in `root` after a full run of the tiny experiment with one checkpoint, `a`."""
    ws = Workspace(root)
    ws.write_config(tiny_config({"a": checkpoint_entry("a", "dino-backbone", 0, 100)}))
    ws.snakemake()
    return ws


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Workspace:
    return finished_workspace(tmp_path_factory.mktemp("workflow"))


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
    assert len(list((results / "inputs").glob("*/*/images480.npy"))) == 6  # decoded once per shard, kept with keep
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
    assert jobs.get("extract") == 6, jobs  # 3 data sets x 2 shards, checkpoint b only
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
    assert jobs.get("extract") == 6, jobs  # every shard of checkpoint a: its features depend on backbone.py
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


def test_raising_a_budget_re_runs_nothing(finished):
    """Seal and budget are read at run time: raising a budget must not spend openings or re-extract."""
    config = yaml.safe_load((finished.work / "config.yaml").read_text())
    original = yaml.safe_dump(config, sort_keys=False)
    config["datasets"]["val"]["budget"] = 20
    finished.write_config(config)
    try:
        assert planned_jobs(finished.snakemake("--dry-run")) == {}
    finally:
        (finished.work / "config.yaml").write_text(original)


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
    assert len(list((dropped.work / "results" / "inputs").glob("*/*.json"))) == 6  # the record that they were made
    assert feature_arrays(finished.work)  # the run that kept them has them
    shards = sorted((dropped.work / "results" / "features" / "a").glob("*/*"))
    assert len(shards) == 6 and all((s / "meta.json").is_file() and (s / "image_ids.json").is_file() for s in shards)
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
    assert jobs.get("extract") == 6, jobs  # b only, decoding the images itself: the decoded inputs were dropped
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


def test_re_extracting_dropped_features_opens_no_eval_labels_again(dropped):
    """A forced re-selection re-decodes every checkpoint, which re-extracts its dropped shards and so rewrites the
    tokens the probe was scored on: the scoring jobs run again, but on the same bytes, so they reuse their records
    and the sealed eval set's labels are not opened again; only the forced selection opens the select labels."""
    records = dropped.work / "results" / "ledger" / "records"
    scored = sorted([*(records / "decoder").rglob("*.json"), *(records / "probe").rglob("*.json")])
    before = {p: p.read_bytes() for p in scored}
    openings_file = dropped.work / "results" / "ledger" / "openings.csv"
    rows_before = list(csv.DictReader(openings_file.open()))
    jobs = planned_jobs(dropped.snakemake("--dry-run", "--forcerun", "select_setting"))
    assert jobs.get("extract") and jobs.get("score_probe") == 2 and jobs.get("score_decoder") == 2, jobs
    dropped.snakemake("--forcerun", "select_setting")
    rows = list(csv.DictReader(openings_file.open()))
    assert rows[: len(rows_before)] == rows_before
    assert [(r["dataset"], r["purpose"]) for r in rows[len(rows_before):]] == [("sel", "select")]
    assert {p: p.read_bytes() for p in scored} == before  # the same records, byte for byte
    assert feature_arrays(dropped.work) == []
