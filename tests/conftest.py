"""Shared fixtures: where the real data lives, and a skip with a reason where it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
COCO_MINI = SHARED / "data" / "coco2017-mini"


@pytest.fixture(scope="session")
def coco_mini() -> Path:
    """../shared/data/coco2017-mini beside the checkout: 79 val + 80 train real COCO photos with human masks."""
    if not (COCO_MINI / "annotations.json").is_file():
        pytest.skip(f"real data absent: {COCO_MINI} not found (it lies in ../shared beside the checkout)")
    return COCO_MINI


def relative_error(a, b) -> float:
    """||a - b|| / ||b|| in float64 on the CPU (a, b: tensors on any device, or arrays): the precision tests' gauge."""
    import torch

    a, b = torch.as_tensor(a).double().cpu(), torch.as_tensor(b).double().cpu()
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def demo_coco(tmp_path_factory, n_images: int, seed: int):
    """A procedural demo data set of `n_images` (`evaluate.demo.scenes.make_demo_dataset`) in a fresh folder of the
    session, opened as a CocoDataset: the module fixtures' small data set with exact masks."""
    from evaluate.datasets.coco import CocoDataset
    from evaluate.demo.scenes import make_demo_dataset

    out = tmp_path_factory.mktemp("demo")
    make_demo_dataset(out, n_images, seed=seed)
    return CocoDataset(out / "images", out / "annotations.json")


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
    """The root of a test_workflow.Workspace after a full run of its tiny experiment with one checkpoint, `a`: run
    once per session; the workflow tests each work on a copy (`Workspace(root, template=...)`)."""
    from test_workflow import finished_workspace  # a test module's helper; imported here only when needed

    root = tmp_path_factory.mktemp("finished-template")
    finished_workspace(root)
    return root
