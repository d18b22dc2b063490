"""The semantic-segmentation data kinds (evaluate.datasets.cocostuff, cityscapes, potsdam, label_folder; DESIGN 16):
each read from a folder written here in its own layout from real coco2017-mini photos and their instance masks, the
classes checked against COCO's own category names, and each refusal of the contract, one line naming the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from PIL import Image

from evaluate import EvaluationError
from evaluate.datasets.cityscapes import CityscapesSet
from evaluate.datasets.cocostuff import CLASS_NAMES as COCOSTUFF_NAMES
from evaluate.datasets.cocostuff import CURATED_LIST, CocoStuffSet
from evaluate.datasets.label_folder import LabelFolderSet
from evaluate.datasets.potsdam import PotsdamSet
from evaluate.datasets.semantic import SemanticDataError
from evaluate import ConfigError
from evaluate.datasets import open_dataset
from evaluate.datasets.kinds import spec_of
from evaluate.demo.scenes import make_scene
from evaluate.demo.semseg import make_demo_semseg, scene_labels

IGNORE = 255
N_IMAGES = 3
SKY_OTHER, ROAD = 156, 148  # COCO-Stuff fine ids (category id - 1) of two stuff classes: coarse "sky", "ground"
PERSON_ID, CAR_ID = 24, 26  # Cityscapes label ids


def open_semantic_set(entry: dict):
    """A semseg config entry opened as a job opens it: its spec (`spec_of`), then its kind's opener."""
    fields = {k: v for k, v in entry.items() if k != "kind"}
    return open_dataset(spec_of("semseg", "s", entry["kind"], **fields))


@pytest.fixture(scope="module")
def photos(coco_mini):
    """The first N_IMAGES val photos by id: [(id, jpeg path, category per pixel (0 none, -1 crowd), supercategory of
    each category id)]."""
    from pycocotools.coco import COCO

    from evaluate.datasets.coco import quiet_pycocotools

    with quiet_pycocotools():
        coco = COCO(str(coco_mini / "annotations.json"))
    supercategory = {c["id"]: c["supercategory"] for c in coco.loadCats(coco.getCatIds())}
    out = []
    for image_id in sorted(coco.getImgIds())[:N_IMAGES]:
        info = coco.loadImgs(image_id)[0]
        category = np.zeros((info["height"], info["width"]), dtype=np.int64)
        for ann in coco.loadAnns(coco.getAnnIds(imgIds=image_id)):
            mask = coco.annToMask(ann).astype(bool)
            category[mask] = -1 if ann["iscrowd"] else ann["category_id"]
        out.append((image_id, coco_mini / "images" / info["file_name"], category, supercategory))
    return out


def write_png(path: Path, array: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)
    return path


def assert_one_line(exc: pytest.ExceptionInfo, path: Path | str) -> None:
    message = str(exc.value)
    assert isinstance(exc.value, EvaluationError) and "\n" not in message and str(path) in message, message


# ---------------------------------------------------------------------------------------------------- COCO-Stuff


def stuff_fine_ids(category: np.ndarray) -> np.ndarray:
    """A stuffthingmap: thing pixels their fine id (category id - 1), the rest sky-other above the middle and road
    below, crowd 255."""
    fine = np.where(np.arange(category.shape[0])[:, None] < category.shape[0] // 2, SKY_OTHER, ROAD)
    fine = np.where(category > 0, category - 1, fine)
    return np.where(category < 0, IGNORE, fine).astype(np.uint8)


def cocostuff_root(tmp: Path, photos, split: str = "val2017", listed=None) -> Path:
    root = tmp / "cocostuff"
    for image_id, jpeg, category, _ in photos:
        name = f"{image_id:012d}"
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(jpeg, root / "images" / split / f"{name}.jpg")
        write_png(root / "annotations" / split / f"{name}.png", stuff_fine_ids(category))
    listed = [p[0] for p in photos] if listed is None else listed
    curated = root / "curated" / split / CURATED_LIST
    curated.parent.mkdir(parents=True, exist_ok=True)
    curated.write_text("".join(f"{i:012d}\n" for i in reversed(listed)))  # the list's order is not the set's
    return root


def test_cocostuff_reads_the_curated_ids_in_order_and_maps_fine_ids_to_stegos_27_classes(tmp_path, photos):
    """Thing pixels take their COCO supercategory's class (STEGO's 12 thing classes are COCO's supercategories),
    sky-other becomes "sky", road "ground", 255 stays ignore; an image left out of the list is not read."""
    root = cocostuff_root(tmp_path, photos, listed=[p[0] for p in photos[:2]])
    data = open_semantic_set({"kind": "cocostuff", "root": str(root)})
    assert isinstance(data, CocoStuffSet) and data.kind == "cocostuff"
    assert data.image_ids == sorted(p[0] for p in photos[:2]) and data.names == [f"{i:012d}" for i in data.image_ids]
    assert len(data.class_names) == 27 and data.class_names == COCOSTUFF_NAMES
    for image_id, jpeg, category, supercategory in photos[:2]:
        labels = data.labels(image_id)
        assert labels.shape == category.shape and labels.dtype == np.uint8
        names = np.array(data.class_names + ("",) * 229)[labels]
        for cat in np.unique(category[category > 0]):
            assert set(names[category == cat]) == {supercategory[int(cat)]}
        top = (category == 0) & (np.arange(category.shape[0])[:, None] < category.shape[0] // 2)
        assert set(names[top]) == {"sky"} and set(names[(category == 0) & ~top]) == {"ground"}
        assert (labels[category < 0] == IGNORE).all()
        img = data.open_image(image_id)
        assert img.mode == "RGB" and img.size == (category.shape[1], category.shape[0])
        assert np.array_equal(np.asarray(img), np.asarray(Image.open(jpeg).convert("RGB")))


def test_cocostuff_given_apart_is_the_same_set(tmp_path, photos):
    root = cocostuff_root(tmp_path, photos)
    apart = CocoStuffSet.from_spec({"kind": "cocostuff", "images": root / "images" / "val2017",
                                    "labels": root / "annotations" / "val2017",
                                    "list": root / "curated" / "val2017" / CURATED_LIST})
    whole = CocoStuffSet.from_spec({"kind": "cocostuff", "root": root, "split": "val2017"})
    assert apart.image_ids == whole.image_ids and apart.annotations_sha256 == whole.annotations_sha256
    assert np.array_equal(apart.labels(whole.image_ids[0]), whole.labels(whole.image_ids[0]))


def test_the_label_identity_follows_the_label_bytes_without_decoding_them(tmp_path, photos):
    root = cocostuff_root(tmp_path, photos)
    before = CocoStuffSet.from_root(root).annotations_sha256
    image = root / "images" / "val2017" / f"{photos[0][0]:012d}.jpg"
    image.write_bytes(image.read_bytes() + b"\0")  # an image's bytes are not the labels'
    assert CocoStuffSet.from_root(root).annotations_sha256 == before
    label = root / "annotations" / "val2017" / f"{photos[1][0]:012d}.png"
    label.write_bytes(b"not a png")  # hashed, not decoded
    data = CocoStuffSet.from_root(root)
    assert data.annotations_sha256 != before
    with pytest.raises(SemanticDataError) as exc:
        data.labels(photos[1][0])
    assert_one_line(exc, label)


def test_cocostuff_refusals(tmp_path, photos):
    root = cocostuff_root(tmp_path, photos)
    first = f"{photos[0][0]:012d}"
    curated = root / "curated" / "val2017" / CURATED_LIST
    saved = curated.read_text()
    curated.unlink()
    with pytest.raises(SemanticDataError, match="not every image of val2017") as exc:
        CocoStuffSet.from_root(root)
    assert_one_line(exc, curated)
    curated.write_text(saved)
    json_file = root / "annotations" / "stuff_val2017.json"
    json_file.write_text("{}")
    CocoStuffSet.from_root(root)  # beside the PNG labels, the JSON files are not in the way
    pngs = root / "annotations" / "val2017"
    pngs.rename(root / "pngs")
    with pytest.raises(SemanticDataError, match="JSON annotations are not read") as exc:
        CocoStuffSet.from_root(root)
    assert_one_line(exc, json_file)
    with pytest.raises(SemanticDataError, match="JSON annotations are not read"):
        CocoStuffSet(root / "images" / "val2017", json_file, curated)
    json_file.unlink()
    (root / "annotations" / "COCO_train2014_000000000077.mat").write_bytes(b"")
    with pytest.raises(SemanticDataError, match="COCO-Stuff-10k's .mat labels") as exc:
        CocoStuffSet.from_root(root)
    assert_one_line(exc, root / "annotations" / "COCO_train2014_000000000077.mat")
    (root / "pngs").rename(pngs)
    label = root / "annotations" / "val2017" / f"{first}.png"
    mat = label.with_suffix(".mat")
    label.rename(mat)
    with pytest.raises(SemanticDataError, match="COCO-Stuff-10k's .mat labels") as exc:
        CocoStuffSet.from_root(root)
    assert_one_line(exc, mat)
    mat.unlink()
    with pytest.raises(SemanticDataError, match="label missing") as exc:
        CocoStuffSet.from_root(root)
    assert_one_line(exc, label)
    category = photos[0][2]
    wrong = stuff_fine_ids(category)
    wrong[0, 0] = 200
    write_png(label, wrong)
    with pytest.raises(SemanticDataError, match="label value 200 is not a COCO-Stuff fine id") as exc:
        CocoStuffSet.from_root(root).labels(photos[0][0])
    assert_one_line(exc, label)
    write_png(label, stuff_fine_ids(category)[:-1])
    with pytest.raises(SemanticDataError, match="label is .* but its image") as exc:
        CocoStuffSet.from_root(root).labels(photos[0][0])
    assert_one_line(exc, label)
    write_png(label, np.stack([stuff_fine_ids(category)] * 3, axis=-1))
    with pytest.raises(SemanticDataError, match="colour labels, not class indices") as exc:
        CocoStuffSet.from_root(root).labels(photos[0][0])
    assert_one_line(exc, label)
    (root / "images" / "val2017" / f"{first}.jpg").unlink()
    with pytest.raises(SemanticDataError, match="image missing"):
        CocoStuffSet.from_root(root)


def test_images_open_as_stored_without_their_exif_orientation(tmp_path, photos):
    """A photo tagged 'rotate 90' (EXIF orientation 6) is read as stored: the labels are drawn on those pixels."""
    root = cocostuff_root(tmp_path, photos)
    jpeg = root / "images" / "val2017" / f"{photos[0][0]:012d}.jpg"
    stored = Image.open(photos[0][1]).convert("RGB")
    exif = Image.Exif()
    exif[0x0112] = 6
    stored.save(jpeg, exif=exif.tobytes(), quality=95)
    data = CocoStuffSet.from_root(root)
    img = data.open_image(photos[0][0])
    assert img.size == stored.size and data.labels(photos[0][0]).shape == (stored.height, stored.width)


# ---------------------------------------------------------------------------------------------------- Cityscapes


def city_label_ids(category: np.ndarray) -> np.ndarray:
    """Label ids: people 24 (person), cars 26 (car), other things 33 (bicycle), the rest 7 (road); crowd 0
    (unlabeled), a stripe of 34 and of 6 (outside 7..33: ignore)."""
    ids = np.select([category == 1, category == 3, category > 0, category < 0], [PERSON_ID, CAR_ID, 33, 0], 7)
    ids[:, :4] = 34
    ids[:, 4:8] = 6
    return ids.astype(np.uint8)


def cityscapes_root(tmp: Path, photos, split: str = "val") -> Path:
    root = tmp / "cityscapes"
    for image_id, jpeg, category, _ in photos:
        city = "bonn" if image_id % 2 else "aachen"
        name = f"{city}_000000_{image_id:06d}"
        frame = root / "leftImg8bit" / split / city / f"{name}_leftImg8bit.png"
        frame.parent.mkdir(parents=True, exist_ok=True)
        Image.open(jpeg).convert("RGB").save(frame)
        label_dir = root / "gtFine" / split / city
        write_png(label_dir / f"{name}_gtFine_labelIds.png", city_label_ids(category))
        write_png(label_dir / f"{name}_gtFine_color.png", np.zeros((*category.shape, 4), np.uint8))  # not read
    return root


def test_cityscapes_classes_are_label_id_minus_7_and_everything_else_is_ignore(tmp_path, photos):
    root = cityscapes_root(tmp_path, photos)
    data = open_semantic_set({"kind": "cityscapes", "root": str(root)})
    assert isinstance(data, CityscapesSet) and len(data.class_names) == 27
    assert data.names == sorted(data.names) and data.image_ids == list(range(N_IMAGES))
    assert data.class_names[PERSON_ID - 7] == "person" and data.class_names[CAR_ID - 7] == "car"
    assert (data.class_names[0], data.class_names[26]) == ("road", "bicycle")
    for image_id, name in zip(data.image_ids, data.names):
        category = next(c for i, _, c, _ in photos if name.endswith(f"{i:06d}"))
        labels = data.labels(image_id)
        expected = city_label_ids(category).astype(np.int64) - 7
        expected[(expected < 0) | (expected > 26)] = IGNORE
        assert np.array_equal(labels, expected.astype(np.uint8))
        assert (labels[:, :8] == IGNORE).all() and (labels[category == 1][:, None] == 17).all()
        assert data.open_image(image_id).size == (category.shape[1], category.shape[0])
        assert data.label_path(image_id).name.endswith("_gtFine_labelIds.png")


def test_cityscapes_refusals(tmp_path, photos):
    root = cityscapes_root(tmp_path, photos)
    with pytest.raises(SemanticDataError, match="test labels are void") as exc:
        CityscapesSet.from_spec({"kind": "cityscapes", "root": root, "split": "test"})
    assert_one_line(exc, root)
    with pytest.raises(SemanticDataError, match="gtFine's label ids only"):
        CityscapesSet.from_spec({"kind": "cityscapes", "root": root, "labels": "gtCoarse"})
    data = CityscapesSet(root)
    label = data.label_path(0)
    train_ids = label.with_name(label.name.replace("labelIds", "trainIds"))
    label.rename(train_ids)
    with pytest.raises(SemanticDataError, match="trainIds .19 classes. are another protocol") as exc:
        CityscapesSet(root)
    assert_one_line(exc, train_ids)
    train_ids.unlink()
    with pytest.raises(SemanticDataError, match="label missing") as exc:
        CityscapesSet(root)
    assert_one_line(exc, label)
    write_png(label, np.zeros((10, 10, 4), np.uint8))  # a gtFine_color image in its place
    with pytest.raises(SemanticDataError, match="colour labels, not class indices") as exc:
        CityscapesSet(root).labels(0)
    assert_one_line(exc, label)
    shutil.move(root / "gtFine", root / "gtCoarse")
    with pytest.raises(SemanticDataError, match="coarse labels are another protocol") as exc:
        CityscapesSet(root)
    assert_one_line(exc, root / "gtCoarse")


# ------------------------------------------------------------------------------------------------------ Potsdam


def potsdam_tile(jpeg: Path, category: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 200 x 200 tile as IIC writes it: img uint8 (RGB + an infrared channel), gt int32 in 0..5 (things by
    category id mod 6, the rest 2), crowd 255."""
    rgb = np.asarray(Image.open(jpeg).convert("RGB"))[:200, :200]
    img = np.concatenate([rgb, rgb[..., :1] // 2], axis=-1).astype(np.uint8)
    part = category[:200, :200]
    gt = np.where(part > 0, part % 6, 2)
    return img, np.where(part < 0, IGNORE, gt).astype(np.int32)


def potsdam_root(tmp: Path, photos) -> Path:
    root = tmp / "potsdam"
    for folder in ("imgs", "gt"):
        (root / folder).mkdir(parents=True)
    for n, (_, jpeg, category, _) in enumerate(photos):
        img, gt = potsdam_tile(jpeg, category)
        scipy.io.savemat(root / "imgs" / f"{10 - 4 * n}.mat", {"img": img})
        scipy.io.savemat(root / "gt" / f"{10 - 4 * n}.mat", {"gt": gt})
    (root / "labelled_test.txt").write_text("".join(f"{10 - 4 * n}\n" for n in range(len(photos))))
    scipy.io.savemat(root / "imgs" / "99.mat", {"img": np.zeros((200, 200, 4), np.uint8)})  # unlisted: not read
    return root


def test_potsdam_reads_the_listed_tiles_rgb_and_merges_six_classes_into_three(tmp_path, photos):
    root = potsdam_root(tmp_path, photos)
    data = open_semantic_set({"kind": "potsdam", "root": str(root)})
    assert isinstance(data, PotsdamSet) and data.image_ids == [2, 6, 10] and data.names == ["2", "6", "10"]
    assert data.class_names == ("roads and cars", "buildings and clutter", "trees and vegetation")
    merged = {0: 0, 4: 0, 1: 1, 5: 1, 2: 2, 3: 2, IGNORE: IGNORE}  # DESIGN 16's {0, 4}, {1, 5}, {2, 3}
    for tile, (_, jpeg, category, _) in zip((10, 6, 2), photos):
        img, gt = potsdam_tile(jpeg, category)
        assert np.array_equal(np.asarray(data.open_image(tile)), img[..., :3])
        assert data.image_size(tile) == (200, 200)
        assert np.array_equal(data.labels(tile), np.vectorize(merged.get)(gt).astype(np.uint8))


def test_potsdam_refusals(tmp_path, photos):
    root = potsdam_root(tmp_path, photos)
    data = PotsdamSet(root)
    gt = data.label_path(2)
    scipy.io.savemat(gt, {"gt": np.full((200, 200), 7, np.int32)})
    with pytest.raises(SemanticDataError, match="label value 7 is not a Potsdam class") as exc:
        data.labels(2)
    assert_one_line(exc, gt)
    scipy.io.savemat(gt, {"gt": np.zeros((100, 200), np.int32)})
    with pytest.raises(SemanticDataError, match="label is 200 x 100 px but its image") as exc:
        data.labels(2)
    assert_one_line(exc, gt)
    scipy.io.savemat(gt, {"label": np.zeros((200, 200), np.int32)})
    with pytest.raises(SemanticDataError, match="no 'gt' array") as exc:
        data.labels(2)
    assert_one_line(exc, gt)
    gt.write_bytes(b"not a mat file")
    with pytest.raises(SemanticDataError, match="not a readable MATLAB file") as exc:
        data.labels(2)
    assert_one_line(exc, gt)
    image = data.image_path(6)
    scipy.io.savemat(image, {"img": np.zeros((200, 200, 3), np.float32)})
    with pytest.raises(SemanticDataError, match="must be uint8") as exc:
        data.open_image(6)
    assert_one_line(exc, image)
    gt.unlink()
    with pytest.raises(SemanticDataError, match="label missing") as exc:
        PotsdamSet(root)
    assert_one_line(exc, gt)


def test_an_id_list_with_a_byte_order_mark_is_read_and_one_naming_a_tile_twice_is_refused(tmp_path, photos):
    root = potsdam_root(tmp_path, photos)
    ids_file = root / "labelled_test.txt"
    ids_file.write_bytes(b"\xef\xbb\xbf" + b"10\r\n6\r\n\r\n2\r\n")  # as a Windows editor saves it
    assert PotsdamSet(root).image_ids == [2, 6, 10]
    ids_file.write_text("10\n6\n2\n6\n")
    with pytest.raises(SemanticDataError, match="line 4 repeats '6' of line 2") as exc:
        PotsdamSet(root)
    assert_one_line(exc, ids_file)
    ids_file.write_bytes("10\n6\n2\n".encode("utf-16"))
    with pytest.raises(SemanticDataError, match="UTF-16") as exc:
        PotsdamSet(root)
    assert_one_line(exc, ids_file)


# ------------------------------------------------------------------------------------------ folder, and the demo


def folder_values(category: np.ndarray) -> np.ndarray:
    return np.where(category < 0, IGNORE, np.where(category > 0, 1 + category % 3, 0)).astype(np.uint8)


def label_folder(tmp: Path, photos, images: Path, labels: Path) -> None:
    for image_id, jpeg, category, _ in photos:
        images.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(jpeg, images / f"photo_{image_id}.jpg")
        write_png(labels / f"photo_{image_id}.png", folder_values(category))
    (tmp / "classes.txt").write_text("background\nthing a\nthing b\nthing c\n\n")


@pytest.mark.parametrize("layout", ["apart", "stego"])
def test_a_folder_pairs_images_and_labels_by_stem_in_name_order(tmp_path, photos, layout):
    if layout == "apart":
        images, labels = tmp_path / "images", tmp_path / "labels"
        spec = {"kind": "folder", "images": images, "labels": labels, "classes": tmp_path / "classes.txt"}
    else:
        images, labels = tmp_path / "set" / "imgs" / "val", tmp_path / "set" / "labels" / "val"
        spec = {"kind": "folder", "root": tmp_path / "set", "split": "val", "classes": tmp_path / "classes.txt"}
    label_folder(tmp_path, photos, images, labels)
    data = open_semantic_set(spec)
    assert isinstance(data, LabelFolderSet) and data.class_names == ("background", "thing a", "thing b", "thing c")
    assert data.names == sorted(f"photo_{p[0]}" for p in photos) and data.image_ids == list(range(N_IMAGES))
    by_name = {f"photo_{p[0]}": p for p in photos}
    for image_id, name in zip(data.image_ids, data.names):
        assert np.array_equal(data.labels(image_id), folder_values(by_name[name][2]))


def test_folder_refusals(tmp_path, photos):
    images, labels, classes = tmp_path / "images", tmp_path / "labels", tmp_path / "classes.txt"
    label_folder(tmp_path, photos, images, labels)
    first = f"photo_{photos[0][0]}"
    label = labels / f"{first}.png"
    place = LabelFolderSet(images, labels, classes).names.index(first)
    write_png(label, np.full(photos[0][2].shape, 4, np.uint8))
    with pytest.raises(SemanticDataError, match="label value 4 is not a class .* 4 classes") as exc:
        LabelFolderSet(images, labels, classes).labels(place)
    assert_one_line(exc, label)
    write_png(label, np.zeros((*photos[0][2].shape, 3), np.uint8))
    with pytest.raises(SemanticDataError, match="colour labels, not class indices") as exc:
        LabelFolderSet(images, labels, classes).labels(place)
    assert_one_line(exc, label)
    stray = write_png(labels / "orphan.png", np.zeros((4, 4), np.uint8))
    with pytest.raises(SemanticDataError, match="label without an image") as exc:
        LabelFolderSet(images, labels, classes)
    assert_one_line(exc, stray)
    stray.unlink()
    label.unlink()
    with pytest.raises(SemanticDataError, match="label missing") as exc:
        LabelFolderSet(images, labels, classes)
    assert_one_line(exc, label)
    classes.write_text("background\n\nthing\n")
    with pytest.raises(SemanticDataError, match="line 2 is blank") as exc:
        LabelFolderSet(images, labels, classes)
    assert_one_line(exc, classes)
    with pytest.raises(SemanticDataError, match="needs its classes file"):
        open_semantic_set({"kind": "folder", "images": images, "labels": labels})
    with pytest.raises(ConfigError, match="semseg: kind 'voc' is not one of cocostuff, cityscapes, potsdam, folder"):
        open_semantic_set({"kind": "voc"})


def test_a_corrupt_image_is_one_line_naming_it(tmp_path, photos):
    images, labels = tmp_path / "images", tmp_path / "labels"
    label_folder(tmp_path, photos, images, labels)
    data = LabelFolderSet(images, labels, tmp_path / "classes.txt")
    path = data.image_path(1)
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(SemanticDataError) as exc:
        data.open_image(1)
    assert_one_line(exc, path)


def test_the_demo_writes_a_folder_set_the_folder_kind_reads_back(tmp_path):
    """Scenes 1..3 of seed 4: the labels are each painted shape's category (1 disc, 2 box, 3 wedge), 0 background,
    255 on the crowd dots; the images are the scenes' pixels; same arguments, same bytes."""
    out = make_demo_semseg(tmp_path / "demo", n_images=3, seed=4)
    data = LabelFolderSet.from_spec({"kind": "folder", "images": out / "images", "labels": out / "labels",
                                     "classes": out / "classes.txt"})
    assert data.class_names == ("background", "disc", "box", "wedge") and data.names[0] == "demo_0001"
    crowd_seen = False
    for image_id in data.image_ids:
        pixels, annotations, painted = make_scene(4, image_id + 1)
        labels = data.labels(image_id)
        assert np.array_equal(np.asarray(data.open_image(image_id)), pixels)
        for k, ann in enumerate(annotations):
            if not ann["iscrowd"]:
                assert (labels[painted == k + 1] == ann["category_id"]).all()
        assert (labels[painted == 0] == 0).all() and (labels[painted < 0] == IGNORE).all()
        assert np.array_equal(labels, scene_labels(annotations, painted))
        crowd_seen |= bool((painted < 0).any())
    again = make_demo_semseg(tmp_path / "again", n_images=3, seed=4)
    for rel in ("images/demo_0002.png", "labels/demo_0002.png", "classes.txt"):
        assert (out / rel).read_bytes() == (again / rel).read_bytes()
