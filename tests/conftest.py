"""Shared fixtures: where the real data lives, and a skip with a reason where it does not.

`make test` spreads the suite over pytest-xdist's workers by module (`-n auto --dist loadscope`), so a module's
module-scoped fixtures run once; the session fixtures that take a minute or more (`built_once`) are built by the
first worker that needs them and read by the others."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Callable

# One thread of torch, OpenMP and BLAS per xdist worker (before any of them loads): `make test` runs a worker per
# core, so a worker's second thread only waits for a core the other worker holds, and torch's and the BLAS
# libraries' idle threads spin while they wait. The Snakemake jobs a test starts inherit it; each sets its rule's
# torch threads itself. A value the caller set is kept.
if os.environ.get("PYTEST_XDIST_WORKER") is not None:
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(variable, "1")

import pytest  # noqa: E402

import sources  # noqa: E402
from sources import COCO_MINI  # noqa: E402
from workspace import finished_workspace  # noqa: E402


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder `build(folder)` filled once per test session, whatever the number of xdist workers: the first worker
    to ask builds it under a lock in the session's shared temporary folder, the others wait for it or find it done.
    A build that fails leaves no mark, so the next worker to ask builds it again."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent
    folder, done = shared / name, shared / f"{name}.built"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def coco_mini() -> Path:
    """../shared/data/coco2017-mini beside the checkout: 79 val + 80 train real COCO photos with human masks."""
    if not (COCO_MINI / "annotations.json").is_file():
        pytest.skip(f"real data absent: {COCO_MINI} not found (it lies in ../shared beside the checkout)")
    return COCO_MINI


@pytest.fixture(scope="session")
def two_photos(coco_mini) -> list:
    """The first two real coco2017-mini photos by file name, RGB PIL images (the network parity tests' inputs)."""
    from evaluate.pixels.images import open_rgb

    return [open_rgb(path) for path in sorted((coco_mini / "images").glob("*.jpg"))[:2]]


@pytest.fixture()
def shipped_config() -> dict:
    """The repository's config.yaml as shipped (`sources.shipped_config`), fresh for each test."""
    return sources.shipped_config()


@pytest.fixture(scope="session")
def seeded_backbone():
    """vit_small with torch.manual_seed(0) initialisation, eval mode: the tests' 'seeded backbone'."""
    import torch

    from evaluate.networks.vit import vit_small

    torch.manual_seed(0)
    return vit_small().eval()


@pytest.fixture(scope="session")
def coco_mini_features(coco_mini, seeded_backbone, tmp_path_factory) -> dict:
    """keys480 and tokens224 of the 79 coco2017-mini val images through the seeded backbone, extracted ONCE per test
    session by the product's own `extract_shard` (float16, shards of 32 in sorted image-id order).

    Returns {"val": (CocoDataset, manifest, [shard dirs])}; several test modules share it so the slow forward passes
    run once (the train split's 80 images are left out: every test that reads features finds what it needs in val).
    """
    from evaluate.datasets.coco import CocoDataset
    from evaluate.datasets.manifest import manifest_of
    from evaluate.readings.features import extract_shard

    splits = {"val": "annotations.json"}
    datasets = {split: CocoDataset(coco_mini / "images", coco_mini / name) for split, name in splits.items()}
    manifests = {split: manifest_of(dataset, 32) for split, dataset in datasets.items()}

    def extract(root: Path) -> None:
        for split, dataset in datasets.items():
            manifest = manifests[split]
            for n, ids in enumerate(manifest["shards"]):
                extract_shard(seeded_backbone, dataset, ids, root / split / f"{n:03d}", batch_size=8,
                              dtype="float16", precision="float32", meta={"manifest_sha256": manifest["manifest_sha256"]})

    root = built_once(tmp_path_factory, "coco_mini_features", extract)
    out = {}
    for split, dataset in datasets.items():
        manifest = manifests[split]
        out[split] = (dataset, manifest, [root / split / f"{n:03d}" for n in range(len(manifest["shards"]))])
    return out


@pytest.fixture(scope="session")
def finished_template(tmp_path_factory) -> Path:
    """The root of a workspace.Workspace after a full run of its tiny experiment with one checkpoint, `a`: run
    once per session; the workflow tests each work on a copy (`Workspace(root, template=...)`)."""
    return built_once(tmp_path_factory, "finished-template", finished_workspace)


@pytest.fixture(scope="session", autouse=True)
def matplotlib_cache(tmp_path_factory):
    """One matplotlib configuration folder for the session's workflow runs: a job keeps its font list in the working
    folder's .snakemake/ (`evaluate.jobs.run_job`) unless MPLCONFIGDIR names one, and building it costs seconds in
    every new working folder. Tests that watch what a run writes set their own environment."""
    folder = tmp_path_factory.mktemp("matplotlib")
    previous = os.environ.get("MPLCONFIGDIR")
    os.environ["MPLCONFIGDIR"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("MPLCONFIGDIR", None)
    else:
        os.environ["MPLCONFIGDIR"] = previous
