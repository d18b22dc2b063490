"""Growing a finished experiment: only the new jobs run, only the new labels are opened, nothing computed is touched.

One tiny demo experiment (test_workflow's, run once per session: `finished_template`) is copied, then grown:
- one eval data set added: the openings ledger gains rows for that data set only, the probe's weights are
  byte-identical and untouched, no feature shard of an existing data set is rewritten;
- an eval data set whose only category the probe-train set lacks: refused before any job; with `probe: false` it is
  scored by the decoder only;
- one checkpoint added: only its jobs are planned;
- a config file of the user's own, without the demo's entries: no demo job is planned, and no error.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from collections import Counter

import pytest
import yaml
from sources import REPO
from workspace import Workspace, checkpoint_entry, demo_set, openings_per_dataset, planned_jobs, stamps

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def grown(finished_template, tmp_path_factory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("incremental"), template=finished_template)


def test_adding_an_eval_data_set_opens_only_its_labels_and_touches_nothing_computed(grown):
    results = grown.work / "results"
    before = openings_per_dataset(grown)
    weights = results / "probe" / "a" / "probe.safetensors"
    weights_bytes, weights_stamp = weights.read_bytes(), weights.stat().st_mtime_ns
    features = stamps(results / "features")
    config = yaml.safe_load((grown.work / "config.yaml").read_text())
    config["datasets"]["val2"] = demo_set("val2", 2, 4, 301, ["eval"])
    grown.write_config(config)

    jobs = planned_jobs(grown.snakemake("--dry-run"))  # its shards are known once its manifest exists
    assert set(jobs) == {"demo_dataset", "manifest", "all"}, jobs
    ran = grown.snakemake()
    done = {rule: ran.count(f"rule {rule}:") for rule in ("extract", "score_decoder", "score_probe", "train_probe",
                                                          "sweep_decode", "select_setting", "decode")}
    assert done == {"extract": 2, "score_decoder": 1, "score_probe": 1, "train_probe": 0, "sweep_decode": 0,
                    "select_setting": 0, "decode": 2}, done

    after = openings_per_dataset(grown)
    assert after - before == Counter({"val2": 2}), (before, after)  # its decoder scoring and its probe scoring
    assert {d: after[d] for d in before} == dict(before)
    assert weights.read_bytes() == weights_bytes and weights.stat().st_mtime_ns == weights_stamp
    now = stamps(results / "features")
    assert {k: now[k] for k in features} == features  # no shard of an existing data set rewritten
    assert {k for k in now if k not in features} and all(k.startswith("a/val2/") for k in now if k not in features)
    for kind in ("decoder", "probe"):
        assert (results / "ledger" / "records" / kind / "a" / "val2.json").is_file()


def foreground_set(ws: Workspace) -> dict:
    """A copy of the val demo set whose only category is named 'foreground' (id 1, as the probe's 'disc')."""
    source = ws.work / "results" / "demo" / "datasets" / "val"
    target = ws.work / "data" / "fg"
    shutil.copytree(source / "images", target / "images", dirs_exist_ok=True)
    data = json.loads((source / "annotations.json").read_text())
    data["categories"] = [{"id": 1, "name": "foreground", "supercategory": "object"}]
    for ann in data["annotations"]:
        ann["category_id"] = 1
    (target / "annotations.json").write_text(json.dumps(data))
    return {"images": "data/fg/images", "annotations": "data/fg/annotations.json", "roles": ["eval"]}


def test_an_eval_set_of_unknown_category_names_is_refused_before_any_job_unless_it_is_decoder_only(grown):
    config = yaml.safe_load((grown.work / "config.yaml").read_text())
    config["datasets"]["fg"] = foreground_set(grown)
    grown.write_config(config)
    out = grown.snakemake("--dry-run", check=False)
    assert "datasets.fg" in out and "['foreground']" in out and "probe: false" in out, out[-3000:]
    assert "Job stats" not in out

    before = openings_per_dataset(grown)
    config["datasets"]["fg"]["probe"] = False
    grown.write_config(config)
    grown.snakemake()
    records = grown.work / "results" / "ledger" / "records"
    assert (records / "decoder" / "a" / "fg.json").is_file()
    assert not (records / "probe" / "a" / "fg.json").exists()
    assert openings_per_dataset(grown) - before == Counter({"fg": 1})  # the decoder's scoring only
    with open(grown.work / "results" / "ledger" / "scores.csv", newline="") as handle:
        measures = {row["measure"] for row in csv.DictReader(handle) if row["dataset"] == "fg"}
    # the decoder's alone: no probe, and the tiny experiment leaves the attention reading off (test_attention_workflow
    # reads it on an eval set that no probe is trained for)
    assert measures == {"jaccard", "corloc", "ap", "ap50", "ar10"}


def test_then_adding_a_checkpoint_plans_only_its_jobs(grown):
    config = yaml.safe_load((grown.work / "config.yaml").read_text())
    config["checkpoints"]["b"] = checkpoint_entry("b", "selfpatch-train", 1, 200)
    grown.write_config(config)
    try:
        out = grown.snakemake("--dry-run")
    finally:
        config["checkpoints"].pop("b")
        grown.write_config(config)
    jobs = planned_jobs(out)
    assert jobs.get("train_probe") == 1 and "sweep_decode" not in jobs and "manifest" not in jobs, jobs
    assert set(__import__("re").findall(r"checkpoint=(\w+)", out)) == {"b"}


def test_a_config_of_the_user_s_own_plans_no_demo_job(grown):
    results = "results/demo"
    user = {
        "checkpoints": {"mine": {"path": f"{results}/checkpoints/a.pth", "run": "mine", "epoch": 1}},
        "datasets": {
            "my-select": {"images": f"{results}/datasets/sel/images",
                          "annotations": f"{results}/datasets/sel/annotations.json", "roles": ["select"]},
            "my-val": {"images": f"{results}/datasets/val/images",
                       "annotations": f"{results}/datasets/val/annotations.json", "roles": ["eval"]},
        },
        "features": {"shard_size": 1, "batch_size": 2, "threads": 1},
    }
    (grown.work / "user.yaml").write_text(yaml.safe_dump(user))
    jobs = planned_jobs(grown.snakemake("--dry-run", configfile="user.yaml"))
    assert jobs and not any(rule.startswith("demo_") for rule in jobs), jobs
    assert jobs.get("manifest") == 2, jobs  # its own two data sets (their shards are known once these ran)
    assert "train_probe" not in jobs  # no probe-train data set in the user's config


@pytest.mark.parametrize("profile", ["workflow/profiles/local", "workflow/profiles/slurm"])
def test_make_run_with_config_names_the_file_alone_on_every_profile(profile):
    """The file travels as Snakemake's --configfile, which it also hands to every job it submits; the Snakefile
    then skips config.yaml (tests/test_experiment_file.py runs that through a job-submitting executor)."""
    out = subprocess.run(["make", "-n", "run", "CONFIG=my.yaml", f"PROFILE={profile}"], cwd=REPO,
                         check=True, capture_output=True, text=True).stdout
    assert f"--profile {profile} --cores 2 --configfile my.yaml" in out, out
