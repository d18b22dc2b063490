"""The tokens320 reading (evaluate.pixels.tokens320, evaluate.readings.tokens320): the geometry, PIL's nearest rule
against the naive floor((i + 0.5) r) where the two differ, the normalisation, and a seeded network's tokens."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

from evaluate.networks.vit import VisionTransformer
from evaluate.readings.features import FeatureError
from evaluate.pixels.geometry import Geometry
from evaluate.readings.tokens320 import network_input, read_tokens320, tokens320_grid
from evaluate.pixels.tokens320 import (
    tokens320_geometry,
    tokens320_input,
    tokens320_labels,
    tokens320_pixels,
    tokens320_side,
)

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def pil_nearest_index(n_in: int, n_out: int) -> np.ndarray:
    """DESIGN 16's description of PIL's NEAREST: source index int(x_i), x_0 = r / 2, x_(i+1) = x_i + r, in float64."""
    r = n_in / n_out
    x, out = r / 2, []
    for _ in range(n_out):
        out.append(int(x))
        x += r
    return np.array(out)


def floor_index(n_in: int, n_out: int) -> np.ndarray:
    """The naive rule floor((i + 0.5) r)."""
    r = n_in / n_out
    return np.array([math.floor((i + 0.5) * r) for i in range(n_out)])


def reference_square(array: np.ndarray, side: int, index) -> np.ndarray:
    """Short side to `side` (long side int(side * long / short)) by `index`, then the centre crop at Python's round."""
    h, w = array.shape[:2]
    new_w, new_h = (side, int(side * h / w)) if w <= h else (int(side * w / h), side)
    resized = array[index(h, new_h)][:, index(w, new_w)]
    left, top = round((new_w - side) / 2), round((new_h - side) / 2)
    return resized[top: top + side, left: left + side]


def test_the_side_is_the_patch_multiple_at_or_above_320():
    assert [tokens320_side(p) for p in (8, 14, 16)] == [320, 322, 320]
    assert [tokens320_grid(p) for p in (8, 14, 16)] == [40, 23, 20]


@pytest.mark.parametrize("size, expected", [
    ((640, 480), (426, 320, 53, 0)),
    ((480, 640), (320, 426, 0, 53)),
    ((2048, 1024), (640, 320, 160, 0)),  # a Cityscapes frame: its middle 1024 x 1024 is scored
    ((200, 200), (320, 320, 0, 0)),  # a Potsdam tile is enlarged
    ((427, 640), (320, 479, 0, 80)),  # round(79.5) = 80 (Python's round, halves to even)
])
def test_the_geometry_resizes_the_short_side_and_centres_the_crop(size, expected):
    assert tokens320_geometry(*size, 320) == expected


def test_labels_follow_pils_nearest_not_the_floor_rule_where_the_two_differ():
    """640 x 480 at 320: the long side 640 -> 426, where PIL's running sum picks column 159 for output column 106
    and floor((106 + 0.5) * 640 / 426) = 160; the label map is PIL's, to the pixel."""
    assert pil_nearest_index(640, 426)[106] == 159 and floor_index(640, 426)[106] == 160
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 27, size=(480, 640)).astype(np.uint8)
    ours = tokens320_labels(labels, 320)
    assert ours.shape == (320, 320) and ours.dtype == np.uint8
    assert np.array_equal(ours, reference_square(labels, 320, pil_nearest_index))
    naive = reference_square(labels, 320, floor_index)
    assert not np.array_equal(ours, naive)
    assert np.flatnonzero((ours != naive).any(axis=0)).tolist() == [106 - 53]


def test_the_image_takes_the_labels_very_resize_and_crop():
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, size=(300, 500, 3)).astype(np.uint8)
    square = tokens320_pixels(Image.fromarray(pixels), 320)
    assert np.array_equal(square, reference_square(pixels, 320, pil_nearest_index))
    for channel in range(3):
        assert np.array_equal(square[..., channel], tokens320_labels(pixels[..., channel], 320))


def test_the_input_is_imagenet_normalised():
    rng = np.random.default_rng(2)
    pixels = rng.integers(0, 256, size=(330, 350, 3)).astype(np.uint8)
    x = tokens320_input(Image.fromarray(pixels), 14)
    square = reference_square(pixels, 322, pil_nearest_index).astype(np.float32) / np.float32(255)
    expected = (square - np.array(MEAN, np.float32)) / np.array(STD, np.float32)
    assert x.shape == (3, 322, 322) and x.dtype == torch.float32
    np.testing.assert_allclose(x.numpy(), expected.transpose(2, 0, 1), atol=1e-6)


def test_non_rgb_images_and_label_maps_of_another_type_are_refused():
    with pytest.raises(ValueError, match="RGB"):
        tokens320_pixels(Image.new("L", (40, 40)), 320)
    with pytest.raises(ValueError, match="uint8"):
        tokens320_labels(np.zeros((40, 40), dtype=np.int32), 320)


# ------------------------------------------------------------------------------------ a seeded network's tokens


def released_network(patch: int, width: int = 64) -> VisionTransformer:
    """A one-block ViT in the released form (class token, final norm), seeded; `geometry` as the registry sets it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        network = VisionTransformer(patch_size=patch, embed_dim=width, depth=1, num_heads=1, mlp_hidden=4 * width,
                                    pos_grid=224 // patch if 224 % patch == 0 else 16, class_token=True,
                                    final_norm=True).eval()
    network.geometry = Geometry(patch=patch, width=width, depth=1)
    return network


@pytest.mark.parametrize("patch", [16, 14])
def test_the_reading_is_the_final_norms_patch_rows_of_the_square(patch):
    """(g * g, D) float32: the released forward written out here (class token and its position row, the block, the
    final norm, the class row dropped) on the normalised square."""
    network = released_network(patch)
    rng = np.random.default_rng(3)
    img = Image.fromarray(rng.integers(0, 256, size=(250, 410, 3)).astype(np.uint8))
    tokens = read_tokens320(network, img)
    g = tokens320_grid(patch)
    assert tokens.shape == (g * g, 64) and tokens.dtype == np.float32
    x = network_input(img, patch).unsqueeze(0)
    assert x.shape == (1, 3, g * patch, g * patch)
    with torch.inference_mode():
        z = network.patch_embed(x) + network.pos_embed_for((g, g))
        z = torch.cat([network.cls_token + network.pos_embed[:, :1], z], dim=1)
        z = network.norm(network.blocks[0](z))[0, 1:]
    np.testing.assert_allclose(tokens, z.numpy(), atol=1e-5)


def test_a_network_giving_another_grid_is_refused():
    network = released_network(16)
    network.geometry = Geometry(patch=16, width=32, depth=1)  # says 32 wide, gives 64
    with pytest.raises(FeatureError, match="20 x 20 grid of width 32"):
        read_tokens320(network, Image.new("RGB", (330, 330)))
