"""evaluate.readings.features: shards equal the backbone's readings computed directly, are written atomically with meta.json
last, stream batch by batch, and read back across shards as one array."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from evaluate.pixels.geometry import SEED

from evaluate.plumbing.atomic import write_json
from evaluate.networks.vit import vit_small
from evaluate.datasets.coco import CocoDataset
from sources import demo_coco
from evaluate.readings.features import FeatureError, FeatureReader, extract_shard
from evaluate.pixels.images import ImageError, keys480_input, open_rgb, tokens224_input

META = {"checkpoint_sha256": "ab" * 32, "checkpoint_format": "selfpatch-train", "manifest_sha256": "cd" * 32}
SHARD_FILES = {"keys480.npy", "tokens224.npy", "image_ids.json", "meta.json"}


@pytest.fixture(scope="module")
def demo_ds(tmp_path_factory) -> CocoDataset:
    return demo_coco(tmp_path_factory, 5, seed=11)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return vit_small().eval()


@pytest.fixture(scope="module")
def direct(model, demo_ds):
    """Both readings of images 1-3 computed directly, in one batch: {id: (keys (900,384), tokens (196,384))}."""
    ids = [1, 2, 3]
    images = [open_rgb(demo_ds.image_path(i)) for i in ids]
    with torch.inference_mode():
        keys = model.last_keys(torch.stack([keys480_input(im) for im in images])).numpy()
        tokens = model.tokens(torch.stack([tokens224_input(im) for im in images])).numpy()
    return {i: (keys[n], tokens[n]) for n, i in enumerate(ids)}


@pytest.fixture(scope="module")
def shards(model, demo_ds, tmp_path_factory):
    """Shard A = ids [2, 1] (not sorted: rows follow the given order) float16 in batches of 1; shard B = [3] float16
    with the order of its file renames recorded; shard C = [1] float32."""
    root = tmp_path_factory.mktemp("features")
    extract_shard(model, demo_ds, [2, 1], root / "A", batch_size=1, dtype="float16", precision="float32", meta=META)
    renames: list[str] = []
    real_replace = os.replace

    def recording_replace(src, dst):
        renames.append(Path(dst).name)
        return real_replace(src, dst)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "replace", recording_replace)
        extract_shard(model, demo_ds, [3], root / "B", batch_size=8, dtype="float16", precision="float32", meta=META)
    extract_shard(model, demo_ds, [1], root / "C", batch_size=8, dtype="float32", precision="float32", meta=META)
    return {"A": root / "A", "B": root / "B", "C": root / "C", "renames": renames}


def test_shard_files_complete_and_no_temporaries(shards):
    for name in "ABC":
        assert set(os.listdir(shards[name])) == SHARD_FILES


def test_meta_json_is_written_last(shards):
    renames = shards["renames"]
    assert sorted(renames) == sorted(SHARD_FILES)
    assert renames[-1] == "meta.json"


def test_meta_records_provenance(shards, demo_ds):
    meta = json.loads((shards["A"] / "meta.json").read_text())
    for key, value in META.items():
        assert meta[key] == value
    assert meta["dtype"] == "float16" and meta["n_images"] == 2
    assert meta["shapes"] == {"keys480": [2, 900, 384], "tokens224": [2, 196, 384]}
    assert meta["annotations_sha256"] == demo_ds.annotations_sha256
    assert "LANCZOS" in meta["transforms"]["keys480"] and "BICUBIC" in meta["transforms"]["tokens224"]
    assert meta["library_versions"]["torch"] == torch.__version__
    assert ":" in meta["code_version"]


def test_arrays_equal_direct_readings_in_float16(shards, direct):
    ids = json.loads((shards["A"] / "image_ids.json").read_text())
    assert ids == [2, 1]
    keys = np.load(shards["A"] / "keys480.npy")
    tokens = np.load(shards["A"] / "tokens224.npy")
    assert keys.dtype == tokens.dtype == np.float16
    assert keys.shape == (2, 900, 384) and tokens.shape == (2, 196, 384)
    for row, image_id in enumerate(ids):
        ref_keys, ref_tokens = direct[image_id]
        # float16 keeps 11 significant bits: relative error <= 2**-11 ~ 4.9e-4
        np.testing.assert_allclose(keys[row].astype(np.float32), ref_keys, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(tokens[row].astype(np.float32), ref_tokens, rtol=1e-3, atol=1e-4)
    # the rows really are per image: image 2's keys are not image 1's
    assert np.abs(keys[0].astype(np.float32) - direct[1][0]).max() > 0.05


def test_float32_shard_equals_direct_readings(shards, direct):
    keys = np.load(shards["C"] / "keys480.npy")
    tokens = np.load(shards["C"] / "tokens224.npy")
    assert keys.dtype == np.float32
    np.testing.assert_allclose(keys[0], direct[1][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tokens[0], direct[1][1], rtol=1e-4, atol=1e-5)


def test_reader_across_shards(shards, direct):
    reader = FeatureReader([shards["A"], shards["B"]])
    assert reader.image_ids == [2, 1, 3] and len(reader) == 3
    assert reader.row(3) == 2 and reader.row(1) == 1
    for i, image_id in enumerate(reader.image_ids):
        k, t = reader.keys480(i), reader.tokens224(i)
        assert k.dtype == t.dtype == np.float32 and k.shape == (900, 384) and t.shape == (196, 384)
        np.testing.assert_allclose(k, direct[image_id][0], rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(t, direct[image_id][1], rtol=1e-3, atol=1e-4)
    parts = list(reader.iter_shards("keys480"))
    assert [ids for ids, _ in parts] == [[2, 1], [3]]
    assert all(isinstance(arr, np.memmap) and arr.dtype == np.float16 for _, arr in parts)
    assert [arr.shape for _, arr in reader.iter_shards("tokens224")] == [(2, 196, 384), (1, 196, 384)]
    with pytest.raises(IndexError):
        reader.keys480(3)
    with pytest.raises(FeatureError, match="not in the feature shards"):
        reader.row(4)


@pytest.mark.badinput
def test_reader_refuses_mixed_dtypes_and_duplicate_ids(shards):
    with pytest.raises(FeatureError, match="'dtype' differs") as info:
        FeatureReader([shards["A"], shards["C"]])
    assert str(shards["C"] / "meta.json") in str(info.value)
    with pytest.raises(FeatureError, match="image id 2 appears in more than one"):
        FeatureReader([shards["A"], shards["A"]])


# ---- shards written by hand: the reader's checks, cheaply ----------------------------------------------------------


def fake_shard(root: Path, ids: list[int], dtype="float16", keys_shape=None, meta=True, base=0.0,
               precision="float32", network: dict | None = None) -> Path:
    """A shard written by hand; `network`: meta.json's form and geometry fields (none: a shard older than them,
    the seed's ViT-S/16), whose sizes the arrays then take."""
    root.mkdir(parents=True, exist_ok=True)
    n = len(ids)
    patch, width = (network or {}).get("patch", 16), (network or {}).get("width", 384)
    n480, n224 = (patch * round(480 / patch) // patch) ** 2, (224 // patch) ** 2
    keys = (np.arange(n * n480 * width, dtype=np.float64).reshape(n, n480, width) % 97 + base).astype(dtype)
    if keys_shape is not None:
        keys = np.zeros(keys_shape, dtype=dtype)
    np.save(root / "keys480.npy", keys)
    np.save(root / "tokens224.npy", np.full((n, n224, width), base, dtype=dtype))
    write_json(root / "image_ids.json", ids)
    if meta:
        write_json(root / "meta.json", {"dtype": str(np.dtype(dtype)), "checkpoint_sha256": "x",
                                        "precision": precision, **(network or {})})
    return root


DINOV2_S14_REG4 = {"patch": 14, "width": 384, "depth": 12, "registers": 4}


def test_reader_takes_each_shards_sizes_from_its_geometry(tmp_path):
    """A DINOv2 ViT-S/14 shard: keys480 on 476 px are 34 x 34 = 1,156 rows, tokens224 16 x 16 = 256."""
    a = fake_shard(tmp_path / "a", [1, 2], network={**DINOV2_S14_REG4, "form": "released"})
    reader = FeatureReader([a, fake_shard(tmp_path / "b", [3], network={**DINOV2_S14_REG4, "form": "released"})])
    assert reader.keys480(2).shape == (1156, 384) and reader.tokens224(0).shape == (256, 384)
    assert (reader.geometry.patch, reader.geometry.registers, reader.form) == (14, 4, "released")
    legacy = FeatureReader([fake_shard(tmp_path / "c", [4])])  # no geometry recorded: the seed's sizes
    assert legacy.keys480(0).shape == (900, 384) and legacy.form == "backbone"
    np.save(a / "tokens224.npy", np.zeros((2, 196, 384), dtype=np.float16))  # the seed's size under a /14 meta
    with pytest.raises(FeatureError, match=r"shape \(2, 196, 384\) does not match \(2, 256, 384\)"):
        FeatureReader([a])


@pytest.mark.badinput
def test_reader_refuses_a_data_set_whose_shards_ran_in_two_forms(tmp_path):
    released = fake_shard(tmp_path / "a", [5], network={**DINOV2_S14_REG4, "form": "released"})
    backbone = fake_shard(tmp_path / "b", [6], network={**DINOV2_S14_REG4, "form": "backbone"})
    with pytest.raises(FeatureError, match="ran in the backbone form, but in the released form") as info:
        FeatureReader([released, backbone])
    assert str(backbone / "meta.json") in str(info.value) and str(released / "meta.json") in str(info.value)


def test_reader_values_of_handmade_shards(tmp_path):
    a = fake_shard(tmp_path / "a", [5, 9], base=0.0)
    b = fake_shard(tmp_path / "b", [11], base=1000.0)
    reader = FeatureReader([a, b])
    assert reader.image_ids == [5, 9, 11]
    # row 1 of shard a: element (0, 0) is 900 * 384 % 97 = 345600 % 97 = 86
    assert reader.keys480(1)[0, 0] == 86.0
    assert reader.keys480(2)[0, 0] == 1000.0 and reader.tokens224(2)[5, 7] == 1000.0
    assert reader.tokens224(0).dtype == np.float32


@pytest.mark.badinput
def test_reader_refuses_shards_of_different_precisions(tmp_path):
    """A data set's shards extracted in bfloat16 and in float32 are two runs mixed, like two checkpoints."""
    a = fake_shard(tmp_path / "a", [5], precision="float32")
    b = fake_shard(tmp_path / "b", [6], precision="bfloat16")
    assert FeatureReader([a, fake_shard(tmp_path / "c", [7], precision="float32")]).image_ids == [5, 7]
    with pytest.raises(FeatureError, match="'precision' differs from .*'bfloat16' vs 'float32'") as info:
        FeatureReader([a, b])
    assert str(b / "meta.json") in str(info.value)


@pytest.mark.badinput
def test_reader_incomplete_shard(tmp_path):
    shard = fake_shard(tmp_path / "s", [1], meta=False)
    with pytest.raises(FeatureError, match="incomplete") as info:
        FeatureReader([shard])
    assert str(shard / "meta.json") in str(info.value)


@pytest.mark.badinput
def test_reader_wrong_shape(tmp_path):
    shard = fake_shard(tmp_path / "s", [1, 2], keys_shape=(2, 196, 384))
    with pytest.raises(FeatureError, match=r"shape \(2, 196, 384\) does not match \(2, 900, 384\)") as info:
        FeatureReader([shard])
    assert str(shard / "keys480.npy") in str(info.value)


@pytest.mark.badinput
def test_reader_row_count_disagrees_with_ids(tmp_path):
    shard = fake_shard(tmp_path / "s", [1, 2])
    write_json(shard / "image_ids.json", [1, 2, 3])
    with pytest.raises(FeatureError, match="3 ids in image_ids.json"):
        FeatureReader([shard])


@pytest.mark.badinput
def test_reader_wrong_dtype(tmp_path):
    shard = fake_shard(tmp_path / "s", [1], dtype="float64")
    with pytest.raises(FeatureError, match="dtype float64") as info:
        FeatureReader([shard])
    assert str(shard / "keys480.npy") in str(info.value)


@pytest.mark.badinput
def test_reader_missing_array_and_bad_ids(tmp_path):
    shard = fake_shard(tmp_path / "s", [1])
    (shard / "tokens224.npy").unlink()
    with pytest.raises(FeatureError, match="feature array missing") as info:
        FeatureReader([shard])
    assert str(shard / "tokens224.npy") in str(info.value)
    other = fake_shard(tmp_path / "t", [1])
    (other / "image_ids.json").write_text('{"ids": [1]}')
    with pytest.raises(FeatureError, match="list of integer image ids"):
        FeatureReader([other])
    with pytest.raises(FeatureError, match="no feature shards"):
        FeatureReader([])


# ---- extraction with a test double for the network: streaming, failures, arguments ---------------------------------


class ConstantModel(torch.nn.Module):
    """Stands in for the ViT: returns `value` in the readings' shapes and logs how many images were opened."""

    geometry = SEED  # the seed's ViT-S/16: keys480 (900, 384), tokens224 (196, 384)
    form = "backbone"

    def __init__(self, value: float = 0.0, log: list | None = None, opened: list | None = None):
        super().__init__()
        self.value, self.log, self.opened = value, log, opened

    def last_keys(self, x):
        if self.log is not None:
            self.log.append(len(self.opened))
        return torch.full((x.shape[0], 900, 384), self.value)

    def tokens(self, x):
        return torch.full((x.shape[0], 196, 384), self.value)


class CountingDataset:
    def __init__(self, dataset: CocoDataset):
        self.dataset, self.opened = dataset, []
        self.annotations_sha256 = dataset.annotations_sha256

    def open_image(self, image_id):
        self.opened.append(image_id)
        return self.dataset.open_image(image_id)


def test_extraction_streams_one_batch_at_a_time(demo_ds, tmp_path):
    counting = CountingDataset(demo_ds)
    log: list[int] = []
    extract_shard(ConstantModel(1.5, log, counting.opened), counting, [1, 2, 3, 4, 5], tmp_path, batch_size=2,
                  dtype="float16", precision="float32")
    # images opened before each forward pass: the batch itself, and at most two more read ahead (prefetch)
    assert len(log) == 3
    assert all(min(5, 2 * (i + 1)) <= opened <= min(5, 2 * (i + 3)) for i, opened in enumerate(log)), log
    assert counting.opened == [1, 2, 3, 4, 5]
    keys = np.load(tmp_path / "keys480.npy", mmap_mode="r")
    assert keys.shape == (5, 900, 384) and float(keys[4, 899, 383]) == 1.5


@pytest.mark.badinput
def test_float16_overflow_fails_and_stale_meta_is_removed(demo_ds, tmp_path):
    extract_shard(ConstantModel(0.0), demo_ds, [1], tmp_path, batch_size=1, dtype="float16", precision="float32")
    assert (tmp_path / "meta.json").is_file()
    with pytest.raises(FeatureError, match="float32") as info:
        # 1e5 > 65504, float16's largest
        extract_shard(ConstantModel(1e5), demo_ds, [1], tmp_path, batch_size=1, dtype="float16", precision="float32")
    assert str(tmp_path) in str(info.value)
    assert not (tmp_path / "meta.json").exists()  # the old arrays' witness is gone: the shard reads as incomplete
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]
    with pytest.raises(FeatureError, match="incomplete"):
        FeatureReader([tmp_path])


@pytest.mark.badinput
def test_corrupt_image_mid_shard_leaves_no_shard(demo_ds, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(demo_ds.images_dir, copy / "images")
    shutil.copy(demo_ds.annotations_path, copy / "annotations.json")
    bad = copy / "images" / "000002.png"
    bad.write_bytes(bad.read_bytes()[:200])
    ds = CocoDataset(copy / "images", copy / "annotations.json")
    out = tmp_path / "shard"
    with pytest.raises(ImageError) as info:
        extract_shard(ConstantModel(), ds, [1, 2, 3], out, batch_size=1, dtype="float16", precision="float32")
    assert str(bad) in str(info.value)
    assert os.listdir(out) == []


@pytest.mark.badinput
@pytest.mark.parametrize(
    "kwargs, phrase",
    [({"dtype": "bfloat16"}, "feature dtype"), ({"batch_size": 0}, "batch_size"), ({"ids": []}, "at least one"),
     ({"ids": [1, 1]}, "duplicate"), ({"precision": "float64"}, "features.precision must be one of"),
     ({"precision": "float16"}, "features.precision: float16 runs on CUDA only")],
)
def test_bad_extraction_arguments(demo_ds, tmp_path, kwargs, phrase):
    ids = kwargs.pop("ids", [1])
    with pytest.raises(FeatureError, match=phrase):
        extract_shard(ConstantModel(), demo_ds, ids, tmp_path,
                      **{"batch_size": 1, "dtype": "float16", "precision": "float32", **kwargs})


@pytest.mark.badinput
def test_model_with_wrong_output_shape(demo_ds, tmp_path):
    class Wrong(ConstantModel):
        def tokens(self, x):
            return torch.zeros(x.shape[0], 197, 384)

    with pytest.raises(FeatureError, match=r"tokens224 of shape \(1, 197, 384\)"):
        extract_shard(Wrong(), demo_ds, [1], tmp_path, batch_size=1, dtype="float16", precision="float32")


# ---- the real data: all 79 coco2017-mini val images in 3 shards ----------------------------------------------------


@pytest.mark.coco
@pytest.mark.slow
def test_coco_mini_features_in_three_shards(coco_mini_features, seeded_backbone):
    ds, manifest, dirs = coco_mini_features["val"]
    model = seeded_backbone
    assert [len(s) for s in manifest["shards"]] == [32, 32, 15]
    for shard_ids, shard in zip(manifest["shards"], dirs):
        assert json.loads((shard / "image_ids.json").read_text()) == shard_ids
    reader = FeatureReader(dirs)
    assert len(reader) == 79
    assert reader.image_ids == manifest["image_ids"] == sorted(reader.image_ids)
    for kind, tail in (("keys480", (900, 384)), ("tokens224", (196, 384))):
        total = 0
        for ids, arr in reader.iter_shards(kind):
            assert arr.dtype == np.float16 and arr.shape == (len(ids), *tail)
            assert np.isfinite(arr).all()
            assert np.abs(arr.astype(np.float32)).max(axis=(1, 2)).min() > 0  # every row written
            total += arr.shape[0]
        assert total == 79
    # spot check the last image (last shard, last row) against a direct computation
    last = reader.image_ids[-1]
    img = open_rgb(ds.image_path(last))
    with torch.inference_mode():
        keys = model.last_keys(keys480_input(img)[None])[0].numpy()
    np.testing.assert_allclose(reader.keys480(78), keys, rtol=1e-3, atol=1e-4)


def test_reader_of_tokens_alone_needs_no_keys(shards):
    """With features.keep false the keys480 of a shard may be deleted once decoded; the probe reads tokens only."""
    copy = shards["A"].parent / "A-tokens-only"
    shutil.copytree(shards["A"], copy)
    (copy / "keys480.npy").unlink()
    with pytest.raises(FeatureError, match="keys480.npy: feature array missing"):
        FeatureReader([copy])
    reader = FeatureReader([copy], kinds=("tokens224",))
    assert reader.image_ids == [2, 1]
    assert np.array_equal(reader.tokens224(1), np.load(copy / "tokens224.npy")[1].astype(np.float32))
    with pytest.raises(FeatureError, match="'keys480' was not opened"):
        reader.keys480(0)
    with pytest.raises(FeatureError, match="unknown feature kind"):
        FeatureReader([copy], kinds=("keys224",))


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="reads the process's memory maps (Linux)")
def test_a_pass_over_the_shards_keeps_no_shard_mapped(tmp_path):
    """iter_shards maps each shard anew and keeps none, so a pass over a data set (the probe's) holds one shard's
    pages, not the whole data set's (docs/design.md §10)."""
    import gc

    shards = [fake_shard(tmp_path / name, [i]) for i, name in enumerate(("a", "b", "c"))]
    reader = FeatureReader(shards, kinds=("tokens224",))
    seen = 0
    for _, array in reader.iter_shards("tokens224"):
        assert str(array.filename) in Path("/proc/self/maps").read_text()  # the shard being read is mapped
        seen += int(array.shape[0])
    del array
    gc.collect()
    mapped = Path("/proc/self/maps").read_text()
    assert seen == 3 and not [s for s in shards if str(s / "tokens224.npy") in mapped]
