"""One way to name an experiment: a config file given with --configfile (`make run CONFIG=my.yaml`) is the whole
config, in the main process and in every job an executor plugin submits; config.yaml is read only when none is given.

An executor plugin (SLURM's) starts each job as a fresh `snakemake` that re-reads the Snakefile with the same
--configfile, but without --replace-workflow-config (Snakemake 9.27, `spawn_jobs.py`). The job side is run here
through snakemake-executor-plugin-cluster-generic, whose jobs are built by the same Snakemake code as SLURM's and
are submitted with plain `bash` (no scheduler): one demo data set drawn by a submitted job.

Each test's work folder holds a config.yaml that differs from the given file in ways a job would see: a data set's
`first_image_id` (a key only config.yaml has) and its `n_images`, and a checkpoint only config.yaml names.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess

import pytest
import yaml
from workspace import SNAKEMAKE, Workspace, checkpoint_entry, planned_jobs, tiny_config

pytestmark = pytest.mark.slow  # each test starts Snakemake on the workflow (a dry run: about 8 s on 2 cores)


def experiment_files(ws: Workspace) -> None:
    """Writes work/user.yaml (the given file) and work/config.yaml (what must not leak in)."""
    user = tiny_config({"a": checkpoint_entry("a", "dino-backbone", 0, 100)})
    user["datasets"]["sel"]["demo"] = {"n_images": 3, "seed": 1}  # first_image_id: the schema's default, 1
    shipped = copy.deepcopy(user)
    shipped["datasets"]["sel"]["demo"] = {"n_images": 2, "seed": 1, "first_image_id": 500}
    shipped["checkpoints"]["leaked"] = checkpoint_entry("leaked", "dino-backbone", 5, 1)
    (ws.work / "user.yaml").write_text(yaml.safe_dump(user, sort_keys=False))
    ws.write_config(shipped)


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Workspace:
    ws = Workspace(tmp_path_factory.mktemp("experiment_file"))
    experiment_files(ws)
    return ws


def test_a_given_file_is_the_whole_plan_and_config_yaml_adds_nothing(ws):
    """The dry run of the given file: only its checkpoint; the one config.yaml adds is never planned."""
    out = ws.snakemake("--dry-run", configfile="user.yaml")
    jobs = planned_jobs(out)
    assert jobs.get("demo_checkpoint") == 1, jobs
    assert "leaked" not in out


def test_without_a_given_file_config_yaml_is_the_experiment(ws):
    """The other half of the rule: with no --configfile, config.yaml is read (its extra checkpoint is planned)."""
    proc = subprocess.run([str(SNAKEMAKE), "--snakefile", str(ws.code / "Snakefile"), "--directory", str(ws.work),
                           "--cores", "1", "--dry-run"], check=False, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ws.code)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = planned_jobs(proc.stdout + proc.stderr)
    assert jobs.get("demo_checkpoint") == 2, jobs
    assert "checkpoint=leaked" in proc.stdout + proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("snakemake_executor_plugin_cluster_generic") is None,
                    reason="snakemake-executor-plugin-cluster-generic absent (pip install '.[test]')")
def test_a_submitted_job_reads_the_given_file_whole(ws):
    """A job submitted through an executor plugin draws the given file's data set: its 3 images from id 1, not
    config.yaml's first_image_id 500 merged back in."""
    # the "scheduler": runs the job script at once (its log to stderr) and prints a job id, as sbatch would
    submit = """sh -c 'bash "$0" 1>&2 && echo lfse-test-job'"""
    out = ws.snakemake("--executor", "cluster-generic", "--cluster-generic-submit-cmd", submit, "--jobs", "1",
                       "--latency-wait", "0", "results/demo/datasets/sel", configfile="user.yaml")
    assert "with external jobid 'lfse-test-job'" in out, out[-3000:]  # submitted, so run by a snakemake of its own
    annotations = json.loads((ws.work / "results/demo/datasets/sel/annotations.json").read_text())
    assert sorted(image["id"] for image in annotations["images"]) == [1, 2, 3]
