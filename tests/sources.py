"""Where the tests' inputs lie: the checkout and its shipped config, the real data sets in ../shared beside it,
and procedural demo sets.

Test modules import these by name (`from sources import COCO_MINI`); the fixtures that skip where the real data is
absent live in conftest.py.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
COCO_MINI = SHARED / "data" / "coco2017-mini"
DAVIS_MINI = SHARED / "data" / "davis2016-mini"


def shipped_config() -> dict:
    """The repository's config.yaml as shipped: a fresh dict each call (tests edit it)."""
    import yaml

    return yaml.safe_load((REPO / "config.yaml").read_text())


def demo_coco(tmp_path_factory, n_images: int, seed: int):
    """A procedural demo data set of `n_images` (`evaluate.demo.scenes.make_demo_dataset`) in a fresh folder of the
    session, opened as a CocoDataset: the module fixtures' small data set with exact masks."""
    from evaluate.datasets.coco import CocoDataset
    from evaluate.demo.scenes import make_demo_dataset

    out = tmp_path_factory.mktemp("demo")
    make_demo_dataset(out, n_images, seed=seed)
    return CocoDataset(out / "images", out / "annotations.json")
