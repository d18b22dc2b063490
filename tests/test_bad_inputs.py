"""The bad-input matrix (issue 6): every bad input gets an `EvaluationError` whose message names the file (or the
config key) and says what is wrong; awkward but valid images load with the right pixels; a malicious checkpoint's
payload never runs, neither in the loader nor anywhere in a real workflow run.

Every case builds its input for real in tmp_path (tests/badinputs.py); nothing is mocked. Most cases are checked
at the module that meets them first; the cases that only the workflow meets (config errors, one bad checkpoint or
one corrupt image among good ones) run the real `snakemake` CLI on a tiny experiment. `make check-inputs` runs this file
(`pytest -m badinput`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from PIL import Image

import badinputs as bi
from evaluate import EvaluationError
from evaluate.networks.checkpoints import CheckpointError, load_backbone
from evaluate.datasets.coco import CocoDataset, DatasetError
from evaluate.pixels.images import ImageError, open_rgb

pytestmark = pytest.mark.badinput


def assert_names_and_says(err: BaseException, culprit: str | Path, *phrases: str) -> str:
    """The message of a user-facing error names `culprit` and contains every phrase (case-insensitive)."""
    assert isinstance(err, EvaluationError), f"{type(err).__name__} is not an EvaluationError: {err}"
    message = str(err)
    assert str(culprit) in message, f"message does not name {culprit}: {message}"
    for phrase in phrases:
        assert phrase.lower() in message.lower(), f"message lacks {phrase!r}: {message}"
    return message


# ======================================================================================================= checkpoints


@pytest.fixture(scope="module")
def vit_s() -> dict[str, torch.Tensor]:
    """A ViT-S/16 in DINO's released form (class token, final norm), real random float32 weights."""
    return bi.vit_state()


def _truncated(tmp_path: Path, state: dict) -> Path:
    path = bi.save_state(tmp_path / "cut.pth", state)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a copy interrupted halfway
    return path


def _truncated_safetensors(tmp_path: Path, state: dict) -> Path:
    path = tmp_path / "cut.safetensors"
    safetensors.torch.save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    return path


def _empty(tmp_path: Path, state: dict) -> Path:
    path = tmp_path / "empty.pth"
    path.write_bytes(b"")
    return path


def _directory(tmp_path: Path, state: dict) -> Path:
    path = tmp_path / "checkpoint0100.pth"  # e.g. an unpacked archive where a file was expected
    path.mkdir()
    (path / "data.pkl").write_bytes(b"\x80\x02}q\x00.")
    return path


def _missing(tmp_path: Path, state: dict) -> Path:
    return tmp_path / "never-written.pth"


def _jpeg_named_pth(tmp_path: Path, state: dict) -> Path:
    path = tmp_path / "photo.pth"
    path.write_bytes(bi.jpeg_bytes())
    return path


def _vit_ti(tmp_path: Path, state: dict) -> Path:
    return bi.save_state(tmp_path / "vitti16.pth", bi.vit_state(width=192))


def _vit_s32(tmp_path: Path, state: dict) -> Path:
    return bi.save_state(tmp_path / "vits32.pth", bi.vit_state(patch=32))


def _missing_keys(tmp_path: Path, state: dict) -> Path:
    cut = {k: v for k, v in state.items() if not k.startswith("blocks.11.mlp.fc2.")}
    return bi.save_state(tmp_path / "missing.pth", cut)


def _unexpected_keys(tmp_path: Path, state: dict) -> Path:
    extra = dict(state)
    extra["blocks.12.norm1.weight"] = torch.ones(384)  # a 13th block: not a ViT-S/16
    extra["fc_norm.weight"] = torch.ones(384)  # timm's norm of pooled tokens (a classifier's `head.*` would be dropped)
    return bi.save_state(tmp_path / "unexpected.pth", extra)


def _nan(tmp_path: Path, state: dict) -> Path:
    bad = dict(state)
    bad["blocks.3.attn.qkv.weight"] = state["blocks.3.attn.qkv.weight"].clone()
    bad["blocks.3.attn.qkv.weight"][17, 5] = float("nan")
    return bi.save_state(tmp_path / "nan.pth", bad)


def _inf(tmp_path: Path, state: dict) -> Path:
    bad = dict(state)
    bad["blocks.7.mlp.fc1.bias"] = state["blocks.7.mlp.fc1.bias"].clone()
    bad["blocks.7.mlp.fc1.bias"][3] = float("-inf")
    return bi.save_state(tmp_path / "inf.pth", bad)


def _integer_weights(tmp_path: Path, state: dict) -> Path:
    bad = dict(state)
    bad["patch_embed.proj.bias"] = torch.zeros(384, dtype=torch.int64)
    return bi.save_state(tmp_path / "int.pth", bad)


def _list_not_dict(tmp_path: Path, state: dict) -> Path:
    return bi.save_state(tmp_path / "list.pth", [state["pos_embed"], state["cls_token"]])


def _unknown_layout(tmp_path: Path, state: dict) -> Path:
    return bi.save_state(tmp_path / "model_only.pth", {"model_ema": {"w": torch.zeros(3)}, "epoch": 5})


CHECKPOINT_CASES = [
    # id, builder, phrases the message must hold besides the path
    ("truncated", _truncated, ["truncated or corrupt"]),
    ("truncated-safetensors", _truncated_safetensors, ["not a readable safetensors file"]),
    ("empty-file", _empty, ["empty", "0 bytes"]),
    ("directory", _directory, ["is a folder, not a checkpoint file"]),
    ("missing-file", _missing, ["not found"]),
    ("jpeg-named-pth", _jpeg_named_pth, ["not a readable checkpoint"]),
    ("vit-ti16", _vit_ti, ["found ViT-Ti/16 (192 wide, 16 x 16 patches, 12 blocks), which is not supported"]),
    ("vit-s32", _vit_s32, ["found ViT-S/32 (384 wide, 32 x 32 patches, 12 blocks), which is not supported"]),
    ("missing-keys", _missing_keys, ["2 missing backbone keys", "blocks.11.mlp.fc2.bias",
                                     "blocks.11.mlp.fc2.weight"]),
    ("unexpected-keys", _unexpected_keys, ["2 unexpected keys", "blocks.12.norm1.weight", "fc_norm.weight"]),
    ("nan-weights", _nan, ["NaN or infinite", "blocks.3.attn.qkv.weight"]),
    ("inf-weights", _inf, ["NaN or infinite", "blocks.7.mlp.fc1.bias"]),
    ("integer-weights", _integer_weights, ["non-float", "patch_embed.proj.bias", "int64"]),
    ("list-not-dict", _list_not_dict, ["holds a list, not a dict"]),
    ("unknown-layout", _unknown_layout, ["not a recognised checkpoint format", "model_ema"]),
]


def test_the_checkpoint_builder_makes_a_loadable_vit_s16(tmp_path, vit_s):
    """Control: the unmodified builder output loads, so each case below fails for its one defect alone."""
    loaded = load_backbone(bi.save_state(tmp_path / "good.pth", vit_s), which="teacher", form="backbone")
    assert loaded.format == "dino-backbone"
    assert torch.equal(loaded.model.state_dict()["blocks.3.attn.qkv.weight"], vit_s["blocks.3.attn.qkv.weight"])
    assert torch.equal(loaded.model.state_dict()["pos_embed"], vit_s["pos_embed"][:, 1:])


@pytest.mark.parametrize("make, phrases", [pytest.param(m, p, id=i) for i, m, p in CHECKPOINT_CASES])
def test_bad_checkpoint_is_refused_naming_file_and_problem(tmp_path, vit_s, make, phrases):
    path = make(tmp_path, vit_s)
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = assert_names_and_says(info.value, path, *phrases)
    assert message.startswith(str(path)), message


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")  # torch's note on the raw pickle.dump file
@pytest.mark.parametrize("container", bi.MALICIOUS_CONTAINERS)
def test_malicious_pickle_is_refused_and_its_payload_never_runs(tmp_path, container):
    marker = tmp_path / "payload-ran"
    path = bi.write_malicious_checkpoint(tmp_path / "evil.pth", marker, container)
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = assert_names_and_says(info.value, path)
    assert not marker.exists(), "the payload ran"
    if container == "raw-pickle":  # protocol 4+: stopped at its first FRAME, before any global is looked up
        assert "nothing in the file was run" in message
    else:
        assert "refused" in message and "posix.system" in message and "payload was not run" in message
    # control: the file really is malicious, an unrestricted loader runs the payload
    bi.load_unsafely(path, container)
    assert marker.exists()


def test_pickle_disguised_as_safetensors_is_refused(tmp_path):
    marker = tmp_path / "payload-ran"
    path = bi.write_malicious_checkpoint(tmp_path / "evil.safetensors", marker, "zip")
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    assert_names_and_says(info.value, path, "not a readable safetensors file")
    assert not marker.exists()


# ============================================================================================================ images

GOOD_MODES = {
    # id: (builder, file name, largest allowed difference from the expected pixels: 0 for lossless formats)
    "png-alpha": (bi.rgba_png, "alpha.png", 0),
    "png-16bit": (bi.gray16_png, "gray16.png", 0),
    "jpeg-cmyk": (bi.cmyk_jpeg, "cmyk.jpg", 2),
    "png-palette": (bi.palette_png, "palette.png", 0),
    "png-palette-transparency": (lambda p: bi.palette_png(p, transparency=True), "palette-t.png", 0),
    "jpeg-exif-rotated-6": (bi.exif_rotated_jpeg, "exif6.jpg", 8),
    "jpeg-exif-rotated-8": (lambda p: bi.exif_rotated_jpeg(p, 8), "exif8.jpg", 8),
}


def _dataset_of_one(tmp_path: Path, file_name: str, height: int, width: int) -> CocoDataset:
    ann = bi.annotation(1, 7, polygon=bi.square_polygon(1, 1, 8))
    data = {"images": [{"id": 7, "file_name": file_name, "height": height, "width": width}],
            "annotations": [ann], "categories": bi.CATEGORIES}
    (tmp_path / "annotations.json").write_text(json.dumps(data))
    return CocoDataset(tmp_path / "images", tmp_path / "annotations.json")


@pytest.mark.parametrize("mode", GOOD_MODES)
def test_awkward_image_modes_load_with_the_right_pixels(tmp_path, mode):
    make, name, tolerance = GOOD_MODES[mode]
    path, expected = make(tmp_path / "images" / name)
    height, width = expected.shape[:2]
    # through the data set, as the workflow reads it: the size check runs after EXIF orientation
    img = _dataset_of_one(tmp_path, name, height, width).open_image(7)
    assert img.mode == "RGB" and img.size == (width, height)
    got = np.asarray(img).astype(int)
    if tolerance == 0:
        np.testing.assert_array_equal(got, expected)
    else:  # lossy JPEG: compare the middle of each flat quadrant
        for r, c in bi.quadrant_centres(height, width):
            assert np.abs(got[r, c] - expected[r, c].astype(int)).max() <= tolerance, (mode, r, c, got[r, c])
    assert np.array_equal(np.asarray(open_rgb(path)), np.asarray(img))


def test_sixteen_bit_is_shifted_not_clipped(tmp_path):
    """256 must become 1 (>> 8); PIL's own conversion would clip it to 255 (white)."""
    path, expected = bi.gray16_png(tmp_path / "g.png")
    got = np.asarray(open_rgb(path))
    assert got[0, 2].tolist() == [1, 1, 1] and got[0, 6].tolist() == [255, 255, 255]
    assert Image.open(path).convert("L").getpixel((2, 0)) == 255  # the clipping this guards against


def _corrupt_jpeg(path: Path) -> Path:
    return bi.truncated_jpeg(path)


def _garbage_jpeg(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = bytearray(bi.jpeg_bytes())
    data[200:] = bytes(len(data) - 200)  # header intact, entropy-coded data zeroed, no end marker
    path.write_bytes(bytes(data[:600]))
    return path


def _text_as_jpeg(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("<html>403 Forbidden</html>\n")  # what a failed download saves
    return path


def _tiny(path: Path) -> Path:
    return bi.rgb_png(path, height=40, width=15)[0]


def _missing_image(path: Path) -> Path:
    return path


BAD_IMAGES = [
    ("corrupt-jpeg-truncated", _corrupt_jpeg, ["corrupt or truncated"]),
    ("corrupt-jpeg-zeroed", _garbage_jpeg, ["corrupt or truncated"]),
    ("not-an-image", _text_as_jpeg, ["not an image"]),
    ("smaller-than-16px", _tiny, ["15 x 40 px", "at least 16 px"]),
    ("missing-file", _missing_image, ["not found"]),
]


@pytest.mark.parametrize("make, phrases", [pytest.param(m, p, id=i) for i, m, p in BAD_IMAGES])
def test_bad_image_file_is_refused_naming_it(tmp_path, make, phrases):
    path = make(tmp_path / "images" / "000042.jpg")
    with pytest.raises(ImageError) as info:
        open_rgb(path)
    assert_names_and_says(info.value, path, *phrases)


def test_missing_image_in_a_data_set_names_file_and_image_id(tmp_path):
    images, annotations = bi.write_coco(tmp_path, n_images=3)
    (images / "000002.png").unlink()
    ds = CocoDataset(images, annotations)
    with pytest.raises(DatasetError) as info:
        ds.validate_files()
    assert_names_and_says(info.value, images / "000002.png", "1 of 3 image files missing")
    with pytest.raises(DatasetError) as info:
        ds.open_image(2)
    assert_names_and_says(info.value, images / "000002.png", "not found", "image id 2", str(annotations))


def test_image_of_another_size_than_annotated_names_both_files(tmp_path):
    images, annotations = bi.write_coco(tmp_path, n_images=1, height=40, width=48)
    bi.rgb_png(images / "000001.png", height=48, width=40)  # replaced by a rotated copy without EXIF
    with pytest.raises(DatasetError) as info:
        CocoDataset(images, annotations).open_image(1)
    assert_names_and_says(info.value, images / "000001.png", "40 x 48 px", "48 x 40", str(annotations))


# ====================================================================================================== annotations


def _coco(images=2, annotations=None, categories=None) -> dict:
    data = {"images": [{"id": i, "file_name": f"{i:06d}.png", "height": 40, "width": 48} for i in range(1, images + 1)],
            "annotations": [bi.annotation(i, i) for i in range(1, images + 1)] if annotations is None else annotations,
            "categories": bi.CATEGORIES if categories is None else categories}
    return data


BAD_ANNOTATIONS = [
    ("not-json", "{'images': [1, 2],}\n", ["not valid JSON"]),
    ("json-list", json.dumps([{"id": 1}]), ["expected a JSON object", "got list"]),
    ("polygon-2-points", _coco(annotations=[bi.annotation(5, 1, polygon=[1, 1, 9, 9])]),
     ["annotations[0] (id 5)", "polygon 0 has 4 numbers", "at least 3 points"]),
    ("polygon-odd-count", _coco(annotations=[bi.annotation(5, 1, polygon=[1, 1, 9, 9, 4, 7, 3])]),
     ["annotations[0] (id 5)", "odd count"]),
    ("unknown-image", _coco(annotations=[bi.annotation(1, 1), bi.annotation(2, 99)]),
     ["annotations[1] (id 2)", "image_id 99 is not among the images"]),
    ("unknown-category", _coco(annotations=[bi.annotation(1, 1, category_id=91)]),
     ["annotations[0] (id 1)", "category_id 91 is not among the categories"]),
    ("no-images", {"images": [], "annotations": [], "categories": bi.CATEGORIES}, ["no images"]),
    ("images-key-missing", {"annotations": [], "categories": bi.CATEGORIES}, ["missing key 'images'"]),
    ("duplicate-image-id", {**_coco(annotations=[]), "images": _coco()["images"] * 2}, ["duplicate image id 1"]),
    ("rle-of-wrong-size", _coco(annotations=[{**bi.annotation(3, 1), "segmentation": {"size": [10, 10],
                                                                                        "counts": [100]}}]),
     ["annotations[0] (id 3)", "RLE size [10, 10] is not the image's [height, width] [40, 48]"]),
]


@pytest.mark.parametrize("content, phrases", [pytest.param(c, p, id=i) for i, c, p in BAD_ANNOTATIONS])
def test_bad_annotation_file_is_refused_naming_it_and_the_entry(tmp_path, content, phrases):
    path = tmp_path / "instances_val.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(DatasetError) as info:
        CocoDataset(tmp_path / "images", path)
    assert_names_and_says(info.value, path, *phrases)


def test_missing_annotation_file_is_named(tmp_path):
    path = tmp_path / "nowhere" / "instances.json"
    with pytest.raises(DatasetError) as info:
        CocoDataset(tmp_path, path)
    assert_names_and_says(info.value, path, "annotation file not found")


# ============================================================================================ names that become paths

UNSAFE_NAMES = {"slash": "runs/ep100", "dotdot": "..", "dot": ".", "leading-dotdot": "../escape", "empty": "",
                "space": "ep 100", "newline": "ep100\n", "non-ascii": "época100", "absolute": "/etc"}


def _schema():
    import yaml

    return yaml.safe_load((bi.REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


@pytest.mark.parametrize("section", ["checkpoints", "datasets"])
@pytest.mark.parametrize("name", list(UNSAFE_NAMES.values()), ids=list(UNSAFE_NAMES))
def test_unsafe_names_are_refused_by_schema_and_by_the_experiment(section, name):
    """Names become folders under results/: only [A-Za-z0-9._-], not '.' or '..'. Both layers refuse."""
    import jsonschema

    from evaluate.experiment import ConfigError, Experiment

    checkpoints = {"ok": {"path": "a.pth"}}
    datasets = {"ok": {"images": "i", "annotations": "a.json", "roles": ["eval"]}}
    table = {"checkpoints": checkpoints, "datasets": datasets}
    table[section] = {name: next(iter(table[section].values()))}
    with pytest.raises(jsonschema.ValidationError) as info:
        jsonschema.validate(table, _schema())
    assert list(info.value.absolute_path) == [section] and repr(name) in info.value.message
    with pytest.raises(ConfigError) as info:
        Experiment(table)
    assert_names_and_says(info.value, "config.yaml", f"{section}: name {name!r} is not allowed",
                          "only letters, digits, '.', '_' and '-'")


def test_safe_names_pass_both_layers():
    """Control: the characters the rule allows are accepted, so the refusals above are about the bad characters."""
    import jsonschema

    from evaluate.experiment import Experiment, load_config

    name = "dino_vits16-ep0100.v2"
    table = {"checkpoints": {name: {"path": "a.pth"}},
             "datasets": {name: {"images": "i", "annotations": "a.json", "roles": ["eval"]}}}
    jsonschema.validate(table, _schema())
    assert list(Experiment(load_config(table)).checkpoints) == [name]


def test_globbed_checkpoint_with_unsafe_run_name_is_reported(tmp_path):
    from evaluate.experiment import ConfigError, discover_checkpoints

    (tmp_path / "my run").mkdir()
    bad = bi.save_state(tmp_path / "my run" / "checkpoint0010.pth", {"w": torch.zeros(1)})
    with pytest.raises(ConfigError) as info:
        discover_checkpoints(str(tmp_path / "{run}" / "checkpoint{epoch}.pth"), prefix="", which="teacher")
    assert_names_and_says(info.value, bad, "my run")


# ========================================================================================= through the workflow CLI
# Config errors stop Snakemake while it reads the Snakefile, before any job runs; one run with a malicious and a
# good checkpoint over a data set holding one corrupt JPEG shows the failures stay in their own jobs.


def _config_with(**changes) -> tuple[dict, dict, dict]:
    """(checkpoints, datasets, extra sections) of a tiny valid experiment, then `changes` applied by dotted key."""
    checkpoints = {"ckpt-a": bi.demo_checkpoint("ckpt-a")}
    datasets = {"tiny": bi.demo_dataset("tiny", 1, ["select"])}
    sections = {k: json.loads(json.dumps(v)) for k, v in bi.TINY_SETTINGS.items()}
    tree = {"checkpoints": checkpoints, "datasets": datasets, **sections}
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("|")
        node = tree
        for key in parents:
            node = node[key]
        if leaf.startswith("~"):  # rename a key
            old, new = leaf[1:].split(">")
            node[new] = node.pop(old)
        else:
            node[leaf] = value
    checkpoints, datasets = tree.pop("checkpoints"), tree.pop("datasets")
    return checkpoints, datasets, tree


CONFIG_CASES = [
    # id, changes (keys joined by "|"; "~old>new" renames a key), phrases the console output must hold
    ("typo-key", {"features|~shard_size>shard_sise": None},
     ["Additional properties are not allowed", "'shard_sise' was unexpected", "['features']"]),
    ("typo-section", {"~decoder>decodr": None}, ["Additional properties are not allowed", "'decodr' was unexpected"]),
    ("wrong-type", {"features|shard_size": "eight"}, ["'eight' is not of type 'integer'", "['shard_size']"]),
    ("checkpoint-name-with-slash", {"checkpoints|~ckpt-a>runs/ep100": None},
     ["config.yaml: checkpoints: name 'runs/ep100' is not allowed", "letters, digits, '.', '_' and '-'"]),
    ("dataset-name-dotdot", {"datasets|~tiny>..": None},
     ["config.yaml: datasets: name '..' is not allowed", "names become folders under results/"]),
    ("unknown-reference-checkpoint", {"reference_checkpoint": "ckpt-b"},
     ["config.yaml: reference_checkpoint: 'ckpt-b' is not one of the checkpoints (ckpt-a)"]),
    ("old-autocast-key", {"features|autocast": True},
     ["config.yaml: features.autocast was replaced by features.precision"]),
    ("float16-on-the-cpu", {"features|precision": "float16", "features|device": "cpu"},
     ["config.yaml: features.precision: float16 runs on CUDA only"]),
]


@pytest.mark.parametrize("changes, phrases", [pytest.param(c, p, id=i) for i, c, p in CONFIG_CASES])
def test_config_error_stops_the_workflow_naming_the_key(tmp_path, changes, phrases):
    work = tmp_path / "work"
    checkpoints, datasets, sections = _config_with(**changes)
    bi.write_config(work, checkpoints, datasets, **{**{k: None for k in bi.TINY_SETTINGS}, **sections})
    result = bi.run_snakemake(work, keep_going=True)
    assert result.returncode != 0, result.stdout
    for phrase in phrases:
        assert phrase in result.stdout, f"{phrase!r} not in the output:\n{result.stdout}"
    assert not (work / "results").exists(), "a job ran although the config is invalid"


def test_valid_tiny_config_passes_the_parse(tmp_path):
    """Control for the cases above: the unmodified tiny config parses (a dry run lists its jobs)."""
    work = tmp_path / "work"
    checkpoints, datasets, sections = _config_with()
    bi.write_config(work, checkpoints, datasets, **{**{k: None for k in bi.TINY_SETTINGS}, **sections})
    result = bi.run_snakemake(work, "features", extra=["--dry-run"])
    assert result.returncode == 0, result.stdout
    assert "demo_dataset" in result.stdout and "checkpoint manifest" in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal needs a machine without a CUDA device")
def test_a_config_error_a_job_finds_names_the_experiment_file_the_workflow_read(tmp_path):
    """features.device: cuda passes the parse (the jobs may run on a GPU node the workflow's process is not on); the
    extract job, on this machine without CUDA, refuses it in one line that names the experiment file given with
    --configfile, not config.yaml, and writes no feature."""
    work = tmp_path / "work"
    checkpoints, datasets, sections = _config_with(**{"features|device": "cuda"})
    bi.write_config(work, checkpoints, datasets, **{**{k: None for k in bi.TINY_SETTINGS}, **sections})
    experiment = (work / "config.yaml").rename(work / "gpu-experiment.yaml")
    result = bi.run_snakemake(work, "features", keep_going=True, configfile=experiment)
    assert result.returncode != 0, result.stdout
    assert re.search(r"ERROR in rule extract \(.*\): " + re.escape(f"{experiment}: features.device is 'cuda' but no "
                     "CUDA device is available here"), result.stdout), result.stdout
    assert "config.yaml" not in result.stdout
    assert not any(p.exists() for p in bi.shard_files(work, "ckpt-a", "tiny", "000"))


@pytest.fixture(scope="module")
def security_run(tmp_path_factory):
    """The whole workflow (default target, --keep-going) over a good and a malicious checkpoint: one-image data
    sets for select, probe-train and eval, so every kind of job runs for the good one."""
    root = tmp_path_factory.mktemp("security-run")
    inputs, work = root / "inputs", root / "work"
    marker = root / "PAYLOAD-RAN"
    good = bi.save_state(inputs / "good.pth", bi.vit_state(seed=3))
    evil = bi.write_malicious_checkpoint(inputs / "evil.pth", marker, "zip")
    datasets = {}
    for name, role, first in (("sel", "select", 1), ("train", "probe-train", 101), ("val", "eval", 201)):
        images, annotations = bi.write_coco(inputs / name, n_images=1, height=64, width=80, ext="jpg", first_id=first)
        datasets[name] = {"images": str(images), "annotations": str(annotations), "roles": [role]}
    bi.write_config(work, {"good": {"path": str(good)}, "evil": {"path": str(evil)}}, datasets,
                    reference_checkpoint="good", compare_to="good")
    result = bi.run_snakemake(work, keep_going=True)
    return {"result": result, "out": result.stdout, "work": work, "marker": marker, "evil": evil, "root": root}


@pytest.mark.slow
def test_workflow_reports_malicious_checkpoint_and_never_runs_its_payload(security_run):
    out, work, evil = security_run["out"], security_run["work"], security_run["evil"]
    assert security_run["result"].returncode != 0
    refusals = re.findall(rf"ERROR in rule extract \(.*'checkpoint': 'evil'.*\): {re.escape(str(evil))}: "
                          r"refused to load: it needs the global posix\.system.*its payload was not run", out)
    assert len(refusals) == 3, out  # one per data set (one shard each), each on the console
    assert not security_run["marker"].exists(), "the malicious checkpoint's payload ran somewhere in the workflow"
    for dataset in ("sel", "train", "val"):
        log = (work / "logs" / "extract" / "evil" / dataset / "000.log").read_text()
        assert str(evil) in log and "posix.system" in log
        assert not any(p.exists() for p in bi.shard_files(work, "evil", dataset, "000"))
    # the good checkpoint went through every stage meanwhile: features, sweep and selection, decoder, probe
    for dataset in ("sel", "train", "val"):
        assert all(p.exists() for p in bi.shard_files(work, "good", dataset, "000")), dataset
    for record in ("decoder/good/val.json", "probe/good/val.json"):
        assert (work / "results" / "ledger" / "records" / record).is_file(), record
    assert (work / "results" / "decoder" / "selected.yaml").is_file()
    assert not (work / "results" / "ledger" / "records" / "decoder" / "evil").exists()
    assert not security_run["marker"].exists()


@pytest.fixture(scope="module")
def corrupt_image_run(tmp_path_factory):
    """`snakemake --keep-going features` over a data set of two JPEGs whose second is truncated (shard_size 1)."""
    root = tmp_path_factory.mktemp("corrupt-image-run")
    inputs, work = root / "inputs", root / "work"
    good = bi.save_state(inputs / "good.pth", bi.vit_state(seed=3))
    images, annotations = bi.write_coco(inputs / "photos", n_images=2, height=64, width=80, ext="jpg")
    bi.truncated_jpeg(images / "000002.jpg")
    bi.write_config(work, {"good": {"path": str(good)}},
                    {"photos": {"images": str(images), "annotations": str(annotations), "roles": ["eval"]}})
    result = bi.run_snakemake(work, "features", keep_going=True)
    return {"result": result, "out": result.stdout, "work": work, "corrupt": images / "000002.jpg"}


@pytest.mark.slow
def test_workflow_reports_corrupt_image_and_keeps_the_other_shard(corrupt_image_run):
    out, work = corrupt_image_run["out"], corrupt_image_run["work"]
    assert corrupt_image_run["result"].returncode != 0
    corrupt = re.escape(str(corrupt_image_run["corrupt"]))
    # images are decoded once per shard, for every checkpoint, by the preprocess rule
    assert re.search(rf"ERROR in rule preprocess \(.*'dataset': 'photos'.*'shard': '001'.*\): {corrupt}: corrupt or "
                     r"truncated image \(JPEG\): image file is truncated", out), out
    log = (work / "logs" / "preprocess" / "photos" / "001.log").read_text()
    assert str(corrupt_image_run["corrupt"]) in log and "corrupt or truncated image" in log
    assert not any(p.exists() for p in bi.shard_files(work, "good", "photos", "001"))
    done = bi.shard_files(work, "good", "photos", "000")
    assert all(p.exists() for p in done)
    assert json.loads(done[2].read_text()) == [1]
    keys = np.load(done[0])
    assert keys.shape == (1, 900, 384) and np.isfinite(keys).all()
    assert not list(work.rglob(".tmp-*")), "a failed job left a temporary file"


@pytest.mark.slow
def test_select_data_set_without_labels_is_refused_naming_it(tmp_path):
    """Settings cannot be chosen on a data set without annotations: the run stops naming the file and the role."""
    inputs, work = tmp_path / "inputs", tmp_path / "work"
    checkpoint = bi.save_state(inputs / "vits16.pth", bi.vit_state(seed=4))
    bare_images, bare = bi.write_coco(inputs / "bare", n_images=1, annotations=[])
    val_images, val = bi.write_coco(inputs / "val", n_images=1, first_id=11)
    bi.write_config(work, {"vits16": {"path": str(checkpoint)}},
                    {"bare": {"images": str(bare_images), "annotations": str(bare), "roles": ["select"]},
                     "val": {"images": str(val_images), "annotations": str(val), "roles": ["eval"]}})
    result = bi.run_snakemake(work)
    assert result.returncode != 0
    errors = [line for line in result.stdout.splitlines() if line.startswith("ERROR in rule") and str(bare) in line]
    assert errors, result.stdout
    assert "select" in errors[0], errors[0]
    assert re.search(r"no (annotations|labels)|no image of the select data set has non-crowd ground truth",
                     errors[0], re.I), errors[0]
