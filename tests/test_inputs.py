"""evaluate.readings.inputs: a shard's images are decoded once, in worker processes, and every checkpoint's extraction of the
shard from those uint8 inputs gives features byte-identical to decoding the JPEGs itself (today's path)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

import evaluate.datasets.coco
import evaluate.readings.inputs
from evaluate.networks.checkpoints import load_backbone
from evaluate.datasets.coco import CocoDataset
from sources import demo_coco
from evaluate.demo.checkpoints import make_demo_checkpoint
from evaluate.readings.features import extract_inputs, extract_shard
from evaluate.pixels.images import ImageError, keys480_input, normalise_pixels, tokens224_input
from evaluate.readings.inputs import (BYTES_PER_IMAGE, DecodedInputs, InputsError, StoredInputs, decoded_pixels,
                             drop_if_all_extracted, drop_inputs, open_shard_inputs, preprocess_shard, prefetch)

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


@pytest.fixture(scope="module")
def demo_ds(tmp_path_factory) -> CocoDataset:
    return demo_coco(tmp_path_factory, 5, seed=21)


@pytest.fixture
def decode_count(monkeypatch):
    """Counts calls of the function that opens image files, in this process and in forked workers alike."""
    counter = multiprocessing.get_context("fork").Value("i", 0)
    real = evaluate.datasets.coco.open_rgb

    def counting_open_rgb(path):
        with counter.get_lock():
            counter.value += 1
        return real(path)

    monkeypatch.setattr(evaluate.datasets.coco, "open_rgb", counting_open_rgb)
    return counter


# ---- normalisation and the uint8 readings ---------------------------------------------------------------------------


def test_normalise_pixels_of_a_batch_equals_each_image_bit_for_bit():
    rng = np.random.default_rng(0)
    batch = rng.integers(0, 256, size=(3, 5, 7, 3), dtype=np.uint8)
    out = normalise_pixels(batch)
    assert out.shape == (3, 3, 5, 7) and out.dtype == torch.float32
    for i in range(3):
        own = ((batch[i].astype(np.float32) / np.float32(255)) - MEAN) / STD  # the formula, written independently
        assert np.array_equal(out[i].numpy(), own.transpose(2, 0, 1))
        assert np.array_equal(out[i].numpy(), normalise_pixels(batch[i]).numpy())
    # hand values: pixel 0 in the red channel is -0.485 / 0.229, pixel 255 in blue is (1 - 0.406) / 0.225
    assert float(normalise_pixels(np.zeros((1, 1, 3), np.uint8))[0, 0, 0]) == pytest.approx(-2.1179039, abs=1e-6)
    assert float(normalise_pixels(np.full((1, 1, 3), 255, np.uint8))[2, 0, 0]) == pytest.approx(2.64, abs=1e-6)
    every_level = np.stack([np.arange(256, dtype=np.uint8)] * 3, axis=-1)[None]  # (1, 256, 3): all 256 levels
    own = ((every_level.astype(np.float32) / np.float32(255)) - MEAN) / STD
    assert normalise_pixels(every_level).numpy().tobytes() == np.ascontiguousarray(own.transpose(2, 0, 1)).tobytes()
    with pytest.raises(ValueError, match="uint8"):
        normalise_pixels(batch.astype(np.float32))


def test_preprocess_writes_the_readings_pixels_with_ids_last(demo_ds, tmp_path):
    ids = [3, 1, 2]
    renames: list[str] = []
    real_replace = os.replace

    def recording_replace(src, dst):
        renames.append(Path(dst).name)
        return real_replace(src, dst)

    os.replace = recording_replace
    try:
        out = preprocess_shard(demo_ds, ids, tmp_path / "000", workers=1)
    finally:
        os.replace = real_replace
    assert renames[-1] == "image_ids.json"
    assert sorted(os.listdir(out)) == ["image_ids.json", "images224.npy", "images480.npy"]
    assert json.loads((out / "image_ids.json").read_text()) == ids
    a480, a224 = np.load(out / "images480.npy"), np.load(out / "images224.npy")
    assert a480.dtype == np.uint8 and a480.shape == (3, 480, 480, 3) and a224.shape == (3, 224, 224, 3)
    assert a480.nbytes / 3 + a224.nbytes / 3 == BYTES_PER_IMAGE == 900 * 384 * 2 + 196 * 384 * 2
    for row, image_id in enumerate(ids):
        img = demo_ds.open_image(image_id)
        assert np.array_equal(normalise_pixels(a480[row]).numpy(), keys480_input(img).numpy())
        assert np.array_equal(normalise_pixels(a224[row]).numpy(), tokens224_input(img).numpy())


def test_workers_decode_each_image_once_and_give_the_same_bytes(demo_ds, tmp_path, decode_count):
    ids = [1, 2, 3, 4, 5]
    one = preprocess_shard(demo_ds, ids, tmp_path / "one", workers=1)
    assert decode_count.value == 5
    two = preprocess_shard(demo_ds, ids, tmp_path / "two", workers=2)
    assert decode_count.value == 10  # the workers' decodes are counted too (forked, shared counter)
    for name in ("images480.npy", "images224.npy", "image_ids.json"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    got = [image_id for image_id, _, _ in decoded_pixels(demo_ds, ids[::-1], workers=3)]
    assert got == ids[::-1]  # in the order asked for, whatever worker finished first


@pytest.mark.badinput
def test_a_corrupt_image_in_a_worker_names_the_file_and_leaves_nothing(demo_ds, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(demo_ds.images_dir, copy / "images")
    shutil.copy(demo_ds.annotations_path, copy / "annotations.json")
    bad = copy / "images" / "000004.png"
    bad.write_bytes(bad.read_bytes()[:200])
    ds = CocoDataset(copy / "images", copy / "annotations.json")
    out = tmp_path / "shard"
    with pytest.raises(ImageError) as info:
        preprocess_shard(ds, [1, 2, 3, 4, 5], out, workers=2)
    assert str(bad) in str(info.value)
    assert os.listdir(out) == []


def test_rows_go_to_whichever_process_is_free(demo_ds, tmp_path, monkeypatch):
    """The process that holds image 1 waits until every other image is written: only a shared row counter lets
    the other process take all four (a fixed split of the rows would leave two of them waiting forever)."""
    context = multiprocessing.get_context("fork")
    done = context.Value("i", 0)
    decoded_by = context.Array("i", 6)  # pid per image id 1..5
    real = evaluate.readings.inputs.decode_pixels

    def recording_decode(dataset, image_id):
        if image_id == 1:
            deadline = time.monotonic() + 120
            while done.value < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
        pixels = real(dataset, image_id)
        decoded_by[image_id] = os.getpid()
        with done.get_lock():
            done.value += 1
        return pixels

    monkeypatch.setattr(evaluate.readings.inputs, "decode_pixels", recording_decode)
    out = preprocess_shard(demo_ds, [1, 2, 3, 4, 5], tmp_path / "000", workers=2)
    others = {decoded_by[i] for i in (2, 3, 4, 5)}
    assert len(others) == 1 and decoded_by[1] not in others and 0 not in others
    reference = preprocess_shard(demo_ds, [1, 2, 3, 4, 5], tmp_path / "one", workers=1)
    for name in ("images480.npy", "images224.npy"):
        assert (out / name).read_bytes() == (reference / name).read_bytes()


@pytest.mark.badinput
def test_a_killed_worker_is_reported_and_leaves_nothing(demo_ds, tmp_path, monkeypatch):
    parent = os.getpid()
    real = evaluate.readings.inputs.decode_pixels

    def dying_decode(dataset, image_id):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer would
        return real(dataset, image_id)

    monkeypatch.setattr(evaluate.readings.inputs, "decode_pixels", dying_decode)
    out = tmp_path / "shard"
    with pytest.raises(InputsError, match=r"preprocessing worker .* exit code -9") as info:
        preprocess_shard(demo_ds, [1, 2, 3, 4, 5], out, workers=2)
    assert str(out) in str(info.value)
    assert os.listdir(out) == []


@pytest.mark.badinput
def test_stored_inputs_refuse_stale_incomplete_and_wrong_folders(demo_ds, tmp_path):
    out = preprocess_shard(demo_ds, [1, 2], tmp_path / "000")
    assert StoredInputs(out, expected_ids=[1, 2]).image_ids == [1, 2]
    with pytest.raises(InputsError, match=r"holds image ids \[1, 2\] but the shard is \[1, 3\]") as info:
        StoredInputs(out, expected_ids=[1, 3])
    assert str(out) in str(info.value)
    np.save(out / "images224.npy", np.zeros((2, 224, 224, 3), np.float32))
    with pytest.raises(InputsError, match=r"images224.npy: float32 \(2, 224, 224, 3\), expected uint8"):
        StoredInputs(out)
    (out / "image_ids.json").unlink()
    with pytest.raises(InputsError, match="incomplete"):
        StoredInputs(out)
    with pytest.raises(InputsError, match="duplicate"):
        preprocess_shard(demo_ds, [1, 1], tmp_path / "001")


# ---- prefetch -------------------------------------------------------------------------------------------------------


def test_prefetch_keeps_order_reads_ahead_boundedly_and_raises_where_the_error_was():
    produced: list[int] = []

    def items():
        for i in range(10):
            produced.append(i)
            yield i

    stream = prefetch(items(), depth=2)
    assert next(stream) == 0
    time.sleep(0.2)  # lets the producer run as far ahead as it may; the bound below holds however long it runs
    assert len(produced) <= 3  # the item handed out, one waiting, one made and blocked
    assert [0, *stream] == list(range(10))

    def failing():
        yield 1
        yield 2
        raise ImageError("x.jpg: corrupt")

    got = []
    with pytest.raises(ImageError, match="x.jpg"):
        for item in prefetch(failing()):
            got.append(item)
    assert got == [1, 2]


def test_leaving_a_prefetch_early_stops_its_thread():
    before = {t.ident for t in threading.enumerate()}
    stream = prefetch(iter(range(1000)), depth=2)
    assert next(stream) == 0
    stream.close()
    assert {t.ident for t in threading.enumerate() if t.name == "prefetch"} - before == set()


# ---- the acceptance test: three checkpoints on one shard of real photos --------------------------------------------


def reference_readings(model, dataset, image_ids) -> tuple[np.ndarray, np.ndarray]:
    """Today's extraction, written out independently: per image PIL open, EXIF, RGB, the two resizes, ImageNet
    normalisation in float32; one batch through the network; float16."""
    x480, x224 = [], []
    for image_id in image_ids:
        with Image.open(dataset.image_path(image_id)) as img:
            img = ImageOps.exif_transpose(img).convert("RGB")
        w, h = img.size
        a = np.asarray(img.resize((480, 480), Image.Resampling.LANCZOS), dtype=np.float32) / np.float32(255)
        x480.append(((a - MEAN) / STD).transpose(2, 0, 1))
        new = (224, int(h * 224 / w)) if w <= h else (int(w * 224 / h), 224)
        left, top = int(round((new[0] - 224) / 2)), int(round((new[1] - 224) / 2))
        b = img.resize(new, Image.Resampling.BICUBIC).crop((left, top, left + 224, top + 224))
        b = np.asarray(b, dtype=np.float32) / np.float32(255)
        x224.append(((b - MEAN) / STD).transpose(2, 0, 1))
    with torch.inference_mode():
        keys = model.last_keys(torch.from_numpy(np.ascontiguousarray(np.stack(x480)))).numpy()
        tokens = model.tokens(torch.from_numpy(np.ascontiguousarray(np.stack(x224)))).numpy()
    return keys.astype(np.float16), tokens.astype(np.float16)


@pytest.mark.coco
@pytest.mark.slow
def test_three_checkpoints_on_one_shard_decode_once_and_equal_extracting_each_alone(coco_mini, tmp_path, decode_count):
    dataset = CocoDataset(coco_mini / "images", coco_mini / "annotations.json")
    sizes = {i: dataset.image_size(i) for i in dataset.image_ids}
    landscape = [i for i in sorted(sizes) if sizes[i][1] > sizes[i][0]][:2]
    portrait = [i for i in sorted(sizes) if sizes[i][1] < sizes[i][0]][:1]
    ids = landscape + portrait  # both crop directions of tokens224
    checkpoints = {
        fmt: load_backbone(make_demo_checkpoint(tmp_path / f"{fmt}.pth", fmt, seed=seed, architecture="vit-s16"),
                           which="teacher", form="backbone").model
        for fmt, seed in (("dino-backbone", 0), ("selfpatch-train", 1), ("dino-train", 2))
    }

    inputs_dir = preprocess_shard(dataset, ids, tmp_path / "inputs" / "000", workers=2)
    assert decode_count.value == len(ids)  # decoded once for the data set
    shared = {}
    for fmt, model in checkpoints.items():
        inputs = StoredInputs(inputs_dir, expected_ids=ids, annotations_sha256=dataset.annotations_sha256)
        shared[fmt] = extract_inputs(model, inputs, tmp_path / "shared" / fmt, batch_size=2, dtype="float16",
                                     precision="float32")
    assert decode_count.value == len(ids)  # ... and not again by any checkpoint's extraction

    for fmt, model in checkpoints.items():
        alone = extract_shard(model, dataset, ids, tmp_path / "alone" / fmt, batch_size=2, dtype="float16",
                              precision="float32")  # decodes
        for kind in ("keys480", "tokens224"):
            assert (shared[fmt] / f"{kind}.npy").read_bytes() == (alone / f"{kind}.npy").read_bytes(), (fmt, kind)
        assert (shared[fmt] / "image_ids.json").read_bytes() == (alone / "image_ids.json").read_bytes()
        assert json.loads((shared[fmt] / "meta.json").read_text())["annotations_sha256"] == dataset.annotations_sha256
    assert decode_count.value == len(ids) * (1 + len(checkpoints))  # today's path: once per checkpoint

    # and both equal today's extraction written out independently, in the same batches of 2 (the network's
    # products may depend on the batch's size)
    for fmt, model in checkpoints.items():
        keys = np.load(shared[fmt] / "keys480.npy")
        tokens = np.load(shared[fmt] / "tokens224.npy")
        for start in range(0, len(ids), 2):
            ref_keys, ref_tokens = reference_readings(model, dataset, ids[start : start + 2])
            assert np.array_equal(keys[start : start + 2], ref_keys), fmt
            assert np.array_equal(tokens[start : start + 2], ref_tokens), fmt
    different = np.load(shared["dino-backbone"] / "keys480.npy") != np.load(shared["selfpatch-train"] / "keys480.npy")
    assert different.mean() > 0.9  # three different networks, not one result copied


def test_decoded_inputs_batches_equal_stored_inputs_batches(demo_ds, tmp_path):
    ids = [5, 3, 1, 2, 4]
    stored = StoredInputs(preprocess_shard(demo_ds, ids, tmp_path / "s", workers=2), expected_ids=ids)
    decoded = DecodedInputs(demo_ds, ids)
    pairs = list(zip(stored.batches(2), decoded.batches(2)))
    assert [len(a[0]) for a, _ in pairs] == [2, 2, 1]
    for (ids_a, a480, a224), (ids_b, b480, b224) in pairs:
        assert ids_a == ids_b and np.array_equal(a480, b480) and np.array_equal(a224, b224)


def test_a_dropped_inputs_folder_falls_back_to_decoding_the_same_bytes(demo_ds, tmp_path, decode_count):
    ids = [2, 4, 1]
    folder = preprocess_shard(demo_ds, ids, tmp_path / "inputs" / "000", workers=1)
    assert decode_count.value == 3
    opened = []

    def opener():
        opened.append(1)
        return demo_ds

    stored = open_shard_inputs(folder, ids, annotations_sha256="x", open_dataset=opener)
    assert isinstance(stored, StoredInputs) and opened == []  # the data set is not even opened
    kept = [b for b in stored.batches(2)]
    reader = StoredInputs(folder)  # opened before the drop: its memory maps stay readable (POSIX unlink)
    on_disk = sum(f.stat().st_size for f in folder.iterdir())
    assert 3 * BYTES_PER_IMAGE < on_disk < 3 * BYTES_PER_IMAGE + 1024  # pixels, two .npy headers, the ids
    assert drop_inputs(folder) == on_disk
    assert not folder.exists()
    assert np.array_equal(next(reader.batches(3))[1], np.concatenate([kept[0][1], kept[1][1]]))
    decoded = open_shard_inputs(folder, ids, annotations_sha256="x", open_dataset=opener, workers=2)
    assert isinstance(decoded, DecodedInputs) and opened == [1]
    again = list(decoded.batches(2))
    assert decode_count.value == 6  # decoded here, once more
    for (ids_a, a480, a224), (ids_b, b480, b224) in zip(kept, again):
        assert ids_a == ids_b and np.array_equal(a480, b480) and np.array_equal(a224, b224)
    assert drop_inputs(folder) == 0  # already gone: nothing to do, no error


def test_inputs_are_dropped_only_once_every_checkpoint_has_the_shard(demo_ds, tmp_path):
    folder = preprocess_shard(demo_ds, [1], tmp_path / "inputs" / "000")
    metas = [tmp_path / "features" / c / "val" / "000" / "meta.json" for c in ("a", "b")]
    metas[0].parent.mkdir(parents=True)
    metas[0].write_text("{}")
    assert drop_if_all_extracted(folder, metas) is None and (folder / "images480.npy").is_file()
    metas[1].parent.mkdir(parents=True)
    metas[1].write_text("{}")
    assert drop_if_all_extracted(folder, metas) > BYTES_PER_IMAGE and not folder.exists()
