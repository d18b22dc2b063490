"""evaluate.pixels.images: opening every image mode as RGB, the bad-input errors, and the two readings' transforms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from evaluate import EvaluationError
from evaluate.pixels.images import (
    ImageError,
    keys480_input,
    open_rgb,
    to_rgb,
    tokens224_geometry,
    tokens224_input,
)

MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])


def reference_normalise(img: Image.Image) -> np.ndarray:
    """Independent ImageNet normalisation, channel by channel in float64: (3, H, W)."""
    arr = np.asarray(img, dtype=np.float64)
    return np.stack([(arr[..., c] / 255.0 - MEAN[c]) / STD[c] for c in range(3)])


def noise_image(width: int, height: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8))


# ---- tokens224 geometry (docs/design.md §3 seed: 640 x 480 -> 298 x 224, crop 37 px from the left) -------------------------


@pytest.mark.parametrize(
    "size, expected",
    [
        ((640, 480), (298, 224, 37, 0)),  # the design's seed example
        ((480, 640), (224, 298, 0, 37)),  # portrait: the crop moves down instead
        ((500, 500), (224, 224, 0, 0)),
        ((641, 480), (299, 224, 38, 0)),  # 641 * 224 / 480 = 299.13 truncated; round(37.5) = 38 (even)
        ((229, 224), (229, 224, 2, 0)),  # round(2.5) = 2: Python's banker's rounding, as torchvision
        ((227, 224), (227, 224, 2, 0)),  # round(1.5) = 2
        ((224, 450), (224, 450, 0, 113)),
        ((100, 60), (373, 224, 74, 0)),  # upscaling: 100 * 224 / 60 = 373.33 -> 373; round(74.5) = 74
    ],
)
def test_tokens224_geometry(size, expected):
    assert tokens224_geometry(*size) == expected


def test_tokens224_input_matches_independent_resize_crop_normalise():
    img = noise_image(640, 480, seed=1)
    out = tokens224_input(img)
    assert out.shape == (3, 224, 224) and out.dtype == torch.float32
    ref = img.resize((298, 224), Image.Resampling.BICUBIC).crop((37, 0, 261, 224))
    np.testing.assert_allclose(out.numpy(), reference_normalise(ref), rtol=0, atol=1e-5)


def test_tokens224_input_portrait():
    img = noise_image(300, 400, seed=2)
    new_w, new_h, left, top = tokens224_geometry(300, 400)
    assert (new_w, new_h, left, top) == (224, 298, 0, 37)  # 400 * 224 / 300 = 298.67 -> 298
    out = tokens224_input(img)
    ref = img.resize((224, 298), Image.Resampling.BICUBIC).crop((0, 37, 224, 261))
    np.testing.assert_allclose(out.numpy(), reference_normalise(ref), rtol=0, atol=1e-5)


def test_keys480_input_matches_independent_resize_normalise():
    img = noise_image(320, 200, seed=3)
    out = keys480_input(img)
    assert out.shape == (3, 480, 480) and out.dtype == torch.float32
    ref = img.resize((480, 480), Image.Resampling.LANCZOS)
    np.testing.assert_allclose(out.numpy(), reference_normalise(ref), rtol=0, atol=1e-5)


def test_normalisation_hand_values():
    # A uniform (255, 0, 124) image stays uniform under any resize; (x / 255 - mean) / std by hand:
    # R (1 - 0.485) / 0.229 = 2.24891; G (0 - 0.456) / 0.224 = -2.03571; B (124/255 - 0.406) / 0.225 = 0.35673.
    img = Image.new("RGB", (200, 150), (255, 0, 124))
    for tensor in (keys480_input(img), tokens224_input(img)):
        for channel, value in enumerate((2.24891, -2.03571, 0.35673)):
            np.testing.assert_allclose(tensor[channel].numpy(), value, atol=1e-4)


def test_keys480_ignores_aspect():
    # The whole image is squeezed (no crop): the left and right quarters of a split image stay distinct.
    arr = np.zeros((100, 400, 3), dtype=np.uint8)
    arr[:, 200:] = 255
    out = keys480_input(Image.fromarray(arr))
    assert out[0, :, :200].max() < -2.0 and out[0, :, 280:].min() > 2.0


# ---- image modes ---------------------------------------------------------------------------------------------------


def test_grayscale_L_and_LA(tmp_path):
    Image.new("L", (20, 30), 77).save(tmp_path / "l.png")
    Image.new("LA", (20, 30), (77, 10)).save(tmp_path / "la.png")
    for name in ("l.png", "la.png"):
        img = open_rgb(tmp_path / name)
        assert img.mode == "RGB" and img.size == (20, 30)
        assert img.getpixel((5, 5)) == (77, 77, 77)


def test_cmyk(tmp_path):
    # Pure cyan ink (255, 0, 0, 0) is RGB (0, 255, 255); no black.
    Image.new("CMYK", (20, 20), (255, 0, 0, 0)).save(tmp_path / "c.jpg", quality=100)
    img = open_rgb(tmp_path / "c.jpg")
    assert img.mode == "RGB"
    assert np.abs(np.asarray(img, dtype=int) - [0, 255, 255]).max() <= 3


def test_palette_plain_and_with_transparency(tmp_path):
    palette = [0, 0, 0] * 256
    palette[3:6] = [10, 200, 30]
    palette[6:9] = [250, 5, 5]
    p = Image.new("P", (20, 20), 1)
    p.putpalette(palette)
    p.paste(2, (0, 0, 10, 20))
    p.save(tmp_path / "p.png")
    p.save(tmp_path / "pt.png", transparency=2)  # index 2 transparent: its colour is kept, alpha dropped
    p.save(tmp_path / "p.gif")
    for name in ("p.png", "pt.png", "p.gif"):
        img = open_rgb(tmp_path / name)
        assert img.mode == "RGB"
        assert img.getpixel((2, 2)) == (250, 5, 5)
        assert img.getpixel((15, 2)) == (10, 200, 30)


def test_rgba_alpha_dropped(tmp_path):
    Image.new("RGBA", (20, 20), (12, 34, 56, 0)).save(tmp_path / "a.png")
    img = open_rgb(tmp_path / "a.png")
    assert img.mode == "RGB" and img.getpixel((0, 0)) == (12, 34, 56)


def test_sixteen_bit_png_scaled_by_shift(tmp_path):
    arr = np.array([[40000, 65535, 255, 256] * 5] * 20, dtype=np.uint16)
    Image.fromarray(arr).save(tmp_path / "g16.png")
    assert Image.open(tmp_path / "g16.png").mode.startswith("I")
    img = open_rgb(tmp_path / "g16.png")
    # 40000 >> 8 = 156, 65535 >> 8 = 255, 255 >> 8 = 0, 256 >> 8 = 1 (PIL's own conversion would clip to 255)
    assert [img.getpixel((x, 0)) for x in range(4)] == [(156,) * 3, (255,) * 3, (0,) * 3, (1,) * 3]


def test_sixteen_bit_big_endian_and_32bit_modes():
    arr = np.full((20, 20), 40000, dtype=">u2")
    big = Image.frombytes("I;16B", (20, 20), arr.tobytes())
    assert to_rgb(big).getpixel((0, 0)) == (156, 156, 156)
    wide = Image.fromarray(np.array([[40000, 70000, -5] * 7] * 20, dtype=np.int32))
    assert wide.mode == "I"
    rgb = to_rgb(wide)
    assert [rgb.getpixel((x, 0)) for x in range(3)] == [(156,) * 3, (255,) * 3, (0,) * 3]


def test_one_bit(tmp_path):
    img = Image.new("1", (20, 20), 0)
    img.paste(1, (0, 0, 10, 20))
    img.save(tmp_path / "b.png")
    rgb = open_rgb(tmp_path / "b.png")
    assert rgb.getpixel((0, 0)) == (255, 255, 255) and rgb.getpixel((15, 0)) == (0, 0, 0)


def test_exif_orientation_6_rotates(tmp_path):
    # Stored 60 x 30 with a red left third; orientation 6 means "rotate 90 degrees clockwise to display":
    # displayed 30 x 60 with the red part on top.
    arr = np.zeros((30, 60, 3), dtype=np.uint8)
    arr[:, :20] = (255, 0, 0)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(arr).save(tmp_path / "r.jpg", exif=exif, quality=95)
    img = open_rgb(tmp_path / "r.jpg")
    assert img.size == (30, 60)
    top = np.asarray(img)[:15].astype(int)
    bottom = np.asarray(img)[-15:].astype(int)
    assert top[..., 0].mean() > 200 and bottom[..., 0].mean() < 40


# ---- bad input: an ImageError naming the file and what is wrong ---------------------------------------------------


def _jpeg_bytes() -> bytes:
    import io

    buf = io.BytesIO()
    noise_image(120, 100, seed=4).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


@pytest.mark.badinput
@pytest.mark.parametrize(
    "name, make, phrase",
    [
        ("missing.jpg", None, "not found"),
        ("text.jpg", lambda: b"this is not an image\n", "not an image"),
        ("empty.png", lambda: b"", "not an image"),
        ("truncated.jpg", lambda: _jpeg_bytes()[: len(_jpeg_bytes()) * 2 // 3], "truncated"),
        ("cut_header.jpg", lambda: _jpeg_bytes()[:300], "corrupt or truncated"),
        (
            "corrupt.jpg",
            lambda: (lambda b: b[: len(b) // 2] + b"\xff" * 400 + b[len(b) // 2 + 400 :])(_jpeg_bytes()),
            "corrupt or truncated",
        ),
    ],
)
def test_bad_files_raise_image_error_naming_file(tmp_path, name, make, phrase):
    path = tmp_path / name
    if make is not None:
        path.write_bytes(make())
    with pytest.raises(ImageError) as info:
        open_rgb(path)
    assert str(path) in str(info.value)
    assert phrase in str(info.value)
    assert isinstance(info.value, EvaluationError)


@pytest.mark.badinput
@pytest.mark.parametrize("size", [(10, 40), (40, 15), (1, 1)])
def test_too_small_image(tmp_path, size):
    path = tmp_path / "tiny.png"
    Image.new("RGB", size).save(path)
    with pytest.raises(ImageError, match="at least 16 px") as info:
        open_rgb(path)
    assert str(path) in str(info.value) and f"{size[0]} x {size[1]}" in str(info.value)


def test_sixteen_pixels_is_enough(tmp_path):
    Image.new("RGB", (16, 16)).save(tmp_path / "ok.png")
    assert open_rgb(tmp_path / "ok.png").size == (16, 16)


def test_open_rgb_on_real_coco_jpeg(coco_mini: Path):
    path = sorted((coco_mini / "images").glob("*.jpg"))[0]
    img = open_rgb(path)
    assert img.mode == "RGB" and max(img.size) == 640
