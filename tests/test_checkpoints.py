"""Checkpoint formats (docs/design.md §2): every format loads to the same backbone, conversions drop exactly what the design
says, untrusted files are refused without running their payload, and every error names the file and the problem."""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

from evaluate import EvaluationError
from evaluate.networks.vit import VisionTransformer, vit_small
from evaluate.networks.checkpoints import (
    FORMATS,
    CheckpointError,
    LoadedCheckpoint,
    convert_checkpoint,
    detect_format,
    load_backbone,
    read_checkpoint_file,
    unwrap_checkpoint,
)
from evaluate.demo.checkpoints import save_backbone

CONTAINERS = (".pth", ".safetensors")


@pytest.fixture(scope="module")
def teacher() -> VisionTransformer:
    torch.manual_seed(10)
    return vit_small().eval()


@pytest.fixture(scope="module")
def student_state(teacher) -> dict[str, torch.Tensor]:
    """A student that differs from the teacher in every tensor."""
    return {key: value + 0.125 for key, value in teacher.state_dict().items()}


@pytest.fixture(scope="module")
def files(tmp_path_factory, teacher, student_state) -> dict[tuple[str, str], Path]:
    """Every format in both containers, written once: {(format, suffix): path}."""
    folder = tmp_path_factory.mktemp("checkpoints")
    return {
        (fmt, suffix): save_backbone(teacher, folder / f"{fmt}{suffix}", fmt, student=student_state)
        for fmt in FORMATS
        for suffix in CONTAINERS
    }


def assert_same_backbone(loaded: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert set(loaded) == set(expected)
    for key, value in expected.items():
        assert torch.equal(loaded[key], value), key


# ----------------------------------------------------------------------------------------------------- formats


@pytest.mark.parametrize("suffix", CONTAINERS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_loads_to_identical_backbone_tensors(files, teacher, fmt, suffix):
    path = files[(fmt, suffix)]
    loaded = load_backbone(path, which="teacher", form="backbone")
    assert isinstance(loaded, LoadedCheckpoint)
    assert loaded.format == fmt
    assert loaded.path == path
    assert not loaded.model.training
    assert_same_backbone(loaded.model.state_dict(), teacher.state_dict())
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())


def test_loaded_model_computes_what_the_saved_one_does(files, teacher):
    loaded = load_backbone(files[("dino-train", ".pth")], which="teacher", form="backbone").model
    x = torch.randn(1, 3, 64, 80)
    with torch.inference_mode():
        torch.testing.assert_close(loaded.last_keys(x), teacher.last_keys(x), rtol=0, atol=0)


def test_sha256_is_the_files_sha256(files):
    path = files[("selfpatch-train", ".pth")]
    assert load_backbone(path, which="teacher", form="backbone").sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("suffix", CONTAINERS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_detect_format_recognises_each_format_by_its_keys(files, fmt, suffix):
    assert detect_format(read_checkpoint_file(files[(fmt, suffix)])) == fmt


def test_dino_backbone_conversion_drops_exactly_1536_parameters(files):
    state = read_checkpoint_file(files[("dino-backbone", ".pth")])
    assert tuple(state["pos_embed"].shape) == (1, 197, 384)
    converted, dropped = convert_checkpoint(state, "dino-backbone", "teacher")
    total_before = sum(v.numel() for v in state.values())
    total_after = sum(v.numel() for v in converted.values())
    assert total_before - total_after == 1536
    assert total_after == 21_664_128
    assert sorted(dropped) == ["cls_token", "norm.bias", "norm.weight", "pos_embed[0]"]
    assert torch.equal(converted["pos_embed"], state["pos_embed"][:, 1:])


def test_dino_train_takes_the_teacher_backbone_and_drops_the_head(files):
    state = read_checkpoint_file(files[("dino-train", ".pth")])
    assert {"student", "teacher", "optimizer", "epoch", "args", "dino_loss"} <= set(state)
    assert isinstance(state["args"], argparse.Namespace)
    assert isinstance(state["optimizer"]["param_groups"][0]["lr"], np.float64)  # DINO's schedules are numpy
    _, dropped = convert_checkpoint(state, "dino-train", "teacher")
    assert {k for k in dropped if k.startswith("head.")} == {k for k in state["teacher"] if k.startswith("head.")}
    assert {"cls_token", "norm.weight", "norm.bias", "pos_embed[0]"} <= set(dropped)


def test_selfpatch_train_takes_backbone_only_and_ignores_its_three_heads(files):
    state = read_checkpoint_file(files[("selfpatch-train", ".pth")])
    converted, dropped = convert_checkpoint(state, "selfpatch-train", "teacher")
    assert {k.split(".")[0] for k in dropped} == {"ca_head", "c_head", "p_head"}
    assert len(converted) == 12 * 12 + 3  # 6 weight/bias pairs per block, the patch embedding's pair, the table


def test_safetensors_training_checkpoint_is_flattened_one_level(files):
    keys = set(safetensors.torch.load_file(str(files[("dino-train", ".safetensors")])))
    assert "teacher.backbone.blocks.0.attn.qkv.weight" in keys
    assert "student.module.backbone.pos_embed" in keys
    assert "teacher.head.mlp.0.weight" in keys
    nested = read_checkpoint_file(files[("dino-train", ".safetensors")])
    assert "backbone.blocks.0.attn.qkv.weight" in nested["teacher"]


def test_format_is_found_by_content_not_by_file_name(files, tmp_path):
    renamed = tmp_path / "weights.bin"
    renamed.write_bytes(files[("selfpatch-train", ".safetensors")].read_bytes())
    assert load_backbone(renamed, which="teacher", form="backbone").format == "selfpatch-train"


# ----------------------------------------------------------------------------------------------------- student


@pytest.mark.parametrize("suffix", CONTAINERS)
@pytest.mark.parametrize("fmt", ["dino-train", "selfpatch-train"])
def test_student_weights_only_when_asked_for(files, teacher, student_state, fmt, suffix):
    path = files[(fmt, suffix)]
    assert_same_backbone(load_backbone(path, which="teacher", form="backbone").model.state_dict(), teacher.state_dict())
    student = load_backbone(path, which="student", form="backbone")
    assert student.which == "student"
    assert_same_backbone(student.model.state_dict(), student_state)


def test_student_of_a_backbone_file_is_an_error_naming_the_file(files):
    path = files[("backbone", ".pth")]
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="student", form="backbone")
    assert str(path) in str(info.value) and "student" in str(info.value)


def test_prefixes_are_stripped_only_as_prefixes():
    t = {name: torch.full((1,), float(i)) for i, name in enumerate(["a", "b", "c", "d", "e"])}
    state = {
        "teacher": {
            "backbone.blocks.0.x": t["a"],
            "p_head.backbone.y": t["b"],  # 'backbone.' in the middle: a head weight, not a backbone weight
        },
        "student": {
            "module.backbone.blocks.0.x": t["c"],
            "module.c_head.module.backbone.z": t["d"],
            "extra.module.backbone.w": t["e"],
        },
    }
    assert unwrap_checkpoint(state, "selfpatch-train", which="teacher")[0] == {"blocks.0.x": t["a"]}
    assert unwrap_checkpoint(state, "selfpatch-train", which="student")[0] == {"blocks.0.x": t["c"]}


# ----------------------------------------------------------------------------------------------------- untrusted files


class RunsAShell:
    """A pickle payload: unpickling it would run `touch <marker>`."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class OpensAFile:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize("payload", [RunsAShell, OpensAFile])
@pytest.mark.parametrize("writer", ["torch.save", "raw pickle"])
def test_malicious_pickle_is_refused_and_its_payload_never_runs(tmp_path, payload, writer):
    marker = tmp_path / "payload-ran"
    path = tmp_path / "evil.pth"
    state = {"pos_embed": payload(marker), "patch_embed.proj.weight": torch.zeros(1)}
    if writer == "torch.save":
        torch.save(state, path)
    else:
        path.write_bytes(pickle.dumps(state, protocol=2))
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = str(info.value)
    assert str(path) in message
    assert ("system" if payload is RunsAShell else "open") in message
    assert "refused" in message
    assert not marker.exists()


def test_numpy_1_checkpoint_names_are_allowed(tmp_path, teacher):
    # A DINO checkpoint written under numpy 1.x names the scalar constructor numpy.core.multiarray.scalar.
    state = {
        "teacher": {f"backbone.{k}": v for k, v in teacher.state_dict().items()},
        "student": {},
        "optimizer": {"param_groups": [{"lr": np.float64(5e-4)}]},
        "epoch": 3,
        "args": argparse.Namespace(arch="vit_small"),
    }
    path = tmp_path / "numpy1.pth"
    torch.save(state, path, _use_new_zipfile_serialization=False)  # a raw pickle stream: names are editable
    data = path.read_bytes()
    assert b"numpy._core.multiarray\nscalar" in data
    path.write_bytes(data.replace(b"numpy._core.multiarray\nscalar", b"numpy.core.multiarray\nscalar"))
    loaded = read_checkpoint_file(path)
    assert loaded["optimizer"]["param_groups"][0]["lr"] == 5e-4
    assert_same_backbone(load_backbone(path, which="teacher", form="backbone").model.state_dict(), teacher.state_dict())


def test_other_harmless_looking_globals_are_still_refused(tmp_path):
    path = tmp_path / "with_path.pth"
    torch.save({"pos_embed": torch.zeros(1), "output_dir": Path("/runs/dino")}, path)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint_file(path)
    assert str(path) in str(info.value) and "PosixPath" in str(info.value)


# ----------------------------------------------------------------------------------------------------- bad files


def vit_ti_state() -> dict[str, torch.Tensor]:
    """ViT-Ti/16 shapes (192 wide, MLP 768) in DINO's released form, zeros in float16 to keep the file small: no
    entry of the registry has this width."""
    z = lambda *shape: torch.zeros(shape, dtype=torch.float16)  # noqa: E731
    state = {"patch_embed.proj.weight": z(192, 3, 16, 16), "patch_embed.proj.bias": z(192)}
    state["pos_embed"] = z(1, 197, 192)
    for i in range(12):
        p = f"blocks.{i}."
        state |= {p + "norm1.weight": z(192), p + "norm1.bias": z(192), p + "norm2.weight": z(192), p + "norm2.bias": z(192)}
        state |= {p + "attn.qkv.weight": z(576, 192), p + "attn.qkv.bias": z(576)}
        state |= {p + "attn.proj.weight": z(192, 192), p + "attn.proj.bias": z(192)}
        state |= {p + "mlp.fc1.weight": z(768, 192), p + "mlp.fc1.bias": z(768)}
        state |= {p + "mlp.fc2.weight": z(192, 768), p + "mlp.fc2.bias": z(192)}
    state |= {"cls_token": z(1, 1, 192), "norm.weight": z(192), "norm.bias": z(192)}
    return state


def test_vit_ti_checkpoint_is_refused_naming_file_and_what_was_found(tmp_path):
    path = tmp_path / "deit_tiny.pth"
    torch.save(vit_ti_state(), path)
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = str(info.value)
    assert message.startswith(f"{path}: found ViT-Ti/16 (192 wide, 16 x 16 patches, 12 blocks), which is not supported")
    assert "ViT-B/16" in message and "DINOv2 ViT-S/14 with 4 registers" in message  # what is supported


def test_a_patch_size_that_contradicts_its_table_is_refused_naming_its_table(tmp_path, teacher):
    state = dict(teacher.state_dict())
    state["patch_embed.proj.weight"] = torch.zeros(384, 3, 8, 8)  # ViT-S/8's embedding, ViT-S/16's 14 x 14 table
    path = save_backbone(state, tmp_path / "vits8.safetensors", "backbone")
    loaded = load_backbone(path, which="teacher", form="backbone")  # a ViT-S/8 whose table is stored for 14 x 14: it reads as one
    assert loaded.architecture == "vit-s8" and loaded.model.geometry.keys480_grid == 60
    state["blocks.0.attn.qkv.weight"] = torch.zeros(1152, 192)
    path = save_backbone({k: v for k, v in state.items()}, tmp_path / "odd.pth", "backbone")
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = str(info.value)
    assert str(path) in message and "1 wrong shapes" in message
    assert "blocks.0.attn.qkv.weight (1152, 192) (expected (1152, 384))" in message


def test_missing_and_unexpected_keys_are_named(tmp_path, teacher):
    state = dict(teacher.state_dict())
    del state["blocks.3.mlp.fc1.bias"]
    state["blocks.12.norm1.weight"] = torch.ones(384)
    path = save_backbone(state, tmp_path / "odd.pth", "backbone")
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = str(info.value)
    assert str(path) in message
    assert "1 missing backbone keys: blocks.3.mlp.fc1.bias" in message
    assert "1 unexpected keys: blocks.12.norm1.weight" in message


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused_naming_file_and_tensor(tmp_path, teacher, bad):
    state = dict(teacher.state_dict())
    state["blocks.7.attn.proj.weight"] = state["blocks.7.attn.proj.weight"].clone()
    state["blocks.7.attn.proj.weight"][3, 5] = bad
    path = save_backbone(state, tmp_path / "diverged.pth", "dino-backbone")
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    assert str(path) in str(info.value)
    assert "NaN or infinite" in str(info.value) and "blocks.7.attn.proj.weight" in str(info.value)


@pytest.mark.parametrize("suffix", CONTAINERS)
def test_truncated_file_is_refused_naming_the_file(files, tmp_path, suffix):
    data = files[("backbone", suffix)].read_bytes()
    path = tmp_path / f"truncated{suffix}"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    assert str(path) in str(info.value)
    assert "truncated" in str(info.value) or "not a readable" in str(info.value)


def test_empty_file_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "empty.pth"
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty") as info:
        load_backbone(path, which="teacher", form="backbone")
    assert str(path) in str(info.value)


def test_folder_is_refused_naming_it(tmp_path):
    with pytest.raises(CheckpointError, match="folder") as info:
        load_backbone(tmp_path, which="teacher", form="backbone")
    assert str(tmp_path) in str(info.value)


def test_missing_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "nowhere.pth"
    with pytest.raises(CheckpointError, match="not found") as info:
        load_backbone(path, which="teacher", form="backbone")
    assert str(path) in str(info.value)


def test_text_file_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "notes.pth"
    path.write_text("these are not weights\n")
    with pytest.raises(CheckpointError, match="not a readable checkpoint") as info:
        load_backbone(path, which="teacher", form="backbone")
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "content,complaint",
    [
        (torch.zeros(3), "holds a Tensor, not a dict"),
        ({"optimizer": {}, "epoch": 1}, "not a recognised checkpoint format"),
        ({}, "empty dict"),
    ],
)
def test_files_without_a_backbone_are_refused(tmp_path, content, complaint):
    path = tmp_path / "other.pth"
    torch.save(content, path)
    with pytest.raises(CheckpointError, match=complaint) as info:
        load_backbone(path, which="teacher", form="backbone")
    assert str(path) in str(info.value)


def test_checkpoint_error_is_an_evaluation_error():
    assert issubclass(CheckpointError, EvaluationError)
