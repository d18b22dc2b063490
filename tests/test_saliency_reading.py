"""TokenCut's saliency reading (docs/design.md §16) on real photos: two davis2016-mini frames and their masks make a
small saliency set; the product's reading equals one written here from the design's text with the DENSE generalised
eigensolver (scipy.linalg.eigh), on a small seeded network in the released form (class token, final norm)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch
from PIL import Image
from scipy import ndimage

from evaluate.networks.vit import VisionTransformer
from decoders.bilateral import TOKENCUT_SOLVER, bilateral_refine
from evaluate.datasets.saliency import open_saliency_set, read_image, read_truth
from evaluate.saliency.measures import image_scores, tokencut_measures
from evaluate.readings.saliency import read_saliency_set, tokencut_size

from videos import davis_mini

FRAMES = (("blackswan", "00000"), ("motocross-jump", "00010"))
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def link_davis_frames(out):
    """`out`/images/<sequence>.jpg and `out`/masks/<sequence>.png: links to real DAVIS-2016 frames and their masks
    (FRAMES), a saliency set of real photos; returns `out`."""
    root = davis_mini()
    (out / "images").mkdir(parents=True)
    (out / "masks").mkdir()
    for sequence, frame in FRAMES:
        (out / "images" / f"{sequence}.jpg").symlink_to(root / "JPEGImages" / "480p" / sequence / f"{frame}.jpg")
        (out / "masks" / f"{sequence}.png").symlink_to(root / "Annotations" / "480p" / sequence / f"{frame}.png")
    return out


@pytest.fixture(scope="module")
def davis_saliency_set(tmp_path_factory):
    """The saliency set of `link_davis_frames`."""
    out = link_davis_frames(tmp_path_factory.mktemp("davis-saliency"))
    return open_saliency_set(images=out / "images", masks=out / "masks")


@pytest.fixture(scope="module")
def released_network():
    """A seeded 2-block, 64-wide ViT/16 with a class token and a final norm: the released form's parts."""
    torch.manual_seed(0)
    network = VisionTransformer(patch_size=16, embed_dim=64, depth=2, num_heads=1, mlp_hidden=128,
                                class_token=True, final_norm=True).eval()
    with torch.no_grad():  # DINO's init leaves the table near zero; a visible one makes the grid matter
        network.pos_embed.normal_(0, 0.5)
    return network


def reference_mask(network, img: Image.Image) -> np.ndarray:
    """The design's text, step by step: LANCZOS to (round(W/16) 16, round(H/16) 16); / 255, mean, std; the last
    block's patch keys; TokenCut's graph with the dense generalised eigensolver; the seed's 4-connected component;
    nearest (floor(i * in / out)) to H x W."""
    w, h = img.size
    gw, gh = round(w / 16), round(h / 16)
    resized = np.asarray(img.resize((gw * 16, gh * 16), Image.Resampling.LANCZOS), dtype=np.uint8)
    x = (resized.astype(np.float32) / np.float32(255) - MEAN) / STD
    with torch.no_grad():
        keys = network.last_keys(torch.from_numpy(x).permute(2, 0, 1)[None])[0].double().numpy()
    f = keys / np.linalg.norm(keys, axis=1, keepdims=True)
    a = f @ f.T
    a = np.where(a > 0.2, 1.0, 1e-5)
    d = np.diag(a.sum(axis=1))
    _, vectors = scipy.linalg.eigh(d - a, d, subset_by_index=[1, 1])  # the second smallest, dense LAPACK
    v = vectors[:, 0]
    foreground = v > v.mean()
    seed = int(np.argmax(np.abs(v)))
    if not foreground[seed]:
        foreground = ~foreground
    labels, _ = ndimage.label(foreground.reshape(gh, gw))  # 4-connected: scipy's default structure
    component = labels == labels.flat[seed]
    rows = (np.arange(h) * gh) // h
    cols = (np.arange(w) * gw) // w
    return component[rows[:, None], cols[None, :]].astype(np.uint8)


@pytest.mark.slow
def test_the_reading_equals_the_designs_text_with_the_dense_eigensolver(davis_saliency_set, released_network):
    readings = read_saliency_set(released_network, davis_saliency_set.pairs, bilateral=TOKENCUT_SOLVER)
    assert len(readings) == len(FRAMES)
    for pair, reading in zip(davis_saliency_set.pairs, readings):
        img = read_image(pair)
        assert reading.grid == (30, 53)  # 480 / 16 and round(854 / 16) = round(53.375)
        expected = reference_mask(released_network, img)
        assert 0 < expected.sum() < expected.size  # a real cut, not an empty or full map
        np.testing.assert_array_equal(reading.mask, expected)
        refined = bilateral_refine(np.asarray(img), expected)
        assert reading.refined.tobytes() == refined.tobytes()
        assert reading.refined.dtype == np.float64 and not np.array_equal(reading.refined, expected)
    truths = [read_truth(p) for p in davis_saliency_set.pairs]
    before = tokencut_measures(image_scores([r.mask for r in readings], truths), resamples=20, seed=0)
    after = tokencut_measures(image_scores([r.refined for r in readings], truths), resamples=20, seed=0)
    for values in (before, after):
        assert all(0.0 <= v.value <= 100.0 for v in values.values())


def test_the_input_size_rounds_each_side_to_the_nearest_patch_multiple_halves_to_even():
    assert tokencut_size(854, 480, 16) == (848, 480)
    assert tokencut_size(400, 300, 16) == (400, 304)
    assert tokencut_size(408, 296, 16) == (416, 288)  # 25.5 -> 26 and 18.5 -> 18: Python's round
    assert tokencut_size(400, 300, 14) == (406, 294)
