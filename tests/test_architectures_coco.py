"""Integration: one seeded demo checkpoint of each new architecture (in the file format the shipped demo uses)
through the product's loader and `extract_shard` on real coco2017-mini photos: shapes, dtype, finite values, row
order equal to image_ids.json, and the architecture in meta.json (skipped with a reason where ../shared is absent)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluate.networks.checkpoints import load_backbone
from evaluate.datasets.coco import CocoDataset
from evaluate.datasets.manifest import manifest_of
from evaluate.demo.checkpoints import make_demo_checkpoint
from evaluate.readings.features import FeatureReader, extract_shard

N_IMAGES = 5  # a handful of real photos of every size and aspect keeps the three extractions short


@pytest.mark.coco
@pytest.mark.parametrize(
    "architecture,fmt,head_layout",
    [("vit-s16-layerscale", "deit3", "6x64"), ("xcit-s12-16", "dino-backbone", "8x48"),
     ("augvit-s16", "dino-train", "6x64")],
)
def test_seeded_checkpoint_of_each_new_architecture_extracts_real_photos(coco_mini, tmp_path, architecture, fmt,
                                                                         head_layout):
    dataset = CocoDataset(coco_mini / "images", coco_mini / "annotations.json")
    manifest = manifest_of(dataset, N_IMAGES)
    ids = list(reversed(manifest["shards"][0]))  # not sorted: the row order must follow the given ids
    path = make_demo_checkpoint(tmp_path / f"{architecture}.pth", fmt, 3, architecture)
    loaded = load_backbone(path, which="teacher", form="backbone")
    out = extract_shard(loaded.model, dataset, ids, tmp_path / "shard", batch_size=2, dtype="float16",
                        precision="float32", meta={"checkpoint_sha256": loaded.sha256, **loaded.architecture_meta()})
    assert json.loads((out / "image_ids.json").read_text()) == ids
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["architecture"], meta["head_layout"]) == (architecture, head_layout)
    for kind, shape in (("keys480", (900, 384)), ("tokens224", (196, 384))):
        array = np.load(out / f"{kind}.npy")
        assert array.shape == (len(ids), *shape) and array.dtype == np.float16
        assert np.isfinite(array).all()
        assert (array.astype(np.float32).std(axis=1) > 0).all()  # no image's reading is constant over its patches
    reader = FeatureReader([out])
    assert reader.image_ids == ids
    # row i is image ids[i]: recompute one image alone and find it in its row
    import torch

    from evaluate.pixels.images import tokens224_input

    with torch.inference_mode():
        alone = loaded.model.tokens(tokens224_input(dataset.open_image(ids[2]))[None])[0].numpy()
    np.testing.assert_allclose(reader.tokens224(2), alone, rtol=0, atol=2e-2 * max(1.0, np.abs(alone).max()))
    assert np.abs(reader.tokens224(1) - alone).max() > 0.1
