"""The train subset command (evaluate.datasets.subset): the rarest categories first, the fewest-held category gives the
next image, the same seed the same bytes, the size asked for, crowd-only images never chosen, refusals in one line;
on a hand-made file and on coco2017-mini's real train2017 annotations."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from evaluate.datasets.subset import (
    SubsetError,
    balanced_image_ids,
    main,
    make_subset,
    read_instances,
)


def instances(objects: dict[int, list[tuple[str, int]]]) -> dict:
    """A COCO instances file: image id -> [(category name, iscrowd)]; categories A, B, C (ids 1, 2, 3)."""
    names = {"A": 1, "B": 2, "C": 3}
    annotations = [{"id": 10 * i + k, "image_id": i, "category_id": names[c], "iscrowd": crowd, "area": 1.0,
                    "bbox": [0, 0, 1, 1], "segmentation": [[0, 0, 1, 0, 1, 1]]}
                   for i, objs in objects.items() for k, (c, crowd) in enumerate(objs)]
    return {"info": {"description": "hand-made"}, "licenses": [{"id": 1, "name": "x"}],
            "images": [{"id": i, "file_name": f"{i}.jpg", "width": 4, "height": 4} for i in objects],
            "annotations": annotations, "categories": [{"id": v, "name": k} for k, v in names.items()]}


# A is only in image 1; B in 1, 2, 3, 6; C in 4, 5, 6; image 7 holds only a crowd region
HAND = instances({1: [("A", 0), ("B", 0)], 2: [("B", 0)], 3: [("B", 0)], 4: [("C", 0)], 5: [("C", 0)],
                  6: [("B", 0), ("C", 0)], 7: [("B", 1)]})


@pytest.mark.parametrize("seed", range(6))
def test_the_rarest_category_first_then_the_least_held(seed):
    first, second = balanced_image_ids(HAND, 2, seed)
    assert first == 1  # A's only image (A has 1 image: the rarest); it also holds B
    assert second in (4, 5, 6)  # then C, held by no chosen image
    assert 7 not in balanced_image_ids(HAND, 6, seed)  # a crowd-only image is never a candidate


def test_the_same_seed_gives_the_same_bytes_and_another_seed_another_subset(tmp_path):
    source = tmp_path / "instances.json"
    source.write_text(json.dumps(HAND))
    orders = {tuple(balanced_image_ids(HAND, 3, seed)) for seed in range(20)}
    assert len(orders) > 1
    make_subset(source, tmp_path / "a.json", 3, seed=4)
    make_subset(source, tmp_path / "b.json", 3, seed=4)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "instances.json"]  # no temporary left


def test_the_subset_keeps_its_images_objects_every_category_and_says_what_it_is(tmp_path):
    source = tmp_path / "instances.json"
    source.write_text(json.dumps(HAND))
    subset = make_subset(source, tmp_path / "sub.json", 2, seed=0)
    ids = [image["id"] for image in subset["images"]]
    assert ids == sorted(ids) and len(ids) == 2 and ids[0] == 1
    assert [a["image_id"] for a in subset["annotations"]] == [1, 1, ids[1]] + ([ids[1]] if ids[1] == 6 else [])
    assert subset["categories"] == HAND["categories"] and subset["licenses"] == HAND["licenses"]
    info = subset["info"]
    assert info["description"] == "hand-made" and info["subset_of"]["images"] == 2 and info["subset_of"]["seed"] == 0
    assert info["subset_of"]["file"] == "instances.json" and len(info["subset_of"]["sha256"]) == 64
    assert json.loads((tmp_path / "sub.json").read_text()) == subset


@pytest.mark.parametrize(("images", "message"), [
    (0, r"instances\.json: the subset's size must be a positive number of images, got 0"),
    (7, r"instances\.json: asked for 7 images, but only 6 hold an object that is not a crowd region"),
])
def test_a_size_that_cannot_be_met_is_refused_in_one_line(tmp_path, images, message):
    source = tmp_path / "instances.json"
    source.write_text(json.dumps(HAND))
    with pytest.raises(SubsetError, match=message):
        make_subset(source, tmp_path / "sub.json", images, seed=0)
    assert not (tmp_path / "sub.json").exists()


def test_a_file_that_is_not_coco_instances_and_an_output_over_its_source_are_refused(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"images": []}')
    with pytest.raises(SubsetError, match=r"bad\.json: not a COCO instances file"):
        read_instances(bad)
    good = tmp_path / "instances.json"
    good.write_text(json.dumps(HAND))
    assert main([str(good), "--images", "2", "-o", str(good)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "would overwrite its source" in err and err.count("\n") == 1


@pytest.mark.coco
def test_on_coco2017_mini_train_the_single_image_categories_come_first_and_forty_images_cover_all(coco_mini, tmp_path,
                                                                                                  capsys):
    source = coco_mini / "annotations_train.json"
    data = json.loads(source.read_text())
    holders: dict[int, set[int]] = {}
    for a in data["annotations"]:
        if not a["iscrowd"]:
            holders.setdefault(a["category_id"], set()).add(a["image_id"])
    only = {next(iter(ids)) for ids in holders.values() if len(ids) == 1}
    assert (len(data["images"]), len(holders), len(only)) == (80, 80, 18)  # 18 categories have one image each
    chosen = balanced_image_ids(data, 40, seed=0)
    assert set(chosen[:18]) == only
    assert main([str(source), "--images", "40", "--seed", "0", "-o", str(tmp_path / "sub.json")]) == 0
    subset = json.loads((tmp_path / "sub.json").read_text())
    assert sorted(image["id"] for image in subset["images"]) == sorted(chosen)
    present = Counter(a["category_id"] for a in subset["annotations"] if not a["iscrowd"])
    assert len(present) == 80 and len(subset["categories"]) == 80
    assert len(subset["annotations"]) == sum(1 for a in data["annotations"] if a["image_id"] in set(chosen))
    assert "40 images" in capsys.readouterr().out
