"""Object discovery on real photos (docs/design.md §15): a VOC-layout folder written here from coco2017-mini photos
(with a difficult and a truncated object), keys-native on a seeded released ViT-S/16, both decoders' boxes and
CorLoc against the dense references of tests/test_discovery_decoders.py, the ledger's opening; COCO20k-style
names matched by id; every bad input of the issue's point 1 refused by name with nothing written."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch
from test_discovery_decoders import reference_box, reference_lost, reference_tokencut

from evaluate.datasets.boxes import BoxDataError, CocoBoxes, VocBoxes
from evaluate.datasets.kinds import spec_of
from evaluate.scores.boxes import box_hit

pytestmark = pytest.mark.coco
IDS = (139, 802, 11813)  # landscape 640 x 426, portrait 424 x 640, 333 x 500 (both sides padded)


def write_voc(root, coco_mini, ids=IDS):
    """A VOC year folder of `ids`: JPEGs copied, one XML each with the COCO boxes (non-crowd) in VOC's 1-based
    integers; the first object of the first image is difficult, the second truncated."""
    data = json.loads((coco_mini / "annotations.json").read_text())
    images = {i["id"]: i for i in data["images"]}
    for sub in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    expected = {}
    for n, image_id in enumerate(ids):
        image = images[image_id]
        name = f"2007_{image_id:06d}"
        shutil.copy(coco_mini / "images" / image["file_name"], root / "JPEGImages" / f"{name}.jpg")
        objects, boxes = [], []
        anns = [a for a in data["annotations"] if a["image_id"] == image_id and not a["iscrowd"]]
        for k, ann in enumerate(anns):
            x, y, w, h = ann["bbox"]
            xmin, ymin = math.floor(x) + 1, math.floor(y) + 1
            xmax, ymax = min(math.ceil(x + w), image["width"]), min(math.ceil(y + h), image["height"])
            difficult, truncated = int(n == 0 and k == 0), int(n == 0 and k == 1)
            objects.append(f"<object><name>thing</name><truncated>{truncated}</truncated><difficult>{difficult}"
                           f"</difficult><bndbox><xmin>{xmin}</xmin><ymin>{ymin}</ymin><xmax>{xmax}</xmax>"
                           f"<ymax>{ymax}</ymax></bndbox></object>")
            boxes.append((xmin - 1, ymin - 1, xmax, ymax))
        (root / "Annotations" / f"{name}.xml").write_text(
            f"<annotation><filename>{name}.jpg</filename><size><width>{image['width']}</width><height>"
            f"{image['height']}</height><depth>3</depth></size>{''.join(objects)}</annotation>")
        expected[name] = boxes
    (root / "ImageSets/Main/trainval.txt").write_text("".join(f"{n}\n" for n in expected))
    return expected


@pytest.fixture(scope="module")
def voc(coco_mini, tmp_path_factory):
    root = tmp_path_factory.mktemp("voc") / "VOC2007"
    return root, write_voc(root, coco_mini)


@pytest.fixture(scope="module")
def native_shard(voc, tmp_path_factory):
    """keys-native of the VOC folder through a seeded DINO ViT-S/16 file, listed and read as the workflow's jobs do
    (the manifest writer, then the stage's extraction through the one reading runner, which loads the network in
    the form the reading fixes: released, whatever `features.form` would say)."""
    from evaluate.datasets.manifest import write_manifest
    from evaluate.demo.checkpoints import make_demo_checkpoint
    from evaluate.discovery.protocol import extract
    from evaluate.networks.checkpoints import load_backbone

    work = tmp_path_factory.mktemp("native")
    path = make_demo_checkpoint(work / "dino.pth", fmt="dino-backbone", seed=0, architecture="vit-s16")
    spec = spec_of("discovery", "voc-test", "voc", root=str(voc[0]), split="trainval")
    write_manifest(spec=spec, roles=("eval",), shard_size=8, out=work / "manifest.json")
    torch.set_num_threads(2)
    extract(checkpoint={"name": "dino", "which": "teacher", "position_rule": None}, checkpoint_file=path, spec=spec,
            manifest_file=work / "manifest.json", shard="000", out_dir=work / "000",
            features={"dtype": "float32", "device": "cpu", "precision": "float32", "form": "backbone"})
    return load_backbone(path, which="teacher", form="released").model, VocBoxes(voc[0], "trainval"), work / "000"


def test_voc_boxes_every_object(voc):
    root, expected = voc
    dataset = VocBoxes(root, "trainval")
    assert dataset.names == sorted(expected) and dataset.image_ids == [1, 2, 3]
    boxes = dataset.boxes()
    assert {dataset.names[i - 1]: b for i, b in boxes.items()} == expected
    assert sum(len(b) for b in expected.values()) > 3  # difficult and truncated objects are counted too


def test_native_keys_padded_non_square(native_shard):
    """640 x 426 at p 16 pads to 640 x 432: a 27 x 40 grid; keys equal the network's on the padded tensor built
    here (zeros after normalising)."""
    from evaluate.pixels.images import normalise
    from evaluate.readings.native import NativeKeys

    model, dataset, out = native_shard
    shard = NativeKeys(out)
    row = shard.image_ids.index(dataset.image_ids[dataset.names.index("2007_000139")])
    assert shard.sizes[row] == (426, 640) and shard.grids[row] == (27, 40)
    portrait = dataset.names.index("2007_000802")
    assert shard.grids[portrait] == (40, 27)
    image = normalise(dataset.open_image(dataset.image_ids[row]))
    padded = torch.zeros(1, 3, 432, 640)
    padded[0, :, :426, :] = image
    with torch.inference_mode():
        direct = model.last_keys(padded)[0].numpy()
    np.testing.assert_allclose(shard.keys(row), direct, rtol=0, atol=1e-5)
    assert shard.meta["form"] == "released" and shard.meta["reading"] == "keys-native"


def test_boxes_and_corloc_equal_the_references(native_shard, tmp_path, monkeypatch):
    """Both decoders' boxes from the stage equal the dense references' boxes, and the ledger's CorLoc equals the
    share of hits computed here; the labels are opened once per decoder, in the ledger."""
    from evaluate.discovery.protocol import decode_boxes, score_discovery
    from evaluate.ledger.scoring import Scoring
    from evaluate.readings.native import NativeKeys

    from evaluate.outputs.discovery_figures import discovery_figures

    _, dataset, out = native_shard
    records = []
    result = decode_boxes(shard_dir=out, out=tmp_path / "boxes.json")
    shard = NativeKeys(out)
    truths = dataset.boxes()
    for name, reference in (("tokencut", reference_tokencut), ("lost", reference_lost)):
        expected = []
        for i, image_id in enumerate(shard.image_ids):
            height, width = shard.sizes[i]
            comp = reference(shard.keys(i), shard.grids[i])
            expected.append(list(reference_box(comp, 16, height, width)))
        assert result["decoders"][name]["boxes"] == expected
        hits = [box_hit(b, truths[i]) for b, i in zip(expected, shard.image_ids)]
        manifest = tmp_path / "manifest.json"
        manifest.write_text("{}")
        monkeypatch.chdir(tmp_path)
        scoring = Scoring(checkpoint="dino", run="dino", epoch=1, features_meta=out / "meta.json",
                          dataset="voc-test", sealed=False, budget=None, config_hash="test")
        record = score_discovery(scoring, spec=spec_of("discovery", "voc-test", "voc", root=str(dataset.root),
                                                       split="trainval"), decoder=name, manifest_file=manifest,
                                 boxes_files=[tmp_path / "boxes.json"], resamples=100, seed=0, code="test",
                                 out_record=tmp_path / f"{name}.json")
        records.append(record)
        assert record["measures"][0]["measure"] == "corloc_box"
        assert (record["reading"], record["decoder"]) == ("keys-native", name)
        assert record["truths"] == {str(i): [list(b) for b in truths[i]] for i in shard.image_ids}
        assert record["measures"][0]["value"] == pytest.approx(100.0 * sum(hits) / len(hits))
    openings = (tmp_path / "results/ledger/openings.csv").read_text().splitlines()
    assert len(openings) == 3 and all(",voc-test,eval," in row for row in openings[1:])
    files = discovery_figures(records, tmp_path / "figures", overlay_images=2, gallery_images=2)
    assert [f.name for f in files] == ["discovery_dino_voc-test.png", "discovery-gallery_dino_voc-test.png"]
    assert all(f.stat().st_size > 1000 for f in files)


def test_box_hit_exact_half():
    """IoU exactly 0.5 is a hit: pred 0..10 x 0..10 (100), truth 0..10 x 0..5 (50): inter 50, union 100."""
    assert box_hit((0, 0, 10, 10), [(0, 0, 10, 5)])
    assert not box_hit((0, 0, 10, 10), [(0, 0, 10, 4)])  # 40 / 100
    assert not box_hit(None, [(0, 0, 10, 10)]) and not box_hit((0, 0, 10, 10), [])


def test_coco20k_names_matched_by_id(coco_mini, tmp_path):
    names = tmp_path / "coco_20k_filenames.txt"
    names.write_text("train2014/COCO_train2014_000000000802.jpg\ntrain2014/COCO_train2014_000000000139.jpg\n")
    dataset = CocoBoxes(coco_mini / "images", coco_mini / "annotations.json", names)
    assert dataset.image_ids == [139, 802] and dataset.names == ["000000000139.jpg", "000000000802.jpg"]
    data = json.loads((coco_mini / "annotations.json").read_text())
    x, y, w, h = next(a["bbox"] for a in data["annotations"] if a["image_id"] == 139 and not a["iscrowd"])
    assert (round(x), round(y), round(x + w), round(y + h)) in dataset.boxes()[139]


def _refused(match, make):
    with pytest.raises(BoxDataError, match=match):
        make()


def test_bad_inputs_refused_by_name(voc, coco_mini, tmp_path):
    from evaluate.datasets.manifest import write_manifest

    root = tmp_path / "VOC2007"
    shutil.copytree(voc[0], root)
    first = sorted(voc[1])[0]
    xml = root / "Annotations" / f"{first}.xml"
    good = xml.read_text()
    xml.write_text(good[:-20])
    _refused(f"{xml}: malformed XML", lambda: VocBoxes(root, "trainval").boxes())
    xml.write_text(good.replace("<xmax>", "<xmax>9", 1))
    _refused(f"{xml}: box .* outside", lambda: VocBoxes(root, "trainval").boxes())
    xml.write_text(good)
    jpeg = root / "JPEGImages" / f"{first}.jpg"
    jpeg.rename(tmp_path / "aside.jpg")
    out = tmp_path / "manifest.json"
    spec = spec_of("discovery", "v", "voc", root=str(root), split="trainval")
    _refused(f"{jpeg}: the image of {first}", lambda: write_manifest(spec=spec, roles=("eval",), shard_size=2,
                                                                     out=out))
    assert not out.exists() and not list(tmp_path.glob(".tmp-*"))
    (tmp_path / "aside.jpg").rename(jpeg)
    (root / "ImageSets/Main/empty.txt").write_text("\n")
    _refused("empty.txt: the split file lists no image", lambda: VocBoxes(root, "empty"))
    names = tmp_path / "list.txt"
    names.write_text("train2014/COCO_train2014_000000000001.jpg\n")
    _refused(f"{names}: .* has no entry in", lambda: CocoBoxes(coco_mini / "images", coco_mini / "annotations.json",
                                                               names))
    images = tmp_path / "images"
    images.mkdir()
    names.write_text("COCO_train2014_000000000139.jpg\n")
    _refused(f"{images / '000000000139.jpg'}: image id 139 .* has no image file",
             lambda: CocoBoxes(images, coco_mini / "annotations.json", names))
