"""Saliency data sets (docs/design.md §16): the three published layouts, pairing by name, 8-bit grey masks with any
level above 0 salient, and bad input refused in one line naming the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evaluate.datasets.saliency import (
    SET_LAYOUTS,
    SaliencyDataError,
    open_saliency_set,
    read_image,
    read_mask_levels,
    read_truth,
)


def write_pair(images: Path, masks: Path, name: str, size=(12, 8), mask_size=None, levels=None) -> None:
    images.mkdir(parents=True, exist_ok=True)
    masks.mkdir(parents=True, exist_ok=True)
    w, h = size
    Image.fromarray(np.full((h, w, 3), 90, dtype=np.uint8)).save(images / f"{name}.jpg")
    mw, mh = mask_size or size
    mask = np.zeros((mh, mw), dtype=np.uint8) if levels is None else levels
    Image.fromarray(mask).save(masks / f"{name}.png")


@pytest.mark.parametrize("layout", sorted(SET_LAYOUTS))
def test_each_published_layout_is_read_from_its_root_sorted_by_file_name(tmp_path, layout):
    images, masks = SET_LAYOUTS[layout]
    for name in ("b", "a10", "a2"):
        write_pair(tmp_path / images, tmp_path / masks, name)
    (tmp_path / masks / ".DS_Store").write_bytes(b"x")  # dot files are not part of a set
    dataset = open_saliency_set(tmp_path)
    assert [p.name for p in dataset.pairs] == ["a10", "a2", "b"]  # by file name, as sorted(os.listdir)
    assert dataset.images == tmp_path / images and dataset.masks == tmp_path / masks
    assert all(p.mask == tmp_path / masks / f"{p.name}.png" for p in dataset.pairs)


def test_explicit_folders_and_an_anti_aliased_mask_read_any_level_above_zero_as_salient(tmp_path):
    levels = np.zeros((8, 12), dtype=np.uint8)
    levels[2:5, 3:7] = 255
    levels[5, 3] = 1  # anti-aliased edge pixels: salient for TokenCut
    levels[5, 4] = 128
    write_pair(tmp_path / "imgs", tmp_path / "gt", "x", levels=levels)
    (pair,) = open_saliency_set(images=tmp_path / "imgs", masks=tmp_path / "gt").pairs
    truth = read_truth(pair)
    assert truth.dtype == bool and truth.shape == (8, 12) and int(truth.sum()) == 12 + 2
    assert read_mask_levels(pair)[5, 4] == 128
    assert read_image(pair).mode == "RGB" and read_image(pair).size == (12, 8)


def test_an_rgb_mask_is_read_as_8_bit_grey(tmp_path):
    write_pair(tmp_path / "images", tmp_path / "ground_truth_mask", "x")
    rgb = np.zeros((8, 12, 3), dtype=np.uint8)
    rgb[0, 0] = (0, 0, 3)  # grey 0.114 * 3 = 0.34 -> 0 in PIL's 'L': not salient
    rgb[0, 1] = (255, 255, 255)
    Image.fromarray(rgb).save(tmp_path / "ground_truth_mask" / "x.png")
    (pair,) = open_saliency_set(tmp_path).pairs
    assert read_truth(pair).sum() == 1


def test_the_label_identity_changes_with_a_mask_and_not_with_an_image(tmp_path):
    write_pair(tmp_path / "images", tmp_path / "ground_truth_mask", "x")
    first = open_saliency_set(tmp_path).annotations_sha256
    Image.fromarray(np.full((8, 12, 3), 10, dtype=np.uint8)).save(tmp_path / "images" / "x.jpg")
    assert open_saliency_set(tmp_path).annotations_sha256 == first
    Image.fromarray(np.full((8, 12), 255, dtype=np.uint8)).save(tmp_path / "ground_truth_mask" / "x.png")
    assert open_saliency_set(tmp_path).annotations_sha256 != first


@pytest.mark.badinput
def test_an_image_without_a_mask_and_a_mask_without_an_image_are_named(tmp_path):
    write_pair(tmp_path / "images", tmp_path / "ground_truth_mask", "a")
    Image.fromarray(np.zeros((8, 12, 3), dtype=np.uint8)).save(tmp_path / "images" / "lonely.jpg")
    with pytest.raises(SaliencyDataError, match=r"lonely\.jpg: image without a mask"):
        open_saliency_set(tmp_path)
    (tmp_path / "images" / "lonely.jpg").unlink()
    Image.fromarray(np.zeros((8, 12), dtype=np.uint8)).save(tmp_path / "ground_truth_mask" / "orphan.png")
    with pytest.raises(SaliencyDataError, match=r"orphan\.png: mask without an image"):
        open_saliency_set(tmp_path)


@pytest.mark.badinput
def test_a_mask_of_another_size_is_named_with_both_sizes(tmp_path):
    write_pair(tmp_path / "DUTS-TE-Image", tmp_path / "DUTS-TE-Mask", "x", size=(12, 8), mask_size=(12, 9))
    (pair,) = open_saliency_set(tmp_path).pairs
    with pytest.raises(SaliencyDataError, match=r"x\.png: mask is 12 x 9 px but its image x\.jpg is 12 x 8"):
        read_truth(pair)


@pytest.mark.badinput
def test_unreadable_image_and_mask_files_are_named(tmp_path):
    write_pair(tmp_path / "DUT-OMRON-image", tmp_path / "pixelwiseGT-new-PNG", "x")
    (pair,) = open_saliency_set(tmp_path).pairs
    pair.image.write_bytes(pair.image.read_bytes()[:40])  # truncated JPEG
    with pytest.raises(SaliencyDataError, match=r"x\.jpg: (corrupt image|not an image)"):
        read_image(pair)
    pair.mask.write_bytes(b"not a png at all")
    with pytest.raises(SaliencyDataError, match=r"x\.png: not an image"):
        read_truth(pair)


@pytest.mark.badinput
def test_a_folder_of_no_known_layout_says_what_it_expected(tmp_path):
    (tmp_path / "img").mkdir()
    with pytest.raises(SaliencyDataError, match="ground_truth_mask.*DUTS-TE-Mask.*pixelwiseGT-new-PNG"):
        open_saliency_set(tmp_path)
    with pytest.raises(SaliencyDataError, match="not found"):
        open_saliency_set(tmp_path / "missing")
    write_pair(tmp_path / "images", tmp_path / "ground_truth_mask", "x")
    Image.fromarray(np.zeros((8, 12, 3), dtype=np.uint8)).save(tmp_path / "images" / "x.png")
    with pytest.raises(SaliencyDataError, match=r"a second image named 'x'"):
        open_saliency_set(tmp_path)
