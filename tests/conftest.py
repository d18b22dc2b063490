"""Shared fixtures: where the real data lives, and a skip with a reason where it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

import sources
from sources import COCO_MINI
from workspace import finished_workspace


@pytest.fixture(scope="session")
def coco_mini() -> Path:
    """../shared/data/coco2017-mini beside the checkout: 79 val + 80 train real COCO photos with human masks."""
    if not (COCO_MINI / "annotations.json").is_file():
        pytest.skip(f"real data absent: {COCO_MINI} not found (it lies in ../shared beside the checkout)")
    return COCO_MINI


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
    """keys480 and tokens224 of all 159 coco2017-mini images through the seeded backbone, extracted ONCE per test
    session by the product's own `extract_shard` (float16, shards of 32 in sorted image-id order).

    Returns {"val": (CocoDataset, manifest, [shard dirs]), "train": (...)}; several test modules share it so the
    slow forward passes run once.
    """
    from evaluate.datasets.coco import CocoDataset
    from evaluate.readings.features import extract_shard

    root = tmp_path_factory.mktemp("coco_mini_features")
    out = {}
    for split, annotations_file in (("val", "annotations.json"), ("train", "annotations_train.json")):
        dataset = CocoDataset(coco_mini / "images", coco_mini / annotations_file)
        manifest = dataset.manifest(32)
        dirs = [
            extract_shard(seeded_backbone, dataset, ids, root / split / f"{n:03d}", batch_size=8, dtype="float16",
                          precision="float32", meta={"manifest_sha256": manifest["manifest_sha256"]})
            for n, ids in enumerate(manifest["shards"])
        ]
        out[split] = (dataset, manifest, dirs)
    return out


@pytest.fixture(scope="session")
def finished_template(tmp_path_factory) -> Path:
    """The root of a workspace.Workspace after a full run of its tiny experiment with one checkpoint, `a`: run
    once per session; the workflow tests each work on a copy (`Workspace(root, template=...)`)."""
    root = tmp_path_factory.mktemp("finished-template")
    finished_workspace(root)
    return root
