"""evaluate.datasets.coco: COCO validation errors, ground truth with crowd regions, manifests and shards."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pycocotools import mask as mask_utils

from evaluate import EvaluationError
from evaluate.datasets import DataSetError
from evaluate.datasets.coco import CocoDataset, DatasetError, mask_area_bbox, quiet_pycocotools, rle_from_mask
from evaluate.datasets.manifest import manifest_of

# Image 7 is 4 x 5 (h x w). Object (ann 11): rows 1-2, cols 1-2. Crowd (ann 12): column 4.
# Column-major runs: object 0000|0110|0110|0000|0000 -> [5, 2, 2, 2, 9]; crowd 16 zeros then 4 ones -> [16, 4].
OBJECT = np.zeros((4, 5), dtype=bool)
OBJECT[1:3, 1:3] = True
CROWD = np.zeros((4, 5), dtype=bool)
CROWD[:, 4] = True


def base_json() -> dict:
    return {
        "images": [
            {"id": 7, "file_name": "b.png", "height": 4, "width": 5},
            {"id": 3, "file_name": "a.png", "height": 20, "width": 30},
        ],
        "annotations": [
            {"id": 12, "image_id": 7, "category_id": 5, "iscrowd": 1, "area": 4, "bbox": [4, 0, 1, 4],
             "segmentation": {"size": [4, 5], "counts": [16, 4]}},
            {"id": 11, "image_id": 7, "category_id": 2, "iscrowd": 0, "area": 4, "bbox": [1, 1, 2, 2],
             "segmentation": {"size": [4, 5], "counts": [5, 2, 2, 2, 9]}},
            {"id": 20, "image_id": 3, "category_id": 5, "iscrowd": 0, "area": 100, "bbox": [2, 2, 10, 10],
             "segmentation": [[2, 2, 12, 2, 12, 12, 2, 12]]},
        ],
        "categories": [{"id": 5, "name": "five"}, {"id": 2, "name": "two"}],
    }


def write_dataset(root: Path, data: dict | str, images: bool = True) -> tuple[Path, Path]:
    images_dir = root / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    ann = root / "annotations.json"
    ann.write_text(data if isinstance(data, str) else json.dumps(data))
    if images and isinstance(data, dict):
        for img in data.get("images", []):
            if isinstance(img, dict) and {"file_name", "width", "height"} <= img.keys() and img["height"] > 0:
                Image.new("RGB", (img["width"], img["height"]), (100, 150, 200)).save(images_dir / img["file_name"])
    return images_dir, ann


@pytest.fixture
def small(tmp_path) -> CocoDataset:
    return CocoDataset(*write_dataset(tmp_path, base_json()))


def test_basic_accessors(small: CocoDataset, tmp_path):
    assert small.image_ids == [3, 7]
    assert small.category_ids == [2, 5]
    assert small.image_size(7) == (4, 5) and small.image_size(3) == (20, 30)
    assert small.image_path(3) == tmp_path / "images" / "a.png"
    assert small.has_labels
    assert [a["id"] for a in small.instances(7)] == [11, 12]
    assert small.annotations_sha256 == hashlib.sha256((tmp_path / "annotations.json").read_bytes()).hexdigest()
    assert len(small) == 2
    assert small.open_image(3).size == (30, 20)


def test_ground_truth_objects_and_crowd(small: CocoDataset):
    objects, crowd = small.ground_truth(7)
    assert objects.dtype == bool and crowd.dtype == bool
    np.testing.assert_array_equal(objects, OBJECT)
    np.testing.assert_array_equal(crowd, CROWD)
    objects3, crowd3 = small.ground_truth(3)
    assert objects3.shape == (20, 30) and not crowd3.any()
    # pycocotools' own rasterisation of the polygon, done independently
    with quiet_pycocotools():
        rle = mask_utils.merge(mask_utils.frPyObjects([[2, 2, 12, 2, 12, 12, 2, 12]], 20, 30))
        np.testing.assert_array_equal(objects3, mask_utils.decode(rle).astype(bool))
    assert 90 <= objects3.sum() <= 130  # a 10 x 10 square, give or take its border


def test_ground_truth_union_of_overlapping_objects(tmp_path):
    data = base_json()
    # a second object on image 7 covering row 0 entirely: columns each start with one 1 -> runs [0,1,3,1,3,1,3,1,3,1,3]
    data["annotations"].append({"id": 13, "image_id": 7, "category_id": 2, "iscrowd": 0, "area": 5,
                                "bbox": [0, 0, 5, 1], "segmentation": {"size": [4, 5],
                                                                       "counts": [0, 1, 3, 1, 3, 1, 3, 1, 3, 1, 3]}})
    ds = CocoDataset(*write_dataset(tmp_path, data))
    objects, crowd = ds.ground_truth(7)
    expected = OBJECT.copy()
    expected[0, :] = True
    np.testing.assert_array_equal(objects, expected)
    np.testing.assert_array_equal(crowd, CROWD)  # crowd and objects may overlap (column 4, row 0)


def test_no_annotations_means_no_labels(tmp_path):
    data = base_json()
    del data["annotations"]
    ds = CocoDataset(*write_dataset(tmp_path / "a", data))
    assert not ds.has_labels and ds.instances(7) == []
    objects, crowd = ds.ground_truth(7)
    assert not objects.any() and not crowd.any()
    data["annotations"] = []
    assert not CocoDataset(*write_dataset(tmp_path / "b", data)).has_labels


def test_pycocotools_is_quiet(tmp_path, capsys):
    CocoDataset(*write_dataset(tmp_path, base_json()))
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


# ---- manifest --------------------------------------------------------------------------------------------------


def test_manifest_shards_and_hash(tmp_path):
    data = base_json()
    data["images"] += [{"id": i, "file_name": f"x{i}.png", "height": 16, "width": 17} for i in (9, 1, 5)]
    ds = CocoDataset(*write_dataset(tmp_path, data))
    m = manifest_of(ds, 2)
    assert m["image_ids"] == [1, 3, 5, 7, 9]
    assert m["names"] == ["x1.png", "a.png", "x5.png", "b.png", "x9.png"]
    assert m["sizes"] == [[16, 17], [20, 30], [16, 17], [4, 5], [16, 17]]
    assert m["shards"] == [[1, 3], [5, 7], [9]]
    assert m["annotations_sha256"] == ds.annotations_sha256
    content = {k: v for k, v in m.items() if k != "manifest_sha256"}
    text = json.dumps(content, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    assert m["manifest_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert manifest_of(ds, 5)["shards"] == [[1, 3, 5, 7, 9]]
    assert manifest_of(ds, 100)["shards"] == [[1, 3, 5, 7, 9]]
    assert manifest_of(ds, 1)["shards"] == [[1], [3], [5], [7], [9]]
    assert len({manifest_of(ds, k)["manifest_sha256"] for k in (1, 2, 5)}) == 3
    assert manifest_of(ds, 2) == m  # deterministic


@pytest.mark.badinput
@pytest.mark.parametrize("bad", [0, -3, 2.5, "4"])
def test_manifest_bad_shard_size(small, bad):
    with pytest.raises(DataSetError, match="shard_size"):
        manifest_of(small, bad)


def test_manifest_coco_mini(coco_mini: Path):
    ds = CocoDataset(coco_mini / "images", coco_mini / "annotations.json")
    ds.validate_files()
    m = manifest_of(ds, 32)
    assert [len(s) for s in m["shards"]] == [32, 32, 15]
    assert sum(m["shards"], []) == m["image_ids"] == sorted(m["image_ids"])
    assert len(ds) == 79 and ds.has_labels
    assert sum(len(ds.instances(i)) for i in ds.image_ids) == 624
    assert sum(a["iscrowd"] for i in ds.image_ids for a in ds.instances(i)) == 5
    crowd_images = [i for i in ds.image_ids if any(a["iscrowd"] for a in ds.instances(i))]
    for image_id in crowd_images:
        objects, crowd = ds.ground_truth(image_id)
        assert objects.shape == crowd.shape == ds.image_size(image_id)
        assert crowd.any() and objects.any()


# ---- bad input: a DatasetError naming the annotation file (and the id) and what is wrong ---------------------------


def _mutate(fn):
    def apply():
        data = base_json()
        fn(data)
        return data

    return apply


BAD_JSON = [
    ("not json", lambda: "{images: [", "not valid JSON"),
    ("not an object", lambda: "[1, 2]", "expected a JSON object"),
    ("no images key", _mutate(lambda d: d.pop("images")), "missing key 'images'"),
    ("no images", _mutate(lambda d: d.update(images=[])), "no images"),
    ("image lacks file_name", _mutate(lambda d: d["images"][0].pop("file_name")), "(id 7) lacks key(s) file_name"),
    ("duplicate image id", _mutate(lambda d: d["images"][1].update(id=7)), "duplicate image id 7"),
    ("bad height", _mutate(lambda d: d["images"][0].update(height=0)), "positive integers"),
    ("annotation lacks segmentation", _mutate(lambda d: d["annotations"][1].pop("segmentation")),
     "(id 11) lacks key(s) segmentation"),
    ("annotation lacks iscrowd", _mutate(lambda d: d["annotations"][1].pop("iscrowd")), "lacks key(s) iscrowd"),
    ("unknown image", _mutate(lambda d: d["annotations"][2].update(image_id=99)),
     "(id 20): image_id 99 is not among the images"),
    ("unknown category", _mutate(lambda d: d["annotations"][2].update(category_id=4)),
     "(id 20): category_id 4 is not among the categories"),
    ("polygon of 2 points", _mutate(lambda d: d["annotations"][2].update(segmentation=[[1, 1, 5, 5]])),
     "(id 20): polygon 0 has 4 numbers; a polygon needs at least 3 points"),
    ("odd polygon", _mutate(lambda d: d["annotations"][2].update(segmentation=[[1, 1, 5, 5, 7, 1, 3]])),
     "odd count"),
    ("empty polygons", _mutate(lambda d: d["annotations"][2].update(segmentation=[])), "empty list of polygons"),
    ("rle wrong size", _mutate(lambda d: d["annotations"][0]["segmentation"].update(size=[5, 4])),
     "(id 12): RLE size [5, 4] is not the image's [height, width] [4, 5]"),
    ("rle wrong sum", _mutate(lambda d: d["annotations"][0]["segmentation"].update(counts=[16, 5])),
     "RLE counts sum to 21"),
    ("duplicate annotation id", _mutate(lambda d: d["annotations"][2].update(id=11)), "duplicate annotation id 11"),
    ("bad iscrowd", _mutate(lambda d: d["annotations"][2].update(iscrowd=2)), "'iscrowd' must be 0 or 1"),
    ("bad bbox", _mutate(lambda d: d["annotations"][2].update(bbox=[1, 2, 3])), "'bbox' must be"),
    ("category lacks name", _mutate(lambda d: d["categories"][0].pop("name")), "categories[0] lacks key(s) name"),
]


@pytest.mark.badinput
@pytest.mark.parametrize("label, make, phrase", BAD_JSON, ids=[b[0] for b in BAD_JSON])
def test_bad_annotation_files(tmp_path, label, make, phrase):
    images_dir, ann = write_dataset(tmp_path, make())
    with pytest.raises(DatasetError) as info:
        CocoDataset(images_dir, ann)
    message = str(info.value)
    assert str(ann) in message
    assert phrase in message
    assert isinstance(info.value, EvaluationError)


@pytest.mark.badinput
def test_missing_annotation_file(tmp_path):
    with pytest.raises(DatasetError, match="annotation file not found"):
        CocoDataset(tmp_path, tmp_path / "nope.json")


@pytest.mark.badinput
def test_missing_image_file(tmp_path):
    data = base_json()
    images_dir, ann = write_dataset(tmp_path, data)
    (images_dir / "a.png").unlink()
    ds = CocoDataset(images_dir, ann)  # files are checked lazily
    with pytest.raises(DatasetError) as info:
        ds.validate_files()
    assert str(images_dir / "a.png") in str(info.value) and "1 of 2 image files missing" in str(info.value)
    with pytest.raises(DatasetError) as info:
        ds.open_image(3)
    assert str(images_dir / "a.png") in str(info.value) and "not found" in str(info.value)


@pytest.mark.badinput
def test_image_size_disagrees_with_annotations(tmp_path):
    images_dir, ann = write_dataset(tmp_path, base_json())
    Image.new("RGB", (31, 20)).save(images_dir / "a.png")
    with pytest.raises(DatasetError) as info:
        CocoDataset(images_dir, ann).open_image(3)
    assert str(images_dir / "a.png") in str(info.value) and "31 x 20" in str(info.value)


@pytest.mark.badinput
def test_unknown_image_id(small):
    with pytest.raises(DatasetError, match="no image with id 4"):
        small.image_size(4)


# ---- RLE helpers used by the demo data ----------------------------------------------------------------------------


def test_rle_from_mask_hand_values():
    assert rle_from_mask(OBJECT) == {"size": [4, 5], "counts": [5, 2, 2, 2, 9]}
    assert rle_from_mask(CROWD) == {"size": [4, 5], "counts": [16, 4]}
    full = np.ones((2, 3), dtype=bool)
    assert rle_from_mask(full) == {"size": [2, 3], "counts": [0, 6]}
    assert rle_from_mask(~full) == {"size": [2, 3], "counts": [6]}


def test_rle_from_mask_round_trips_through_pycocotools():
    rng = np.random.default_rng(0)
    for _ in range(20):
        h, w = rng.integers(1, 30, size=2)
        mask = rng.random((h, w)) < rng.uniform(0.05, 0.95)
        rle = rle_from_mask(mask)
        with quiet_pycocotools():
            decoded = mask_utils.decode(mask_utils.frPyObjects(copy.deepcopy(rle), int(h), int(w))).astype(bool)
        np.testing.assert_array_equal(decoded, mask)
        area, bbox = mask_area_bbox(mask)
        assert area == mask.sum()
        if mask.any():
            ys, xs = np.nonzero(mask)
            assert bbox == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
