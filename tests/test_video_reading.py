"""The frames480 reading and PIL's nearest-neighbour rule for label maps (docs/design.md §12)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from videos import davis_mini

from evaluate.readings.frames import (
    VIDEO_MEAN,
    VIDEO_STD,
    frames480_input,
    frames480_pixels,
    frames480_size,
    nearest_indices,
    resize_nearest,
)


def test_frames480_size_rounds_the_long_side_down_to_64_as_dino():
    assert frames480_size(854, 480, 480) == (832, 480)  # DAVIS 480p: a 30 x 52 grid
    assert frames480_size(480, 854, 480) == (480, 832)  # portrait: the width is the short side
    assert frames480_size(1920, 1080, 480) == (832, 480)  # 853.3 -> 832
    assert frames480_size(854, 480, 96) == (128, 96)  # 170.8 -> 128
    assert frames480_size(1000, 480, 480) == (960, 480)  # 1000 -> 960


def test_frames480_size_keeps_a_square_frame_square():
    # DINO's rule alone would give 448 x 480 (480 rounded down to 64); the contract says height x height
    assert frames480_size(500, 500, 480) == (480, 480)
    assert frames480_size(500, 480, 480) == (480, 480)  # nearly square: never shorter than the short side
    assert frames480_size(100, 60, 64) == (64, 64)


@pytest.mark.parametrize("height", [0, 100, -16, 47.5])
def test_frames480_size_refuses_a_height_that_is_not_a_multiple_of_16(height):
    with pytest.raises(ValueError, match="multiple of 16"):
        frames480_size(854, 480, height)


def test_frames480_of_a_davis_frame_is_832_by_480_a_30_by_52_grid():
    root = davis_mini()
    frame = root / "JPEGImages" / "480p" / "blackswan" / "00000.jpg"
    x = frames480_input(Image.open(frame).convert("RGB"), 480)
    assert x.shape == (3, 480, 832) and x.dtype == torch.float32
    assert (x.shape[1] // 16, x.shape[2] // 16) == (30, 52)


def _bilinear_reference(pixels: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Half-pixel-centre bilinear without antialiasing, float64, from the textbook formula (OpenCV's INTER_LINEAR):
    source coordinate (i + 0.5) * in / out - 0.5, clamped to the image; returns float64 (out_h, out_w, 3)."""
    def axis(n_in, n_out):
        src = np.maximum((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0.0)
        lo = np.minimum(np.floor(src).astype(int), n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, src - lo

    r0, r1, fr = axis(pixels.shape[0], out_h)
    c0, c1, fc = axis(pixels.shape[1], out_w)
    p = pixels.astype(np.float64)
    top = p[r0][:, c0] * (1 - fc)[None, :, None] + p[r0][:, c1] * fc[None, :, None]
    bottom = p[r1][:, c0] * (1 - fc)[None, :, None] + p[r1][:, c1] * fc[None, :, None]
    return top * (1 - fr)[:, None, None] + bottom * fr[:, None, None]


def test_frames480_pixels_are_bilinear_with_half_pixel_centres_and_no_antialiasing():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(120, 214, 3), dtype=np.uint8)  # read at 96: shrunk to 128 x 96
    img = Image.fromarray(pixels)
    out = frames480_pixels(img, 96)
    new_w, new_h = frames480_size(214, 120, 96)
    assert out.shape == (new_h, new_w, 3) and out.dtype == np.uint8
    reference = _bilinear_reference(pixels, new_h, new_w)
    expected = np.round(reference)  # half to even, as the product
    near_half = np.abs(reference - np.floor(reference) - 0.5) < 1e-3  # float32 and float64 may round these apart
    assert np.array_equal(out[~near_half], expected[~near_half].astype(np.uint8))
    assert np.abs(out.astype(int) - expected.astype(int)).max() <= 1
    # PIL's BILINEAR antialiases when shrinking, so it is a different reading: make sure we are not it
    pil = np.asarray(img.resize((new_w, new_h), Image.Resampling.BILINEAR))
    assert np.abs(pil.astype(int) - out.astype(int)).max() > 8


def test_frames480_pixels_agree_with_opencv_inter_linear_within_its_fixed_point_rounding():
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (a test-only cross-check)")
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, size=(240, 427, 3), dtype=np.uint8)
    out = frames480_pixels(Image.fromarray(pixels), 240)
    theirs = cv2.resize(pixels, (out.shape[1], out.shape[0]), interpolation=cv2.INTER_LINEAR)
    diff = np.abs(out.astype(int) - theirs.astype(int))
    assert diff.max() <= 1 and diff.mean() < 0.05


def test_frames480_input_is_normalised_with_dinos_video_constants():
    pixels = np.zeros((32, 32, 3), np.uint8)
    pixels[:, 16:] = 255
    x = frames480_input(Image.fromarray(pixels), 32)
    for c in range(3):
        assert float(x[c, 0, 0]) == pytest.approx(-VIDEO_MEAN[c] / VIDEO_STD[c], abs=1e-6)
        assert float(x[c, 0, 31]) == pytest.approx((1 - VIDEO_MEAN[c]) / VIDEO_STD[c], abs=1e-6)
    assert float(x[0, 0, 0]) == pytest.approx(-2.1271930, abs=1e-6)  # std 0.228, not ImageNet's 0.229


def _formula(n_in: int, n_out: int) -> np.ndarray:
    return ((2 * np.arange(n_out) + 1) * n_in) // (2 * n_out)  # floor((i + 0.5) * in / out), in integers


def test_nearest_indices_follow_the_pixel_under_the_centre():
    assert nearest_indices(4, 2).tolist() == [1, 3]  # centres 1.0 and 3.0
    assert nearest_indices(3, 6).tolist() == [0, 0, 1, 1, 2, 2]
    assert nearest_indices(480, 30).tolist() == list(range(8, 480, 16))
    for n_in, n_out in [(854, 52), (480, 30), (52, 832), (30, 480), (854, 832), (7, 3), (1, 5), (5, 1)]:
        exact = ((2 * np.arange(n_out) + 1) * n_in) % (2 * n_out) == 0  # an integer coordinate
        assert np.array_equal(nearest_indices(n_in, n_out)[~exact], _formula(n_in, n_out)[~exact])


def test_nearest_indices_equal_pil_nearest_bit_for_bit_even_at_integer_coordinates():
    # PIL sums the coordinate step by step, so at an exact integer it may fall one ulp short: 832 -> 854 takes
    # source 623 for output 640, where the formula says 624; the masks follow PIL (DINO's code uses it)
    assert nearest_indices(832, 854)[640] == 623 and _formula(832, 854)[640] == 624
    for n_in in range(1, 70):
        for n_out in [*range(1, 70), 832, 854]:
            row = np.arange(n_in, dtype=np.int32)[None, :]
            pil = np.asarray(Image.fromarray(row, mode="I").resize((n_out, 1), Image.Resampling.NEAREST))[0]
            assert np.array_equal(nearest_indices(n_in, n_out), pil), (n_in, n_out)


@pytest.mark.parametrize("mode", ["L", "P"])
@pytest.mark.parametrize("shape,size", [((480, 854), (30, 52)), ((480, 832), (480, 854)), ((90, 61), (47, 130))])
def test_resize_nearest_equals_pil_nearest_on_label_maps(mode, shape, size):
    labels = np.random.default_rng(3).integers(0, 7, size=shape, dtype=np.uint8)
    img = Image.fromarray(labels)
    if mode == "P":
        img.putpalette([v for i in range(256) for v in (i, i, i)])
    pil = np.asarray(img.resize((size[1], size[0]), Image.Resampling.NEAREST))
    assert np.array_equal(resize_nearest(labels, size), pil)


def test_frames480_size_follows_the_network_s_patch():
    """DINO's rule for p 8 (its grid 60 x 104); p 14 rounds both sides down to multiples of 14 (docs/design.md §11)."""
    from evaluate.pixels.geometry import Geometry

    p8, p14 = Geometry(patch=8), Geometry(patch=14, width=768)
    assert frames480_size(854, 480, 480, p8) == (832, 480)
    assert frames480_size(854, 480, 480, p14) == (840, 476)  # 476 = 34 x 14, 840 = 60 x 14
    assert frames480_size(480, 854, 480, p14) == (476, 840)  # portrait
    assert frames480_size(500, 500, 480, p14) == (476, 476)
    assert frames480_size(854, 480, 480) == (832, 480)  # the seed's unless a geometry is given
    assert frames480_size(854, 480, 40, p8) == (64, 40)  # 40: a multiple of 8, not of 16
    with pytest.raises(ValueError, match="multiple of 16"):
        frames480_size(854, 480, 40)
    with pytest.raises(ValueError, match="at least the patch \\(14 px\\)"):
        frames480_size(854, 480, 13, p14)
    pixels = frames480_pixels(Image.new("RGB", (854, 480), (9, 99, 199)), 480, p14)
    assert pixels.shape == (476, 840, 3)
