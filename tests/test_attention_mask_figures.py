"""Class-token attention mask figures from the record alone (DESIGN 15; docs/design.md §17): the same record gives
the same bytes, a sealed set's record (no truth) still draws its masks, and the pixels drawn are the record's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from evaluate.attention.masks import KIND, score_set
from evaluate.datasets.voc_segmentation import VocSegmentation
from evaluate.demo.segmentation import make_demo_voc_segmentation
from evaluate.networks import vit
from evaluate.outputs.attention_mask_figures import attention_mask_figures, entry_maps
from evaluate.readings.cls_attention import read_class_attention
from evaluate.pixels.geometry import Geometry


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """(data set, unsealed record, sealed record) of a seeded DINO-form ViT (patch 16, 2 heads, 2 blocks) on five
    demo scenes written as a VOC segmentation split."""
    root = make_demo_voc_segmentation(tmp_path_factory.mktemp("demo-voc"), n_images=5, seed=0)
    dataset = VocSegmentation(root)
    torch.manual_seed(0)
    model = vit.vision_transformer(Geometry(16, 128, 2, 0), "plain", pos_grid=14, class_token=True,
                                   final_norm=True).eval()
    readings = [(i, 16, read_class_attention(model, dataset.open_image(i)).attention) for i in dataset.image_ids]
    records = []
    for sealed in (False, True):
        measures, fields = score_set(dataset, readings, sealed=sealed, resamples=100, seed=0)
        records.append({"kind": KIND, "checkpoint": "dino-demo", "dataset": "demo-voc" + ("-sealed" if sealed else ""),
                        "measures": measures, **fields})
    return dataset, records[0], records[1]


def test_the_figures_are_written_with_the_same_bytes_each_time(scored, tmp_path):
    _, record, _ = scored
    first = attention_mask_figures([record], tmp_path / "a", overlay_images=3)
    second = attention_mask_figures([record], tmp_path / "b", overlay_images=3)
    assert [p.name for p in first] == ["attention-masks_dino-demo_demo-voc.png",
                                       "attention-mask-heads_dino-demo_demo-voc.png"]
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes()
        assert a.with_suffix(".pdf").read_bytes() == b.with_suffix(".pdf").read_bytes()
        with Image.open(a) as img:
            assert img.format == "PNG" and img.width > 200 and img.height > 200


def test_a_sealed_record_draws_its_masks_without_a_truth(scored, tmp_path):
    _, record, sealed = scored
    assert all("truth_rle" in e for e in record["figure_images"])
    assert not any("truth_rle" in e for e in sealed["figure_images"])
    open_files = attention_mask_figures([record], tmp_path / "open", overlay_images=2)
    sealed_files = attention_mask_figures([sealed], tmp_path / "sealed", overlay_images=2)
    assert len(sealed_files) == 2
    for a, b in zip(open_files, sealed_files):
        pixels_a = np.asarray(Image.open(a).convert("RGB"), dtype=np.int16)
        pixels_b = np.asarray(Image.open(b).convert("RGB"), dtype=np.int16)
        assert pixels_a.shape == pixels_b.shape and np.abs(pixels_a - pixels_b).max() > 0  # the white outlines


def test_the_maps_drawn_are_the_images_crop_and_the_records_masks(scored):
    dataset, record, sealed = scored
    for entry in record["figure_images"]:
        rgb, masks, truths = entry_maps(entry)
        gh, gw = entry["grid"]
        image_id = dataset.names.index(entry["name"]) + 1
        want = np.asarray(dataset.open_image(image_id))[: 16 * gh, : 16 * gw]
        assert np.array_equal(rgb, want) and masks.shape == (2, 16 * gh, 16 * gw)
        grid_masks = np.array([[[c == "1" for c in row] for row in head] for head in entry["masks"]])
        assert np.array_equal(masks[:, ::16, ::16], grid_masks)
        objects = dataset.labels(image_id).objects[: 16 * gh, : 16 * gw]
        assert sorted(truths) == entry["objects"]
        for k, object_id in enumerate(entry["objects"]):
            assert np.array_equal(truths[object_id], objects == object_id)
            best = masks[entry["best_head"][k]]
            j = (best & truths[object_id]).sum() / (best | truths[object_id]).sum()
            assert j == pytest.approx(entry["best_jaccard"][k], abs=1e-12)
    assert entry_maps(sealed["figure_images"][0])[2] is None


def test_records_of_other_kinds_or_without_figure_images_give_no_figure(scored, tmp_path):
    _, record, _ = scored
    assert attention_mask_figures([{**record, "kind": "saliency"}], tmp_path, overlay_images=3) == []
    assert attention_mask_figures([{**record, "figure_images": []}], tmp_path, overlay_images=3) == []
