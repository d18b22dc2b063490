"""The end-to-end tests' workspace: a copy of the code and a working folder where Snakemake runs a tiny experiment
for real (the demo's data sets and checkpoints, a two-setting sweep), and the reading of a dry run's plan."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

from sources import REPO

SNAKEMAKE = Path(sys.executable).parent / "snakemake"


def demo_set(name: str, n: int, seed: int, first: int, roles: list[str], **extra) -> dict:
    """A config entry of a demo data set of `n` images drawn with `seed`, ids from `first`, in `roles`."""
    return {
        "images": f"results/demo/datasets/{name}/images",
        "annotations": f"results/demo/datasets/{name}/annotations.json",
        "roles": roles,
        "demo": {"n_images": n, "seed": seed, "first_image_id": first},
        **extra,
    }


TINY_SHARDS = 4  # the tiny experiment's: select 1 + probe-train 1 + eval 2, one image per shard


def tiny_config(checkpoints: dict) -> dict:
    """The tiny experiment: a select and a probe-train set of one image each, a sealed eval set of two (one image
    per shard: `TINY_SHARDS` shards in all), a two-setting sweep; the attention reading off (its jobs and figures
    were a fifth of a run: test_attention_workflow turns it on)."""
    return {
        "checkpoints": checkpoints,
        "datasets": {
            "sel": demo_set("sel", 1, 1, 1, ["select"]),
            "train": demo_set("train", 1, 2, 101, ["probe-train"]),
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
        "attention": False,
    }


def checkpoint_entry(name: str, fmt: str, seed: int, epoch: int) -> dict:
    return {"path": f"results/demo/checkpoints/{name}.pth", "run": "tiny", "epoch": epoch,
            "demo": {"format": fmt, "seed": seed}}


class Workspace:
    """A copy of the code (so edits to it are safe) and a working directory with a config."""

    def __init__(self, root: Path, template: Path | None = None):
        """A fresh copy of the code and an empty work directory; with `template`, a copy of that finished
        Workspace's root instead (modification times kept; Snakemake's metadata holds relative paths only)."""
        self.code = root / "code"
        self.work = root / "work"
        if template is not None:
            shutil.copytree(template, root, symlinks=True, dirs_exist_ok=True)
            return
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
             "--configfile", str(self.work / configfile), "--cores", "2", *args],
            capture_output=True, text=True, env=env, timeout=1800,
        )
        out = proc.stdout + proc.stderr
        if check and proc.returncode != 0:
            raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{out[-6000:]}")
        return out


def openings_per_dataset(ws: Workspace, *, budget_rows: bool = False) -> Counter:
    """Rows of the workspace's openings ledger per data set: its label openings, and its budget rows with
    `budget_rows`."""
    with open(ws.work / "results" / "ledger" / "openings.csv", newline="") as handle:
        return Counter(row["dataset"] for row in csv.DictReader(handle) if budget_rows or row["purpose"] != "budget")


def stamps(folder: Path) -> dict[str, int]:
    """Every file below `folder` -> its modification time in ns (a rewritten file gets a new one)."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


def untouched(before: dict[str, int], folder: Path) -> bool:
    """Whether every file of `before` (`stamps`) is still below `folder`, not rewritten (new files aside)."""
    now = stamps(folder)
    return all(now.get(name) == stamp for name, stamp in before.items())


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
