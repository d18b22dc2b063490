"""evaluate.demo.scenes: procedural scenes with exact masks, byte-identical per seed; seeded random checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from evaluate.datasets.coco import CocoDataset
from evaluate.demo.scenes import CATEGORIES, DemoError, main, make_demo_dataset, make_scene
from evaluate.demo.checkpoints import main as checkpoint_main
from evaluate.demo.checkpoints import make_demo_checkpoint, write_safetensors

N = 12
SEED = 5


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    make_demo_dataset(out, N, SEED)
    return out


def test_same_seed_same_bytes(demo: Path, tmp_path):
    again = tmp_path / "again"
    make_demo_dataset(again, N, SEED)
    first, second = tree_bytes(demo), tree_bytes(again)
    assert sorted(first) == ["annotations.json"] + [f"images/{i:06d}.png" for i in range(1, N + 1)]
    assert first == second


def test_other_seed_or_ids_other_scenes(demo: Path, tmp_path):
    make_demo_dataset(tmp_path / "s", 3, SEED + 1)
    make_demo_dataset(tmp_path / "f", 3, SEED, first_image_id=101)
    base = tree_bytes(demo)
    assert tree_bytes(tmp_path / "s")["images/000001.png"] != base["images/000001.png"]
    ids = [img["id"] for img in json.loads((tmp_path / "f" / "annotations.json").read_text())["images"]]
    assert ids == [101, 102, 103]
    # a prefix of a larger run is the same scenes: scene i depends on (seed, id) only
    make_demo_dataset(tmp_path / "p", 2, SEED)
    assert tree_bytes(tmp_path / "p")["images/000002.png"] == base["images/000002.png"]


def test_dataset_is_valid_coco_with_varied_scenes(demo: Path):
    ds = CocoDataset(demo / "images", demo / "annotations.json")
    ds.validate_files()
    assert ds.image_ids == list(range(1, N + 1)) and ds.has_labels
    assert [(c["id"], c["name"]) for c in CATEGORIES] == [(1, "disc"), (2, "box"), (3, "wedge")]
    assert ds.category_ids == [1, 2, 3]
    landscape = portrait = crowds = occluded = 0
    used = set()
    for image_id in ds.image_ids:
        h, w = ds.image_size(image_id)
        assert 120 <= min(h, w) and max(h, w) <= 320
        landscape += w > h
        portrait += h > w
        anns = ds.instances(image_id)
        objects = [a for a in anns if not a["iscrowd"]]
        assert 1 <= len(objects) <= 4
        crowds += sum(a["iscrowd"] for a in anns)
        occluded += sum(isinstance(a["segmentation"], dict) for a in objects)
        used |= {a["category_id"] for a in anns}
        img = ds.open_image(image_id)
        assert img.size == (w, h)
    assert landscape and portrait and crowds and occluded
    assert used == {1, 2, 3}


def test_masks_are_exact(demo: Path):
    """Every annotation decodes to exactly the pixels painted for it, and the PNG holds exactly the scene."""
    ds = CocoDataset(demo / "images", demo / "annotations.json")
    for image_id in ds.image_ids:
        pixels, _, painted = make_scene(SEED, image_id)
        np.testing.assert_array_equal(np.asarray(Image.open(ds.image_path(image_id))), pixels)
        anns = ds.instances(image_id)
        objects = [a for a in anns if not a["iscrowd"]]
        for k, ann in enumerate(objects):
            mask = ds.instance_mask(ann)
            np.testing.assert_array_equal(mask, painted == k + 1)
            assert ann["area"] == mask.sum()
            ys, xs = np.nonzero(mask)
            assert ann["bbox"] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
        gt_objects, gt_crowd = ds.ground_truth(image_id)
        np.testing.assert_array_equal(gt_objects, painted > 0)
        np.testing.assert_array_equal(gt_crowd, painted == -1)
        # a painted shape really differs from its surroundings: its pixels are not the background's
        for k in range(len(objects)):
            inside = pixels[painted == k + 1].astype(float).mean(axis=0)
            assert np.abs(inside - pixels[painted == 0].astype(float).mean(axis=0)).max() > 1.0


def test_scene_hand_checks():
    pixels, anns, painted = make_scene(SEED, 1)
    assert pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[:2] == painted.shape
    for ann in anns:
        if isinstance(ann["segmentation"], list):  # fully visible: a polygon of >= 3 points inside the image
            poly = ann["segmentation"][0]
            assert len(poly) >= 6 and len(poly) % 2 == 0
            assert all(0 <= x <= pixels.shape[1] for x in poly[0::2])
            assert all(0 <= y <= pixels.shape[0] for y in poly[1::2])


@pytest.mark.badinput
@pytest.mark.parametrize("args", [(0, 1), (3, -1)])
def test_bad_demo_arguments(tmp_path, args):
    with pytest.raises(DemoError):
        make_demo_dataset(tmp_path, *args)


# ---- checkpoints ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["dino-backbone", "selfpatch-train"])
def test_demo_checkpoint_is_seeded_vit_small(tmp_path, fmt):
    from evaluate.networks.vit import vit_small
    from evaluate.networks.checkpoints import load_backbone

    before = torch.random.get_rng_state()
    path = make_demo_checkpoint(tmp_path / f"{fmt}.pth", fmt, seed=3, architecture="vit-s16")
    assert torch.equal(torch.random.get_rng_state(), before)  # the global torch RNG is left alone
    loaded = load_backbone(path, which="teacher", form="backbone")
    assert loaded.format == fmt
    torch.manual_seed(3)
    reference = vit_small().state_dict()
    state = loaded.model.state_dict()
    assert state.keys() == reference.keys()
    for key in reference:
        assert torch.equal(state[key], reference[key]), key


def test_demo_checkpoint_bytes_depend_on_seed_only(tmp_path):
    a = make_demo_checkpoint(tmp_path / "a" / "ck.pth", "backbone", 0, "vit-s16")
    b = make_demo_checkpoint(tmp_path / "b" / "ck.pth", "backbone", 0, "vit-s16")
    c = make_demo_checkpoint(tmp_path / "c" / "ck.pth", "backbone", 1, "vit-s16")
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()


def test_safetensors_files_list_their_metadata_sorted_so_their_bytes_never_vary(tmp_path):
    """safetensors itself writes the metadata in a hash map's order, which varies between writes and runs: with six
    entries, three writes in that order agree with each other and with sorted order once in 720^2 x 720."""
    import safetensors

    tensors = {"b": torch.arange(6, dtype=torch.float32).reshape(2, 3), "a": torch.ones(4, dtype=torch.int64)}
    metadata = {name: str(i) for i, name in enumerate(["format", "epoch", "zeta", "alpha", "mid", "beta"])}
    written = []
    for i in range(3):
        write_safetensors(tmp_path / f"{i}.safetensors", tensors, metadata)
        written.append((tmp_path / f"{i}.safetensors").read_bytes())
    assert written[0] == written[1] == written[2]
    length = int.from_bytes(written[0][:8], "little")
    assert list(json.loads(written[0][8 : 8 + length])["__metadata__"]) == sorted(metadata)
    with safetensors.safe_open(str(tmp_path / "0.safetensors"), "pt") as handle:  # still a valid file
        assert handle.metadata() == metadata
        assert torch.equal(handle.get_tensor("b"), tensors["b"]) and torch.equal(handle.get_tensor("a"), tensors["a"])


@pytest.mark.badinput
def test_demo_checkpoint_bad_format(tmp_path):
    with pytest.raises(DemoError, match="format"):
        make_demo_checkpoint(tmp_path / "x.pth", "timm", 0, "vit-s16")


def test_command_line(tmp_path, capsys):
    assert main([str(tmp_path / "d"), "--n", "2", "--seed", "1"]) == 0
    assert json.loads((tmp_path / "d" / "annotations.json").read_text())["info"]["seed"] == 1
    assert checkpoint_main([str(tmp_path / "c.pth"), "--format", "dino-backbone", "--seed", "2", "--architecture", "vit-s16"]) == 0
    assert (tmp_path / "c.pth").is_file()
    assert main([str(tmp_path / "e"), "--n", "0"]) == 1
    assert "n_images must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "architecture,fmt,variant",
    [("vit-s16-layerscale", "deit3", "gamma_1"), ("xcit-s12-16", "dino-backbone", "official"),
     ("augvit-s16", "dino-train", "circulant2")],
)
def test_demo_checkpoint_of_each_new_architecture_is_seeded_and_not_degenerate(tmp_path, architecture, fmt, variant):
    from evaluate.networks.registry import REGISTRY
    from evaluate.networks.checkpoints import load_backbone

    path = make_demo_checkpoint(tmp_path / f"{architecture}.pth", fmt, seed=5, architecture=architecture)
    loaded = load_backbone(path, which="teacher", form="backbone")
    assert (loaded.format, loaded.architecture, loaded.variant) == (fmt, architecture, variant)
    torch.manual_seed(5)
    reference = REGISTRY[architecture].build(variant).state_dict()
    state = loaded.model.state_dict()
    assert state.keys() == reference.keys()
    for key in reference:
        assert torch.equal(state[key], reference[key]), key
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        for reading in (loaded.model.tokens(x), loaded.model.last_keys(x)):
            assert torch.isfinite(reading).all()
            assert reading.std(dim=1).min() > 1e-3  # tokens differ from each other in every channel


def test_demo_checkpoint_bad_architecture(tmp_path):
    with pytest.raises(DemoError, match="architecture"):
        make_demo_checkpoint(tmp_path / "x.pth", "backbone", 0, architecture="cait-s24")


def test_shipped_config_has_a_demo_checkpoint_of_every_seed_architecture_a_dinov2_with_registers_and_a_dinov3():
    import yaml

    from evaluate.networks.registry import SEED_ARCHITECTURES

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config.yaml").read_text())
    demos = [entry["demo"] for entry in config["checkpoints"].values() if "demo" in entry]
    assert {demo.get("architecture", "vit-s16") for demo in demos} == {*SEED_ARCHITECTURES, "dinov2-s14-reg4", "dinov3-s16"}
