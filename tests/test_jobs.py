"""The job layer's process costs (docs/design.md §8): a job pays for torch only when it imports it, with its rule's
threads; the code hashes every Snakemake start computes parse each module once and still follow every edit."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from sources import REPO

from evaluate.plumbing.provenance import _normalised_source, job_code_hash, kept_folder, normalised_digest

PROBE = """
import sys
from evaluate.jobs import torch_threads
torch_threads(1)
import evaluate.jobs.ledger, json, numpy
print("torch" in sys.modules)
torch_threads(1)  # asked again before the import: still one waiting setting
import torch
print(torch.get_num_threads())
torch_threads(3)
print(torch.get_num_threads())
"""


def test_torch_is_loaded_only_when_a_job_imports_it_and_then_runs_with_the_rules_threads():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, check=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}).stdout.split()
    assert out == ["False", "1", "3"]


# What the jobs that list, score from files or build tables import: none of them runs a network, so none pays
# torch's import (about 2 s of every such job, before this was pinned down).
LIGHT = """
import sys
import evaluate.datasets.coco, evaluate.datasets.davis, evaluate.datasets.boxes, evaluate.datasets.saliency
import evaluate.readings.features, evaluate.readings.extraction, evaluate.readings.inputs, evaluate.probe.scores
import evaluate.outputs.tables, evaluate.outputs.figures, evaluate.decoding.scoring, evaluate.discovery.protocol
import decoders.shards, evaluate.decoding.selection, evaluate.video.score, evaluate.video.settings
from evaluate.ledger.records import _torch_version
print("torch" in sys.modules)
recorded = _torch_version()
import torch
print(recorded == str(torch.__version__) == _torch_version())
"""


def test_listing_scoring_and_table_modules_do_not_import_torch_and_records_name_its_version_all_the_same():
    out = subprocess.run([sys.executable, "-c", LIGHT], capture_output=True, text=True, cwd=REPO, check=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}).stdout.split()
    assert out == ["False", "True"]


# What the workflow's own process does at every start (common.smk): read the experiment, whose demo checkpoints name a
# format and an architecture checked against the code's own tables. Importing torch for them had cost 2.9 s of
# every Snakemake start, dry runs included.
PLANNER = """
import sys
import yaml
from snakemake.utils import validate
from evaluate.experiment import Experiment
from evaluate import ConfigError
config = yaml.safe_load(open("config.yaml"))
validate(config, schema="workflow/schemas/config.schema.yaml")
experiment = Experiment(config)
print("torch" in sys.modules, sorted({c.demo["architecture"] for c in experiment.checkpoints.values()}))
config["checkpoints"]["xcit-demo"]["demo"]["architecture"] = "xcit-s12-8"
try:
    Experiment(config)
except ConfigError as exc:
    print(str(exc).split(":")[1].strip(), "torch" in sys.modules)
"""


def test_the_workflow_s_own_process_checks_demo_architectures_without_importing_torch():
    out = subprocess.run([sys.executable, "-c", PLANNER], capture_output=True, text=True, cwd=REPO, check=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}).stdout.splitlines()
    assert out[0].startswith("False [") and "'vit-s16'" in out[0] and "'xcit-s12-16'" in out[0]
    assert out[1] == "checkpoints.xcit-demo.demo.architecture False"


def test_the_normalised_source_follows_each_edit_of_a_file_read_again(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(x):\n    return x + 1\n")
    first = _normalised_source(module)
    module.write_text('def f(x):\n    """Says what it does."""\n    return x + 1  # a comment\n')
    assert _normalised_source(module) == first  # docstrings and comments do not count
    module.write_text("def f(x):\n    return x + 2\n")
    assert _normalised_source(module) != first  # the same path, new text: parsed again


def test_a_code_hash_is_the_same_in_a_fresh_process():
    job = "evaluate.jobs.saliency:score_saliency"
    here = job_code_hash(job, "workflow/scripts/run_job.py")
    assert job_code_hash(job, "workflow/scripts/run_job.py") == here
    fresh = subprocess.run(
        [sys.executable, "-c", "from evaluate.plumbing.provenance import job_code_hash as h; "
                               f"print(h({job!r}, 'workflow/scripts/run_job.py'))"],
        capture_output=True, text=True, cwd=REPO, check=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    ).stdout.strip()
    assert fresh == here


def test_code_facts_are_kept_by_the_file_s_bytes_read_back_by_another_process_and_never_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    module = tmp_path / "m.py"
    module.write_text("def f(x):\n    return x + 1  # one\n")
    digest = normalised_digest(module)
    assert digest == hashlib.sha256(_normalised_source(module).encode("utf-8")).hexdigest()
    entry = kept_folder() / "normalised" / hashlib.sha256(module.read_bytes()).hexdigest()
    assert entry.is_relative_to(tmp_path / "cache") and json.loads(entry.read_text()) == {"value": digest}
    # another process reads what was kept instead of parsing: a planted value comes back
    entry.write_text(json.dumps({"value": "0" * 64}))
    read = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; from evaluate.plumbing.provenance import "
                               "normalised_digest as d; print(d(Path(sys.argv[1])))", str(module)],
        capture_output=True, text=True, cwd=REPO, check=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache")},
    ).stdout.strip()
    assert read == "0" * 64
    # an edit is new bytes, so a new entry: the kept value of the old text is never read for it
    module.write_text("def f(x):\n    return x + 2\n")
    assert normalised_digest(module) == hashlib.sha256(_normalised_source(module).encode("utf-8")).hexdigest()
    assert normalised_digest(module) not in (digest, "0" * 64)
    # a folder that cannot be written (a read-only HOME) only costs the parse
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file" / "cache"))
    module.write_text("def f(x):\n    return x + 3\n")
    assert normalised_digest(module) == hashlib.sha256(_normalised_source(module).encode("utf-8")).hexdigest()
