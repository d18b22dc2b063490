"""The bad-input matrix, continued for every loader (issue 34): each case below reached the loader it names and was
a traceback, an unclear message or a silent acceptance before; now it is one line naming the file, raised as the
tool's own error (an `EvaluationError`), and a manifest job that meets it writes nothing.

Kinds: images larger than the decompression-bomb limit (PIL's check, met before decoding); an image too small for
one patch in a saliency set; boxes checked against the real image (its header), not the size an annotation declares;
inverted boxes; split and list files with a UTF-8 byte-order mark (accepted), not in UTF-8 (refused naming the byte
offset), or listing a name twice (both lines named); a COCO file's structure checked when it is listed; checkpoint
archives whose CRC fails, and files that are not checkpoints named for what they are; the position table's rows
reported as the file holds them; config errors naming the experiment file actually read.

Every input is built for real in tmp_path (tests/badinputs.py); nothing is mocked.
"""

from __future__ import annotations

import codecs
import gzip
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from test_bad_inputs import assert_names_and_says

import badinputs as bi
from evaluate import ConfigError
from evaluate.datasets.boxes import BoxDataError, CocoBoxes, VocBoxes
from evaluate.datasets.coco import CocoDataset, DatasetError
from evaluate.datasets.davis import DavisDataset, VideoDatasetError, read_mask
from evaluate.datasets.kinds import spec_of
from evaluate.datasets.manifest import write_manifest
from evaluate.datasets.saliency import SaliencyDataError, open_saliency_set, read_image, read_truth
from evaluate.networks.checkpoints import CheckpointError, load_backbone
from evaluate.pixels.images import ImageError, open_rgb

pytestmark = pytest.mark.badinput

BOMB = (20_000, 20_000)  # 400 M pixels: above twice PIL's limit (89,478,485), where PIL raises its own error
OVER_LIMIT = (10_000, 10_000)  # 100 M pixels: above PIL's limit, below twice it, where PIL only warns


def one_line(err: BaseException) -> str:
    message = str(err)
    assert "\n" not in message, f"more than one line: {message!r}"
    return message


# ============================================================================================ images: size limits


def test_an_image_over_the_pixel_limit_is_refused_before_decoding_not_read_as_corrupt(tmp_path):
    """PIL only warns between its limit and twice it, then decodes: the tool refuses at the limit, naming it."""
    path = bi.png_header(tmp_path / "images" / "huge.png", *OVER_LIMIT)
    with pytest.raises(ImageError) as info:
        open_rgb(path)
    message = assert_names_and_says(info.value, path, "100,000,000 pixels (10000 x 10000 px)",
                                    "decompression-bomb limit")
    assert message.startswith(f"{path}: ") and "corrupt" not in message
    one_line(info.value)


@pytest.mark.parametrize("what", ["image", "mask"])
def test_a_decompression_bomb_in_a_saliency_set_is_refused_naming_the_file(tmp_path, what):
    from PIL import Image

    images, masks = tmp_path / "images", tmp_path / "ground_truth_mask"
    bi.rgb_png(images / "a.png", 32, 32)
    masks.mkdir()
    Image.fromarray(np.zeros((32, 32), np.uint8)).save(masks / "a.png")
    bomb = bi.png_header((images if what == "image" else masks) / "a.png", *BOMB, grey=what == "mask")
    (pair,) = open_saliency_set(tmp_path).pairs  # listing opens no file
    with pytest.raises(SaliencyDataError) as info:
        read_image(pair) if what == "image" else read_truth(pair)
    assert_names_and_says(info.value, bomb, "400,000,000 pixels", "decompression-bomb limit")
    one_line(info.value)


def test_a_decompression_bomb_as_a_davis_mask_is_refused_naming_the_file(tmp_path):
    path = bi.png_header(tmp_path / "00000.png", *BOMB, grey=True)
    with pytest.raises(VideoDatasetError) as info:
        read_mask(path)
    assert_names_and_says(info.value, path, "the mask has 400,000,000 pixels", "decompression-bomb limit")


def test_a_saliency_image_smaller_than_a_patch_is_refused_naming_the_file(tmp_path):
    from PIL import Image

    images, masks = tmp_path / "images", tmp_path / "ground_truth_mask"
    bi.rgb_png(images / "tiny.png", height=6, width=7)
    masks.mkdir()
    Image.fromarray(np.zeros((6, 7), np.uint8)).save(masks / "tiny.png")
    dataset = open_saliency_set(tmp_path)
    with pytest.raises(SaliencyDataError) as info:
        dataset.open_image(0)  # what the saliency reading opens
    assert_names_and_says(info.value, images / "tiny.png", "7 x 6 px", "at least 16 px")


# ====================================================================================== boxes against the image


def test_a_voc_box_is_checked_against_the_real_image_not_the_size_its_xml_declares(tmp_path):
    root = bi.write_voc(tmp_path / "VOC2007", {"a": {"size": (64, 48), "declared": (500, 375),
                                                     "boxes": [(10, 10, 300, 200)]}})
    with pytest.raises(BoxDataError) as info:
        VocBoxes(root, "trainval").boxes()
    xml, jpeg = root / "Annotations" / "a.xml", root / "JPEGImages" / "a.jpg"
    message = assert_names_and_says(info.value, xml, str(jpeg), "500 x 375", "64 x 48 px")
    assert message.startswith(f"{xml}: ")
    one_line(info.value)


def test_a_coco_box_is_checked_against_the_real_image_not_the_size_its_entry_declares(tmp_path):
    images, annotations = bi.write_coco_boxes(tmp_path, [{"id": 9, "size": (64, 48), "declared": (640, 480)}],
                                              [{"id": 1, "image_id": 9, "bbox": [100, 100, 200, 100], "iscrowd": 0}])
    with pytest.raises(BoxDataError) as info:
        CocoBoxes(images, annotations).boxes()
    assert_names_and_says(info.value, annotations, str(images / "000000000009.jpg"), "image id 9", "640 x 480",
                          "64 x 48 px")


@pytest.mark.parametrize("box, phrase", [((40, 10, 20, 30), "x1 < x0"), ((10, 40, 30, 20), "y1 < y0")])
def test_an_inverted_voc_box_is_named_inverted_not_outside(tmp_path, box, phrase):
    root = bi.write_voc(tmp_path / "VOC2007", {"a": {"size": (64, 48), "boxes": [box]}})
    with pytest.raises(BoxDataError) as info:
        VocBoxes(root, "trainval").boxes()
    message = assert_names_and_says(info.value, root / "Annotations" / "a.xml", "inverted", phrase)
    assert "outside" not in message


def test_a_coco_box_of_negative_width_is_named_inverted(tmp_path):
    images, annotations = bi.write_coco_boxes(tmp_path, [{"id": 9, "size": (64, 48)}],
                                              [{"id": 4, "image_id": 9, "bbox": [30, 5, -12, 10], "iscrowd": 0}])
    with pytest.raises(BoxDataError) as info:
        CocoBoxes(images, annotations).boxes()
    message = assert_names_and_says(info.value, annotations, "annotation 4", "inverted")
    assert "outside" not in message


# ============================================================================================== split and list files


def test_a_voc_split_file_with_a_utf8_byte_order_mark_is_read(tmp_path):
    root = bi.write_voc(tmp_path / "VOC2007", {"a": {"size": (32, 24)}, "b": {"size": (32, 24)}},
                        split_text=codecs.BOM_UTF8 + b"a\r\nb\r\n")
    dataset = VocBoxes(root, "trainval")
    assert dataset.names == ["a", "b"] and dataset.image_ids == [1, 2]


def test_a_davis_sequence_list_with_a_utf8_byte_order_mark_is_read(tmp_path):
    from videos import small_davis

    root = small_davis(tmp_path / "davis")
    listed = root / "val.txt"
    listed.write_bytes(codecs.BOM_UTF8 + b"shapes2\nshape1\n")
    assert DavisDataset(root, sequences_file=listed).names == ["shapes2", "shape1"]


def _latin1(text: str) -> bytes:
    return text.encode("latin-1")


def _voc_not_utf8(tmp_path: Path):
    root = bi.write_voc(tmp_path / "VOC2007", {"a": {"size": (32, 24)}}, split_text=_latin1("a\nv\xe9lo\n"))
    return root / "ImageSets" / "Main" / "trainval.txt", lambda: VocBoxes(root, "trainval"), BoxDataError


def _image_list_not_utf8(tmp_path: Path):
    images, annotations = bi.write_coco_boxes(tmp_path, [{"id": 9, "size": (32, 24)}])
    listed = tmp_path / "coco_20k_filenames.txt"
    listed.write_bytes(_latin1("train2014/COCO_train2014_000000000009.jpg\nv\xe9lo/x.jpg\n"))
    return listed, lambda: CocoBoxes(images, annotations, listed), BoxDataError


def _davis_list_not_utf8(tmp_path: Path):
    from videos import small_davis

    root = small_davis(tmp_path / "davis")
    listed = root / "val.txt"
    listed.write_bytes(_latin1("shapes2\nv\xe9lo\n"))
    return listed, lambda: DavisDataset(root, sequences_file=listed), VideoDatasetError


NOT_UTF8 = {"voc-split": (_voc_not_utf8, 3), "coco-image-list": (_image_list_not_utf8, 43),
            "davis-sequence-list": (_davis_list_not_utf8, 9)}


@pytest.mark.parametrize("case", NOT_UTF8)
def test_a_list_file_not_in_utf8_is_refused_naming_it_and_the_byte_offset(tmp_path, case):
    build, offset = NOT_UTF8[case]
    path, make, error = build(tmp_path)
    with pytest.raises(error) as info:
        make()
    message = assert_names_and_says(info.value, path, "not UTF-8", f"byte offset {offset}", "0xe9")
    assert message.startswith(f"{path}: ")
    one_line(info.value)


def _voc_twice(tmp_path: Path):
    root = bi.write_voc(tmp_path / "VOC2007", {"a": {"size": (32, 24)}, "b": {"size": (32, 24)}},
                        split_text="a\nb\n\na\n")
    return root / "ImageSets" / "Main" / "trainval.txt", lambda: VocBoxes(root, "trainval"), BoxDataError, "'a'"


def _image_list_twice(tmp_path: Path):
    images, annotations = bi.write_coco_boxes(tmp_path, [{"id": 9, "size": (32, 24)}, {"id": 12, "size": (32, 24)}])
    listed = tmp_path / "coco_20k_filenames.txt"
    listed.write_text("train2014/COCO_train2014_000000000009.jpg\ntrain2014/COCO_train2014_000000000012.jpg\n"
                      "\nval2014/COCO_val2014_000000000009.jpg\n")
    return listed, lambda: CocoBoxes(images, annotations, listed), BoxDataError, "image id 9"


def _davis_twice(tmp_path: Path):
    from videos import small_davis

    root = small_davis(tmp_path / "davis")
    listed = root / "val.txt"
    listed.write_text("shapes2\nshape1\n\nshapes2\n")
    return listed, lambda: DavisDataset(root, sequences_file=listed), VideoDatasetError, "'shapes2'"


TWICE = {"voc-split": _voc_twice, "coco-image-list": _image_list_twice, "davis-sequence-list": _davis_twice}


@pytest.mark.parametrize("case", TWICE)
def test_a_name_listed_twice_is_refused_naming_both_lines(tmp_path, case):
    path, make, error, what = TWICE[case](tmp_path)
    with pytest.raises(error) as info:
        make()
    assert_names_and_says(info.value, path, "line 4", "line 1", what)
    one_line(info.value)


# ========================================================================= a COCO file's structure, when listed


def _images(*ids: int, **changes) -> list[dict]:
    return [{"id": i, "size": (32, 24), **changes} for i in ids]


COCO_STRUCTURE = [
    # id, (images, annotations, extra top-level keys), phrases
    ("image-without-id", (_images(9) + _images(10, without=("id",)), None, {}), ["images[1]", "lacks", "id"]),
    ("image-without-width", (_images(9, without=("width",)), None, {}), ["images[0] (id 9)", "lacks", "width"]),
    ("image-width-not-a-number", (_images(9, set={"width": "32"}), None, {}),
     ["images[0] (id 9)", "positive integers"]),
    ("annotations-a-mapping", (_images(9), {"1": {"image_id": 9}}, {}), ["'annotations' must be a list", "dict"]),
    ("duplicate-image-id", (_images(9, 9), [], {}), ["images[1] (id 9)", "duplicate image id 9", "images[0]"]),
    ("annotation-of-no-image", (_images(9), [{"id": 3, "image_id": 99, "bbox": [1, 1, 2, 2], "iscrowd": 0}], {}),
     ["annotations[0] (id 3)", "image_id 99 is not among the images"]),
    ("bbox-not-four-numbers", (_images(9), [{"id": 3, "image_id": 9, "bbox": [1, 1, 2], "iscrowd": 0}], {}),
     ["annotations[0] (id 3)", "'bbox' must be [x, y, width, height]"]),
]


@pytest.mark.parametrize("content, phrases", [pytest.param(c, p, id=i) for i, c, p in COCO_STRUCTURE])
def test_a_coco_boxes_file_of_bad_structure_is_refused_by_the_manifest_job(tmp_path, content, phrases):
    """Refused where the data set is listed (the manifest job), never first in a scoring job; nothing written."""
    images_spec, annotations, top = content
    images, path = bi.write_coco_boxes(tmp_path, images_spec, annotations, **top)
    out = tmp_path / "results" / "manifest.json"
    spec = spec_of("discovery", "c", "coco-boxes", images=str(images), annotations=str(path))
    with pytest.raises(BoxDataError) as info:
        write_manifest(spec=spec, roles=("eval",), shard_size=4, out=out)
    message = assert_names_and_says(info.value, path, *phrases)
    assert message.startswith(f"{path}: ")
    one_line(info.value)
    assert not out.parent.exists() or not list(out.parent.iterdir())


def test_duplicate_image_ids_in_a_coco_data_set_name_both_entries(tmp_path):
    images, annotations = bi.write_coco(tmp_path, n_images=3)
    data = json.loads(annotations.read_text())
    data["images"][2]["id"] = 1
    data["annotations"] = data["annotations"][:2]
    annotations.write_text(json.dumps(data))
    with pytest.raises(DatasetError) as info:
        CocoDataset(images, annotations)
    assert_names_and_says(info.value, annotations, "images[2] (id 1)", "duplicate image id 1", "images[0]")


def test_a_well_formed_coco_boxes_file_is_listed(tmp_path):
    """Control: the builder's file passes the structure checks above, so each case fails for its one defect."""
    images, path = bi.write_coco_boxes(tmp_path, _images(9, 12))
    spec = spec_of("discovery", "c", "coco-boxes", images=str(images), annotations=str(path))
    manifest = write_manifest(spec=spec, roles=("eval",), shard_size=4, out=tmp_path / "manifest.json")
    assert manifest["image_ids"] == [9, 12]
    assert CocoBoxes(images, path).boxes() == {9: [(2, 2, 12, 10)], 12: [(2, 2, 12, 10)]}


# =============================================================================================== checkpoints


@pytest.fixture(scope="module")
def vit_s() -> dict[str, torch.Tensor]:
    return bi.vit_state()


def test_a_torch_archive_whose_crc_fails_is_refused_before_its_weights_are_used(tmp_path, vit_s):
    path = bi.save_state(tmp_path / "copied.pth", vit_s)
    start, size = bi.torch_zip_member_offset(path, "/data/5")
    data = bytearray(path.read_bytes())
    data[start + size // 2] ^= 0x10  # one bit flipped in a tensor's bytes, as a bad copy or disk does
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = assert_names_and_says(info.value, path, "CRC", "data/5")
    assert message.startswith(f"{path}: ")
    # control: the same file with its bit restored loads
    data[start + size // 2] ^= 0x10
    path.write_bytes(bytes(data))
    assert load_backbone(path, which="teacher", form="backbone").format == "dino-backbone"


def _zip_of_text(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("README.txt", "weights are in the other archive\n")


def _npz(path: Path) -> None:
    with open(path, "wb") as handle:
        np.savez(handle, pos_embed=np.zeros((1, 197, 384), np.float32))


def _safetensors_header_cut(path: Path) -> None:
    safetensors.torch.save_file({"pos_embed": torch.zeros(1, 197, 384)}, str(path))
    data = bytearray(path.read_bytes())
    data[:8] = struct.pack("<Q", len(data) * 4)  # the header's length runs past the end of the file
    path.write_bytes(bytes(data))


NOT_CHECKPOINTS = {
    # id: (writer, phrases the message holds)
    "zip-not-torch": (_zip_of_text, ["a zip archive", "not a torch checkpoint", "README.txt"]),
    "npz": (_npz, ["a NumPy .npz archive", "pos_embed"]),
    "html-error-page": (lambda p: p.write_text("<!DOCTYPE html>\n<html><body>403 Forbidden</body></html>\n"),
                        ["an HTML page"]),
    "jpeg": (lambda p: p.write_bytes(bi.jpeg_bytes()), ["a JPEG image"]),
    "gzip": (lambda p: p.write_bytes(gzip.compress(b"\x80\x02}q\x00.")), ["gzip", "decompress"]),
    "git-lfs-pointer": (lambda p: p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:"
                                               + "0" * 64 + "\nsize 87000000\n"), ["Git LFS pointer"]),
    "safetensors-header-past-the-end": (_safetensors_header_cut, ["safetensors", "header", "past the end"]),
    "json": (lambda p: p.write_text('{"model": "dino_vits16", "epoch": 100}\n'), ["JSON"]),
}


@pytest.mark.parametrize("case", NOT_CHECKPOINTS)
def test_a_file_that_is_not_a_checkpoint_is_named_for_what_it_is(tmp_path, case):
    write, phrases = NOT_CHECKPOINTS[case]
    path = tmp_path / "checkpoint.pth"
    write(path)
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = assert_names_and_says(info.value, path, "not a readable checkpoint: it is", *phrases)
    assert "pickle" not in message.lower(), message  # the pickle hint is for pickles alone
    assert message.startswith(f"{path}: ")
    one_line(info.value)


def test_a_position_table_is_reported_with_the_rows_the_file_holds(tmp_path, vit_s):
    state = dict(vit_s)
    state["pos_embed"] = torch.zeros(1, 150, 384)  # a class row and 149 patch rows: no square grid
    path = bi.save_state(tmp_path / "odd.pth", state)
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = assert_names_and_says(info.value, path, "pos_embed (1, 150, 384)")
    assert "151" not in message


# ==================================================================================== the experiment file's name


def test_config_errors_name_the_experiment_file_read():
    from evaluate.experiment import Experiment, check_config_names

    table = {"checkpoints": {"a": {"path": "a.pth"}}, "datasets": {"d": {"images": "i", "annotations": "a.json",
                                                                        "roles": ["eval"]}}}
    bad_name = {**table, "checkpoints": {"runs/ep100": {"path": "a.pth"}}}
    with pytest.raises(ConfigError) as info:
        check_config_names(bad_name, source="experiments/vits8.yaml")
    assert str(info.value).startswith("experiments/vits8.yaml: checkpoints: name 'runs/ep100' is not allowed")
    with pytest.raises(ConfigError) as info:
        Experiment(bad_name, source="experiments/vits8.yaml")
    assert str(info.value).startswith("experiments/vits8.yaml: checkpoints: name 'runs/ep100'")
    assert "config.yaml" not in str(info.value)


def test_the_workflow_names_the_configfile_given_in_its_config_errors(tmp_path):
    """Run for real: `snakemake --configfile other.yaml` on a config with an unsafe name says other.yaml."""
    work = tmp_path / "work"
    bi.write_config(work, {"runs/ep100": bi.demo_checkpoint("ep100")}, {"tiny": bi.demo_dataset("tiny", 1, ["eval"])})
    other = work / "experiments" / "other.yaml"
    other.parent.mkdir()
    (work / "config.yaml").rename(other)
    result = bi.run_snakemake(work, keep_going=True, configfile=other)
    assert result.returncode != 0, result.stdout
    assert f"{other}: checkpoints: name 'runs/ep100' is not allowed" in result.stdout, result.stdout
    assert "config.yaml:" not in result.stdout
    assert not (work / "results").exists()
