"""VOC's segmentation split (DESIGN 15; docs/design.md §17): the layout as VOC2012 unpacks, labels read by their
palette index, each object's class, the annotations' identity from bytes alone, and every refusal in one line naming
the file. The folders are written here from real coco2017-mini photos and instance masks (`voc_layout`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from voc_layout import band_of, voc_colour_map, write_palette_png, write_voc_from_coco

from evaluate import EvaluationError
from evaluate.datasets.voc_segmentation import (
    KIND,
    SegmentationDataError,
    VocSegmentation,
    object_classes,
    voc_palette,
)
from evaluate.demo.segmentation import make_demo_voc_segmentation, void_band

N_IMAGES = 3


@pytest.fixture(scope="module")
def voc_root(coco_mini, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("voc") / "VOC2012"
    write_voc_from_coco(coco_mini, root, N_IMAGES)
    return root


def copy_of(voc_root: Path, tmp_path: Path) -> Path:
    root = tmp_path / "VOC2012"
    shutil.copytree(voc_root, root)
    return root


def test_palette_is_vocs_colour_map():
    assert voc_palette() == voc_colour_map()
    palette = voc_palette()
    assert palette[3:6] == [128, 0, 0] and palette[255 * 3: 256 * 3] == [224, 224, 192]


def test_split_names_are_sorted_and_numbered_from_one(voc_root):
    listed = (voc_root / "ImageSets" / "Segmentation" / "val.txt").read_text().split()
    dataset = VocSegmentation.from_spec({"root": str(voc_root)})  # split defaults to val
    assert dataset.kind == KIND == "voc-segmentation"
    assert listed != sorted(listed)  # the file is in another order
    assert dataset.names == sorted(listed) and dataset.image_ids == [1, 2, 3]
    assert dataset.image_path(2) == voc_root / "JPEGImages" / f"{sorted(listed)[1]}.jpg"
    img = dataset.open_image(1)
    assert img.mode == "RGB" and img.size == Image.open(dataset.image_path(1)).size


def test_labels_are_the_stored_indices_not_the_colours(voc_root):
    dataset = VocSegmentation(voc_root, "val")
    for image_id in dataset.image_ids:
        object_png, class_png = dataset.label_paths(image_id)
        labels = dataset.labels(image_id)
        with Image.open(object_png) as img:
            assert img.mode == "P"
            stored = np.frombuffer(img.tobytes(), dtype=np.uint8).reshape(img.height, img.width)
        assert labels.objects.dtype == np.uint8 and np.array_equal(labels.objects, stored)
        # the indices, never the colours: void is 255 (its grey is 220) and the objects are 1..n (object 1's grey
        # is 38)
        assert 255 in labels.objects and {1, 2} <= set(labels.object_ids)
        assert labels.object_ids == sorted(int(v) for v in np.unique(stored) if v not in (0, 255))
        assert set(np.unique(labels.classes)) <= set(range(21)) | {255}
        assert np.array_equal(labels.objects == 255, labels.classes == 255)
        assert np.array_equal(labels.classes, np.asarray(Image.open(class_png)))


def test_two_objects_of_one_class_keep_their_own_ids(voc_root):
    dataset = VocSegmentation(voc_root, "val")
    for image_id in dataset.image_ids:
        labels = dataset.labels(image_id)
        classes = labels.object_class
        assert max(classes.count(c) for c in set(classes)) >= 2, "the fixture paints two objects of one class"


def test_object_class_is_the_most_frequent_index_under_its_pixels_ties_to_the_lower():
    objects = np.array([[1, 1, 1, 1, 2, 2, 2, 3]], dtype=np.uint8)
    classes = np.array([[7, 7, 4, 255, 9, 9, 12, 5]], dtype=np.uint8)
    # object 1: 7 twice, 4 and 255 once; object 2: 9 twice, 12 once; object 3: 5
    assert object_classes(objects, classes, [1, 2, 3]) == [7, 9, 5]
    tied = np.array([[15, 3, 15, 3]], dtype=np.uint8)
    assert object_classes(np.ones((1, 4), np.uint8), tied, [1]) == [3]


def test_demo_band_is_every_pixel_whose_five_by_five_window_holds_two_labels():
    rng = np.random.default_rng(3)
    labels = np.zeros((40, 50), dtype=np.int16)
    labels[5:25, 8:30] = 1
    labels[15:35, 20:45] = 2
    labels[rng.random((40, 50)) < 0.01] = -1
    assert np.array_equal(void_band(labels), band_of(labels))
    # a straight outline gives a band four pixels wide, two on each side; the image's border is no outline
    square = np.zeros((20, 30), dtype=np.int16)
    square[5:, 10:] = 1
    band = void_band(square)
    assert list(np.flatnonzero(band[12])) == [8, 9, 10, 11] and list(np.flatnonzero(band[:, 25])) == [3, 4, 5, 6]
    assert band.sum() == 4 * 22 + 4 * 13  # rows 3..6 across columns 8..29, then columns 8..11 down rows 7..19


def test_the_demo_set_is_read_back_by_the_kind(tmp_path):
    root = make_demo_voc_segmentation(tmp_path / "demo", n_images=3, seed=0)
    again = make_demo_voc_segmentation(tmp_path / "again", n_images=3, seed=0)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        assert path.read_bytes() == (again / path.relative_to(root)).read_bytes(), path
    from evaluate.demo.scenes import make_scene

    dataset = VocSegmentation(root)
    assert dataset.names == ["demo_000001", "demo_000002", "demo_000003"]
    for image_id in dataset.image_ids:
        _, anns, painted = make_scene(0, image_id)
        labels = dataset.labels(image_id)
        void = band_of(painted) | (painted < 0)
        assert np.array_equal(labels.objects == 255, void)
        assert np.array_equal(labels.objects[~void], painted[~void])
        categories = [a["category_id"] for a in anns if not a["iscrowd"]]
        assert labels.object_class == [categories[o - 1] for o in labels.object_ids]
        assert np.array_equal(dataset.open_image(image_id).size, Image.open(dataset.image_path(image_id)).size)


def test_annotations_identity_comes_from_the_label_files_bytes_without_decoding(voc_root, tmp_path, monkeypatch):
    root = copy_of(voc_root, tmp_path)
    dataset = VocSegmentation(root)
    before = dataset.annotations_sha256

    def refuse(*args, **kwargs):
        raise AssertionError("a label file was decoded")

    monkeypatch.setattr(Image, "open", refuse)
    assert dataset.annotations_sha256 == before  # hashing opens no image
    monkeypatch.undo()
    jpeg = dataset.image_path(1)
    jpeg.write_bytes(jpeg.read_bytes() + b"\0")  # an image's bytes are not the labels
    assert VocSegmentation(root).annotations_sha256 == before
    class_png = dataset.label_paths(2)[1]
    indices = np.asarray(Image.open(class_png)).copy()
    indices[0, 0] = 255 if indices[0, 0] != 255 else 0
    write_palette_png(class_png, indices)
    assert VocSegmentation(root).annotations_sha256 != before


def refusal(root: Path, split: str = "val") -> str:
    with pytest.raises(SegmentationDataError) as info:
        dataset = VocSegmentation(root, split)
        for image_id in dataset.image_ids:
            dataset.labels(image_id)
    message = str(info.value)
    assert isinstance(info.value, EvaluationError) and "\n" not in message
    return message


def test_an_empty_split_file_or_a_name_listed_twice_is_refused(voc_root, tmp_path):
    root = copy_of(voc_root, tmp_path)
    split = root / "ImageSets" / "Segmentation"
    (split / "empty.txt").write_text("\n  \n")
    assert refusal(root, "empty").startswith(f"{split / 'empty.txt'}: ") and "no image" in refusal(root, "empty")
    names = (split / "val.txt").read_text().split()
    (split / "twice.txt").write_text("\n".join(names + [names[1]]) + "\n")
    message = refusal(root, "twice")
    assert message.startswith(f"{split / 'twice.txt'}: ")
    assert f"line {len(names) + 1} repeats {names[1]!r} of line 2" in message
    (split / "bom.txt").write_bytes(b"\xef\xbb\xbf" + "\r\n".join(names).encode())  # a Windows editor's file
    assert VocSegmentation(root, "bom").names == sorted(names)
    assert refusal(root, "missing").startswith(f"{split / 'missing.txt'}: split file not found")


@pytest.mark.parametrize("missing", ["JPEGImages/{}.jpg", "SegmentationObject/{}.png", "SegmentationClass/{}.png"])
def test_a_listed_name_without_its_jpeg_or_either_png_is_refused(voc_root, tmp_path, missing):
    root = copy_of(voc_root, tmp_path)
    name = VocSegmentation(root).names[1]
    (root / missing.format(name)).unlink()
    message = refusal(root)
    assert message.startswith(f"{root / missing.format(name)}: ") and "is missing" in message


@pytest.mark.parametrize("mode", ["L", "RGB"])
@pytest.mark.parametrize("folder", ["SegmentationObject", "SegmentationClass"])
def test_a_grey_or_rgb_label_png_is_refused(voc_root, tmp_path, mode, folder):
    root = copy_of(voc_root, tmp_path)
    dataset = VocSegmentation(root)
    path = root / folder / f"{dataset.names[0]}.png"
    converted = Image.open(path).convert(mode)
    if mode == "L" and folder == "SegmentationObject":  # what a conversion does: object 1 -> 38, void -> 220
        index = np.asarray(Image.open(path))
        grey = np.asarray(converted)
        assert set(np.unique(grey[index == 1])) == {38} and set(np.unique(grey[index == 255])) == {220}
    converted.save(path)
    message = refusal(root)
    assert message.startswith(f"{path}: a mode {mode} PNG") and "palette" in message
    with pytest.raises(SegmentationDataError, match="palette"):
        dataset.check_label_headers()


def test_a_label_png_of_another_size_than_its_jpeg_is_refused(voc_root, tmp_path):
    root = copy_of(voc_root, tmp_path)
    dataset = VocSegmentation(root)
    path = dataset.label_paths(3)[0]
    indices = np.asarray(Image.open(path))
    write_palette_png(path, indices[:-1])
    height, width = indices.shape
    message = refusal(root)
    assert message == (f"{path}: {width} x {height - 1} px, its image {dataset.image_path(3)} is {width} x "
                       f"{height}")
    with pytest.raises(SegmentationDataError, match="px, its image"):
        dataset.check_label_headers()


@pytest.mark.parametrize("index,refused", [(20, False), (21, True), (137, True), (254, True), (255, False)])
def test_a_class_index_in_21_to_254_is_refused(voc_root, tmp_path, index, refused):
    root = copy_of(voc_root, tmp_path)
    dataset = VocSegmentation(root)
    path = dataset.label_paths(2)[1]
    indices = np.asarray(Image.open(path)).copy()
    indices[3, 4] = index
    write_palette_png(path, indices)
    if refused:
        assert refusal(root) == (f"{path}: class index {index} (a class map holds 0 background, 1..20 the classes "
                                 "and 255 void)")
    else:
        assert dataset.class_map(2)[3, 4] == index
