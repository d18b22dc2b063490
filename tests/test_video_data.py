"""DAVIS-layout video data sets: masks read by their mode, objects from the first frame, labels' identity, and one
clear line naming the file for every bad input (docs/design.md §12)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image
from videos import davis_mini, moving_shapes, small_davis

from evaluate import EvaluationError
from evaluate.datasets.manifest import manifest_of
from evaluate.datasets.davis import (
    DavisDataset,
    VideoDatasetError,
    davis_palette,
    first_mask,
    frame_size,
    read_mask,
    truth_mask,
    write_mask,
)
from evaluate.demo.videos import write_sequence


def _palette_png(path, ids):
    img = Image.fromarray(np.asarray(ids, np.uint8))
    img.putpalette(davis_palette())
    img.save(path)


def test_a_davis2016_mask_is_one_object():
    root = davis_mini()
    path = root / "Annotations" / "480p" / "blackswan" / "00000.png"
    raw = np.asarray(Image.open(path))
    assert Image.open(path).mode == "L" and set(np.unique(raw)) == {0, 255}
    ids = read_mask(path)
    assert ids.dtype == np.uint8 and set(np.unique(ids)) == {0, 1}
    assert np.array_equal(ids == 1, raw == 255)
    first = first_mask(DavisDataset(root).sequence("blackswan"))
    assert first.n_objects == 1 and first.labels.shape == (480, 854)


def test_davis2016_mini_lists_its_three_sequences_and_every_frame():
    dataset = DavisDataset(davis_mini())
    assert dataset.names == ["blackswan", "car-shadow", "motocross-jump"]
    assert [len(s.frames) for s in dataset.sequences] == [50, 40, 40]
    assert all(len(s.masks) == len(s.frames) for s in dataset.sequences)
    assert frame_size(dataset.sequence("car-shadow").frames[0]) == (854, 480)


def test_a_grayscale_mask_is_one_object_whatever_its_non_zero_values(tmp_path):
    Image.fromarray(np.array([[0, 1, 128], [255, 0, 7]], np.uint8)).save(tmp_path / "m.png")
    assert read_mask(tmp_path / "m.png").tolist() == [[0, 1, 1], [1, 0, 1]]
    Image.fromarray(np.array([[True, False]])).save(tmp_path / "b.png")  # 1-bit
    assert read_mask(tmp_path / "b.png").tolist() == [[1, 0]]


def test_a_palette_mask_with_255_reads_as_void_then_background(tmp_path):
    _palette_png(tmp_path / "m.png", [[0, 1, 2], [255, 3, 255]])
    assert read_mask(tmp_path / "m.png").tolist() == [[0, 1, 2], [0, 3, 0]]
    # a palette RESULT has no void: its 255 is an id like any other
    assert read_mask(tmp_path / "m.png", result=True).tolist() == [[0, 1, 2], [255, 3, 255]]


def test_write_mask_writes_an_index_png_with_davis_colours(tmp_path):
    ids = np.array([[0, 1], [2, 3]], np.uint8)
    write_mask(tmp_path / "x.png", ids)
    img = Image.open(tmp_path / "x.png")
    assert img.mode == "P" and np.array_equal(np.asarray(img), ids)
    assert img.getpalette()[:12] == [0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0]  # DAVIS: black, red, green, olive
    assert not list(tmp_path.glob(".tmp-*"))


def test_objects_come_from_the_first_frame_and_later_ids_above_m_are_background(tmp_path):
    root = small_davis(tmp_path)
    seq = DavisDataset(root).sequence("shapes2")
    first = first_mask(seq)
    assert first.n_objects == 2
    # a later mask with id 3 (unknown to the first frame): background, counted
    ids = read_mask(seq.masks[2])
    ids[:5, :5] = 3
    write_mask(seq.masks[2], ids)
    truth = truth_mask(seq, seq.masks[2], first.n_objects)
    assert truth.n_extra == 25 and truth.labels.max() <= 2 and np.all(truth.labels[:5, :5] == 0)


def test_an_id_missing_below_m_is_an_object_with_an_empty_mask(tmp_path):
    frames = moving_shapes(3, (64, 80), 2, seed=4)
    frames = [(rgb, np.where(ids == 1, 0, ids).astype(np.uint8)) for rgb, ids in frames]  # keep only id 2
    write_sequence(tmp_path, "gap", frames)
    first = first_mask(DavisDataset(tmp_path).sequence("gap"))
    assert first.n_objects == 2 and not np.any(first.labels == 1)


def test_the_sequences_are_the_lines_of_a_list_file_in_its_order(tmp_path):
    root = small_davis(tmp_path)
    (root / "ImageSets" / "2017").mkdir(parents=True)
    (root / "ImageSets" / "2017" / "val.txt").write_text("shapes2\n\nshape1\n")
    assert DavisDataset(root, sequences_file="ImageSets/2017/val.txt").names == ["shapes2", "shape1"]
    assert DavisDataset(root).names == ["shape1", "shapes2"]  # the folders, sorted


def test_label_identity_separates_the_first_masks_from_the_rest(tmp_path):
    root = small_davis(tmp_path / "a")
    dataset = DavisDataset(root)
    first, rest = dataset.labels_sha256("first"), dataset.labels_sha256("rest")
    moved = tmp_path / "b"
    shutil.copytree(root, moved)
    assert DavisDataset(moved).labels_sha256("first") == first  # paths relative to the root: movable
    later = dataset.sequence("shapes2").masks[3]
    ids = read_mask(later)
    ids[0, 0] = 1 - min(ids[0, 0], 1)
    write_mask(later, ids)
    assert DavisDataset(root).labels_sha256("first") == first
    assert DavisDataset(root).labels_sha256("rest") != rest
    ids = read_mask(dataset.sequence("shape1").masks[0]) * 255
    ids[0, :3] = 255 - ids[0, :3]
    Image.fromarray(ids.astype(np.uint8)).save(dataset.sequence("shape1").masks[0])
    assert DavisDataset(root).labels_sha256("first") != first
    assert DavisDataset(root).labels_sha256("first", ["shapes2"]) == dataset.labels_sha256("first",
                                                                                                       ["shapes2"])
    assert DavisDataset(root).annotations_sha256 == DavisDataset(root).labels_sha256("rest")  # what scoring reads
    manifest = manifest_of(DavisDataset(root), 8)
    assert [s["name"] for s in manifest["sequences"]] == ["shape1", "shapes2"] and "shards" not in manifest
    assert manifest["sequences"][1]["frames"] == [f"{t:05d}.jpg" for t in range(6)]
    assert manifest["first_masks_sha256"] == DavisDataset(root).labels_sha256("first")


# --------------------------------------------------------------------------------------------- bad inputs


def _error(call, *args, **kwargs) -> str:
    with pytest.raises(EvaluationError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_sequence_without_frames_is_named(tmp_path):
    root = small_davis(tmp_path)
    for frame in (root / "JPEGImages" / "480p" / "shape1").iterdir():
        frame.unlink()
    message = _error(DavisDataset, root)
    assert "shape1" in message and "no frames" in message


def test_a_listed_sequence_that_does_not_exist_is_named(tmp_path):
    root = small_davis(tmp_path)
    (root / "val.txt").write_text("shapes2\nbear\n")
    message = _error(DavisDataset, root, sequences_file="val.txt")
    assert "val.txt" in message and "'bear'" in message and "does not exist" in message
    assert "not found" in _error(DavisDataset, root, sequences_file="missing.txt")


def test_a_missing_first_frame_mask_is_named(tmp_path):
    root = small_davis(tmp_path)
    (root / "Annotations" / "480p" / "shapes2" / "00000.png").unlink()
    message = _error(DavisDataset, root)
    assert "shapes2/00000.png" in message and "first-frame mask" in message


def test_a_mask_without_a_frame_is_named(tmp_path):
    root = small_davis(tmp_path)
    shutil.copy(root / "Annotations" / "480p" / "shape1" / "00001.png", root / "Annotations" / "480p" / "shape1"
                / "00099.png")
    assert "00099.png" in _error(DavisDataset, root) and "does not exist" in _error(DavisDataset, root)


def test_a_mask_whose_size_differs_from_its_frame_is_named(tmp_path):
    root = small_davis(tmp_path)
    seq = DavisDataset(root).sequence("shapes2")
    write_mask(seq.masks[0], np.zeros((96, 199), np.uint8))
    message = _error(first_mask, seq)
    assert "shapes2/00000.png" in message and "199 x 96" in message and "200 x 96" in message
    write_mask(seq.masks[4], np.zeros((95, 200), np.uint8))
    message = _error(truth_mask, seq, seq.masks[4], 2)
    assert "shapes2/00004.png" in message and "200 x 95" in message


def test_a_corrupt_mask_or_frame_is_named(tmp_path):
    root = small_davis(tmp_path)
    seq = DavisDataset(root).sequence("shapes2")
    data = seq.masks[1].read_bytes()
    seq.masks[1].write_bytes(data[: len(data) // 2])
    message = _error(read_mask, seq.masks[1])
    assert "shapes2/00001.png" in message and "corrupt" in message
    seq.frames[2].write_bytes(b"not a jpeg at all")
    message = _error(frame_size, seq.frames[2])
    assert "shapes2/00002.jpg" in message and "not an image" in message


def test_a_mask_that_is_not_an_index_png_is_named(tmp_path):
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "rgb.png")
    message = _error(read_mask, tmp_path / "rgb.png")
    assert "rgb.png" in message and "RGB" in message and "not a mask" in message
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / "m.jpg")
    assert "must be a PNG" in _error(read_mask, tmp_path / "m.jpg")


def test_a_first_mask_without_any_object_is_named(tmp_path):
    root = small_davis(tmp_path)
    seq = DavisDataset(root).sequence("shapes2")
    write_mask(seq.masks[0], np.zeros((96, 200), np.uint8))
    message = _error(first_mask, seq)
    assert "shapes2/00000.png" in message and "no object" in message


def test_a_missing_layout_folder_is_named(tmp_path):
    (tmp_path / "JPEGImages" / "480p").mkdir(parents=True)
    message = _error(DavisDataset, tmp_path)
    assert "Annotations/480p" in message and "not found" in message
    assert isinstance(pytest.raises(VideoDatasetError, DavisDataset, tmp_path).value, EvaluationError)
