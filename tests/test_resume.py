"""A killed run resumes to identical bytes, and a run writes nothing outside its own output folders (issue 6).

- SIGKILL during extraction: a real `snakemake` run of the features target is started in its own process group and
  the whole group is killed while an extract job is writing; `snakemake --unlock` (Snakemake's own answer to the
  lock a kill leaves) and a rerun (the local profile sets --rerun-incomplete) give every shard's keys480.npy,
  tokens224.npy, image_ids.json and meta.json byte-identical to an uninterrupted run in another folder, and leave no
  `.tmp-*` file behind.
- A scoring job killed while it holds a data set's labels leaves an in-flight reservation; the next opening turns it
  into exactly one `!interrupted` openings row (no duplicate, none missing, counted against the budget).
- The uninterrupted run reads a checkpoint and a data set that lie outside its working directory and writes only
  under results/, logs/, benchmarks/ and .snakemake/ of that directory (HOME and TMPDIR pointed into the test's
  folder too, so a stray cache or temporary file would show).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import badinputs as bi
from evaluate.ledger import BudgetExceeded
from evaluate.ledger.openings import opening, openings_path, read_openings, verify_openings

SHARD_FILES = ("keys480.npy", "tokens224.npy", "image_ids.json", "meta.json")
ALLOWED_OUTPUT_DIRS = ("results", "logs", "benchmarks", ".snakemake")
# What is kept in the user's cache, not the workflow's outputs: Snakemake's source cache (folders only),
# matplotlib's font list, built once per HOME when the figures are drawn, and the code hashes' parsed facts
# (`evaluate.plumbing.provenance.kept_folder`).
LIBRARY_CACHES = ("home/.cache/snakemake/", "home/.cache/matplotlib/fontlist-", "home/.cache/labelfree-seg-eval/")


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """relative path -> (size, mtime_ns, mode) of every file and folder under `root`."""
    out = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        out[str(path.relative_to(root))] = (st.st_size if path.is_file() else 0, st.st_mtime_ns, st.st_mode)
    return out


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """A checkpoint and three small data sets OUTSIDE the working folders: `sel` (select, 1 image), `train`
    (probe-train, 1 image) and `photos` (eval, 3 images; shard_size 2, so shard 000 holds two and 001 one)."""
    root = tmp_path_factory.mktemp("resume")
    inputs = root / "inputs"
    checkpoint = bi.save_state(inputs / "checkpoints" / "vits16.pth", bi.vit_state(seed=5))
    datasets = {}
    for name, role, n, first in (("sel", "select", 1, 1), ("train", "probe-train", 1, 101), ("photos", "eval", 3, 201)):
        images, annotations = bi.write_coco(inputs / name, n_images=n, height=72, width=96, ext="jpg", first_id=first)
        datasets[name] = {"images": str(images), "annotations": str(annotations), "roles": [role]}
    home, tmp = root / "home", root / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_CONFIG_HOME": str(home / ".config")}
    env.pop("MPLCONFIGDIR", None)
    return {"root": root, "inputs": inputs, "checkpoints": {"vits16": {"path": str(checkpoint), "run": "r", "epoch": 1}},
            "datasets": datasets, "env": env, "home": home, "tmp": tmp}


FEATURES = {"shard_size": 2, "batch_size": 1, "dtype": "float16", "device": "cpu", "threads": 1}


@pytest.fixture(scope="module")
def clean_run(experiment):
    """The whole workflow (default target: features, decoder sweep and scores, probe, ledger, tables, figures),
    uninterrupted, in root/A, with a listing of the whole test folder before and after."""
    root, work = experiment["root"], experiment["root"] / "A"
    bi.write_config(work, experiment["checkpoints"], experiment["datasets"], features=FEATURES)
    before = snapshot(root)
    result = bi.run_snakemake(work, env=experiment["env"])
    after = snapshot(root)
    assert result.returncode == 0, result.stdout
    return {"work": work, "before": before, "after": after, "out": result.stdout}


def shard_dirs(work: Path) -> list[Path]:
    """The feature shard folders of the checkpoint on `photos`, in order."""
    return sorted((work / "results" / "features" / "vits16" / "photos").glob("[0-9][0-9][0-9]"))


@pytest.mark.slow
def test_a_run_writes_only_under_its_output_folders(experiment, clean_run):
    before, after = clean_run["before"], clean_run["after"]
    changed = sorted(p for p in after if p not in before or after[p] != before[p])
    removed = sorted(p for p in before if p not in after)
    assert not removed, removed
    assert changed, "the run wrote nothing at all"
    allowed = [f"A/{d}" for d in ALLOWED_OUTPUT_DIRS]
    outside = [p for p in changed
               if p != "A" and not any(p == a or p.startswith(a + "/") for a in allowed)
               and not (experiment["root"] / p).is_dir()  # folders: HOME's cache folders, TMPDIR's mtime
               and not p.startswith(LIBRARY_CACHES)]
    assert not outside, f"written outside results/, logs/, benchmarks/, .snakemake/: {outside}"
    # the inputs outside the working folder were read, not touched; no file was left in TMPDIR
    assert not [p for p in changed if p.startswith("inputs")]
    assert not list(experiment["tmp"].iterdir()), list(experiment["tmp"].iterdir())
    # and the run did produce every stage's outputs where they belong
    work = clean_run["work"]
    assert [d.name for d in shard_dirs(work)] == ["000", "001"]
    assert all(f"A/results/features/vits16/photos/{s}/{n}" in changed for s in ("000", "001") for n in SHARD_FILES)
    for output in ("results/decoder/selected.yaml", "results/decoder/masks/vits16/photos.json",
                   "results/ledger/records/decoder/vits16/photos.json", "results/ledger/records/probe/vits16/photos.json",
                   "results/ledger/openings.csv", "results/ledger/scores.csv", "results/tables", "results/figures",
                   "logs/extract/vits16/photos/000.log"):
        assert f"A/{output}" in changed, output
    assert sorted(os.listdir(work)) == sorted(["config.yaml", *ALLOWED_OUTPUT_DIRS])


def _difference(ref: Path, got: Path) -> str:
    """Why two shard files differ, as far as a JSON file can say (meta.json records the code version)."""
    if ref.suffix != ".json":
        return f"{got} differs from {ref}"
    a, b = json.loads(ref.read_text()), json.loads(got.read_text())
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)) if isinstance(a, dict) else []
    hint = " (evaluate/ or decoders/ was edited between the two runs)" if keys == ["code_version"] else ""
    return f"{got} differs from {ref} in {keys}{hint}"


@pytest.mark.slow
def test_sigkill_during_extraction_resumes_to_identical_bytes(experiment, clean_run):
    work = experiment["root"] / "B"  # the features of `photos` alone: what the kill interrupts
    bi.write_config(work, experiment["checkpoints"], {"photos": experiment["datasets"]["photos"]}, features=FEATURES)
    features = work / "results" / "features"
    console = experiment["root"] / "B-killed-run.out"  # a file, not a pipe: nothing can block the run
    with open(console, "w") as out:
        proc = subprocess.Popen(bi.snakemake_command(work, "features"), stdout=out, stderr=subprocess.STDOUT,
                                cwd=work, env=experiment["env"],
                                start_new_session=True)  # its own process group: snakemake and every job it starts
    try:
        while not (features.is_dir() and list(features.rglob(".tmp-keys480.npy.*"))):
            assert proc.poll() is None, "snakemake ended before any extract job started:\n" + console.read_text()
            time.sleep(0.05)
        time.sleep(0.5)  # let it get into the images: the memory-mapped arrays are half written
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    while True:  # every job of the group is gone before the rerun starts
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)

    # the kill hit an extraction: temporary files, no completed shard marker where they lie
    interrupted = sorted({p.parent for p in features.rglob(".tmp-*")})
    assert interrupted, "no extraction was interrupted"
    assert not any((d / "meta.json").exists() for d in interrupted)

    # a killed Snakemake leaves its lock: the rerun says how to remove it; then it resumes
    locked = bi.run_snakemake(work, "features", env=experiment["env"])
    assert locked.returncode != 0 and "--unlock" in locked.stdout, locked.stdout
    unlock = bi.run_snakemake(work, extra=["--unlock"], env=experiment["env"])
    assert unlock.returncode == 0, unlock.stdout
    rerun = bi.run_snakemake(work, "features", env=experiment["env"])
    assert rerun.returncode == 0, rerun.stdout

    assert not list(work.rglob(".tmp-*")), list(work.rglob(".tmp-*"))
    reference = shard_dirs(clean_run["work"])
    resumed = shard_dirs(work)
    assert [d.name for d in resumed] == [d.name for d in reference] == ["000", "001"]
    for ref, got in zip(reference, resumed):
        for name in SHARD_FILES:
            assert (got / name).read_bytes() == (ref / name).read_bytes(), _difference(ref / name, got / name)
    manifest = Path("results") / "datasets" / "photos" / "manifest.json"
    assert (work / manifest).read_bytes() == (clean_run["work"] / manifest).read_bytes()


# ------------------------------------------------------------------------------------------ ledger: killed opening

_HOLD_LABELS_OPEN = """
import sys, time
from pathlib import Path
from evaluate.ledger.openings import opening
ledger, flag = sys.argv[1], Path(sys.argv[2])
with opening(ledger, dataset="val", role="eval", purpose="eval", checkpoint="ckpt-killed", setting="tau=0.2",
             n_images=3, annotations_sha256="ab" * 32, sealed=True, budget=2) as op:
    flag.write_text("labels open")
    time.sleep(3600)  # killed here, while scoring
"""


def _open(ledger: Path, checkpoint: str) -> None:
    with opening(ledger, dataset="val", role="eval", purpose="eval", checkpoint=checkpoint, setting="tau=0.2",
                 n_images=3, annotations_sha256="ab" * 32, sealed=True, budget=2) as op:
        op.result_sha256 = "cd" * 32


def test_killed_scoring_job_leaves_exactly_one_interrupted_row(tmp_path):
    ledger, flag = tmp_path / "ledger", tmp_path / "labels-open"
    console = tmp_path / "scoring-job.out"
    with open(console, "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", _HOLD_LABELS_OPEN, str(ledger), str(flag)], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while not flag.exists():
            assert proc.poll() is None, console.read_text()
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    reservations = list((ledger / "inflight").glob("*.json"))
    assert len(reservations) == 1, "the killed job left no in-flight reservation"
    assert [r["purpose"] for r in read_openings(openings_path(ledger))] == ["budget"]

    _open(ledger, "ckpt-next")  # the next opening on this host finds the dead reservation
    rows = read_openings(openings_path(ledger))
    assert [(r["purpose"], r["checkpoint"], r["setting"], r["result_sha256"]) for r in rows] == [
        ("budget", "ckpt-killed", "budget=2", ""),
        ("eval", "ckpt-killed", "tau=0.2!interrupted", ""),
        ("eval", "ckpt-next", "tau=0.2", "cd" * 32),
    ]
    assert [r["seq"] for r in rows] == ["1", "2", "3"]
    assert not list((ledger / "inflight").glob("*.json"))
    assert verify_openings(openings_path(ledger)) == 3

    # the interrupted opening counts against the budget (labels may have been read), and is not added twice
    with pytest.raises(BudgetExceeded, match=r"'val' is sealed with budget 2 .* opened 2 time\(s\).*datasets\.val\.budget"):
        _open(ledger, "ckpt-third")
    rows = read_openings(openings_path(ledger))
    assert len(rows) == 3 and sum(r["setting"].endswith("!interrupted") for r in rows) == 1
