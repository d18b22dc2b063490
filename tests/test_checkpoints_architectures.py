"""Checkpoint files of the seeds' architectures (docs/design.md §2, §9): every format of each architecture loads to identical
backbone tensors and reports its architecture, Aug-ViT's index matrix is derived, XCiT's full form gives the
backbone form's features, unsupported architectures are refused naming the file and what was found, and files that
look like the new formats cannot run a payload."""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

import pytest
import safetensors.torch
import torch

from evaluate.networks.registry import REGISTRY, SEED_ARCHITECTURES, SUPPORTED, full_form
from evaluate.networks.vit import augvit_small, vit_small_layerscale
from evaluate.networks.checkpoints import (
    FORMATS,
    CheckpointError,
    detect_format,
    load_backbone,
    read_checkpoint_file,
)
from evaluate.demo.checkpoints import save_backbone
from evaluate.networks.xcit import xcit_small_12_p16
from test_architectures import randomise

CONTAINERS = (".pth", ".safetensors")


@pytest.fixture(scope="module")
def nets() -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {
        "vit-s16-layerscale": randomise(vit_small_layerscale(), 21),
        "augvit-s16": randomise(augvit_small("circulant2"), 22),
        "xcit-s12-16": randomise(xcit_small_12_p16(), 23),
    }


def assert_same_backbone(loaded: dict, expected: dict) -> None:
    assert set(loaded) == set(expected)
    for key, value in expected.items():
        assert torch.equal(loaded[key], value), key


def student_of(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: (v + 0.125 if v.is_floating_point() else v) for k, v in net.state_dict().items()}


CASES = (
    # Hugging Face has no class for a LayerScale ViT-S/16 in DeiT III's `gamma_1` (tests/test_hf_spellings.py)
    [("vit-s16-layerscale", fmt, naming) for fmt in FORMATS for naming in ("gamma_1", "ls1.gamma")
     if (fmt, naming) != ("hf", "gamma_1")]
    + [("augvit-s16", fmt, "circulant2") for fmt in ("dino-backbone", "dino-train", "selfpatch-train", "backbone")]
    + [("xcit-s12-16", fmt, naming) for fmt in ("dino-backbone", "dino-train") for naming in ("official", "timm")]
    + [("xcit-s12-16", "backbone", "official")]
)


@pytest.mark.parametrize("suffix", CONTAINERS)
@pytest.mark.parametrize("arch,fmt,naming", CASES)
def test_every_format_of_each_architecture_loads_to_identical_backbone_tensors(nets, tmp_path, arch, fmt, naming,
                                                                                suffix):
    net = nets[arch]
    path = save_backbone(net, tmp_path / f"{fmt}{suffix}", fmt, student=student_of(net), naming=naming)
    assert detect_format(read_checkpoint_file(path)) == fmt
    loaded = load_backbone(path, which="teacher", form="backbone")
    assert (loaded.format, loaded.architecture) == (fmt, arch)
    assert loaded.variant == naming
    assert loaded.head_layout == ("8x48" if arch == "xcit-s12-16" else "6x64")
    assert not loaded.model.training
    assert_same_backbone(loaded.model.state_dict(), net.state_dict())
    if fmt in ("dino-train", "selfpatch-train"):
        assert_same_backbone(load_backbone(path, which="student", form="backbone").model.state_dict(), student_of(net))


def test_deit3_file_holds_a_196_row_table_and_a_head(nets, tmp_path):
    path = save_backbone(nets["vit-s16-layerscale"], tmp_path / "deit_3_small_224_1k.pth", "deit3", naming="gamma_1")
    state = read_checkpoint_file(path)
    assert set(state) == {"model"}
    assert tuple(state["model"]["pos_embed"].shape) == (1, 196, 384) and "cls_token" in state["model"]
    loaded = load_backbone(path, which="teacher", form="backbone")
    assert {"head.weight", "head.bias", "cls_token", "norm.weight", "norm.bias"} <= set(loaded.dropped)
    assert "pos_embed[0]" not in loaded.dropped  # DeiT III's table has no class row
    assert torch.equal(loaded.model.pos_embed, nets["vit-s16-layerscale"].pos_embed.detach())


def test_xcit_dino_training_teacher_is_read_under_module_backbone(nets, tmp_path):
    path = save_backbone(nets["xcit-s12-16"], tmp_path / "checkpoint.pth", "dino-train")
    teacher = read_checkpoint_file(path)["teacher"]
    assert all(key.startswith("module.") for key in teacher)
    assert "module.backbone.blocks.11.attn.temperature" in teacher
    assert load_backbone(path, which="teacher", form="backbone").architecture == "xcit-s12-16"


def test_xcit_full_form_gives_the_backbone_forms_features(nets, tmp_path):
    full = save_backbone(nets["xcit-s12-16"], tmp_path / "dino_xcit_small_12_p16_pretrain.pth", "dino-backbone")
    bare = save_backbone(nets["xcit-s12-16"], tmp_path / "backbone.pth", "backbone")
    state = read_checkpoint_file(full)
    assert "cls_attn_blocks.1.attn.qkv.weight" in state and "cls_token" in state and "norm.weight" in state
    a, b = load_backbone(full, which="teacher", form="backbone"), load_backbone(bare, which="teacher", form="backbone")
    assert {k for k in a.dropped if k.startswith("cls_attn_blocks.")}
    x = torch.randn(1, 3, 64, 96, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        assert torch.equal(a.model.tokens(x), b.model.tokens(x))
        assert torch.equal(a.model.last_keys(x), b.model.last_keys(x))


def test_xcit_file_without_batch_counters_loads(nets, tmp_path):
    state = {k: v for k, v in nets["xcit-s12-16"].state_dict().items() if not k.endswith("num_batches_tracked")}
    path = tmp_path / "no_counters.pth"
    torch.save(state, path)
    loaded = load_backbone(path, which="teacher", form="backbone").model.state_dict()
    for key, value in state.items():
        assert torch.equal(loaded[key], value), key


def test_augvit_file_without_index_matrices_loads_and_derives_them(nets, tmp_path):
    net = nets["augvit-s16"]
    full = read_checkpoint_file(save_backbone(net, tmp_path / "with.pth", "dino-backbone"))
    assert len([k for k in full if k.endswith("index_matrix")]) == 48
    path = tmp_path / "without.pth"
    torch.save({k: v for k, v in full.items() if not k.endswith("index_matrix")}, path)
    loaded = load_backbone(path, which="teacher", form="backbone")
    assert_same_backbone(loaded.model.state_dict(), net.state_dict())
    block = loaded.model.blocks[5].augs2[0]
    assert torch.equal(block.index_matrix, net.blocks[5].augs2[0].index_matrix)
    x = torch.randn(1, 3, 48, 64, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        assert torch.equal(loaded.model.tokens(x), net.tokens(x))


def test_augvit_stored_index_matrix_that_differs_from_the_formula_is_refused(nets, tmp_path):
    full = read_checkpoint_file(save_backbone(nets["augvit-s16"], tmp_path / "with.pth", "dino-backbone"))
    full["blocks.4.augs.0.index_matrix"] = full["blocks.4.augs.0.index_matrix"].T.contiguous()
    path = tmp_path / "transposed_index.pth"
    torch.save(full, path)
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = str(info.value)
    assert message.startswith(str(path))
    assert "1 stored index matrices differ from the block-circulant formula" in message
    assert "blocks.4.augs.0.index_matrix" in message


# ----------------------------------------------------------------------------------------------------- classifiers


@pytest.fixture(scope="module")
def every_net() -> dict[str, torch.nn.Module]:
    """A seeded network of every architecture of the registry, in its main variant."""
    nets = {}
    for seed, name in enumerate(SEED_ARCHITECTURES):  # the DINO family's files: tests/test_family.py
        torch.manual_seed(100 + seed)
        nets[name] = REGISTRY[name].build(REGISTRY[name].variants[0]).eval()
    return nets


def head(dim: int, classes: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {"head.weight": torch.randn(classes, dim, generator=gen), "head.bias": torch.randn(classes, generator=gen)}


def write(state: dict, path: Path) -> Path:
    if path.suffix == ".safetensors":
        safetensors.torch.save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state, path)
    return path


@pytest.mark.parametrize("suffix", CONTAINERS)
@pytest.mark.parametrize("arch", SEED_ARCHITECTURES)
def test_released_classifier_loads_to_the_backbone_of_the_same_file_without_its_head(every_net, tmp_path, arch,
                                                                                     suffix, caplog):
    net = every_net[arch]
    dino_form = full_form(net.state_dict(), layout="dino")  # class token, class row, final norm (XCiT: CA blocks)
    with_head = {**dino_form, **head(384, 1000, seed=7)}
    bare, classifier = write(dino_form, tmp_path / f"bare{suffix}"), write(with_head, tmp_path / f"with_head{suffix}")
    with caplog.at_level(logging.INFO, logger="evaluate.networks.checkpoints"):
        loaded = load_backbone(classifier, which="teacher", form="backbone")
    reference = load_backbone(bare, which="teacher", form="backbone")
    assert (loaded.format, reference.format) == ("classifier", "dino-backbone")
    assert (loaded.architecture, loaded.variant) == (reference.architecture, reference.variant) == (
        arch, REGISTRY[arch].variants[0])
    assert_same_backbone(loaded.model.state_dict(), reference.model.state_dict())
    assert_same_backbone(loaded.model.state_dict(), net.state_dict())
    assert sorted(set(loaded.dropped) - set(reference.dropped)) == ["head.bias", "head.weight"]
    assert f"{classifier}: a classifier checkpoint" in caplog.text
    assert "dropped by the format: head.bias, head.weight" in caplog.text


def test_classifier_head_of_any_shape_is_dropped_and_nothing_else(every_net, tmp_path):
    dino_form = full_form(every_net["vit-s16"].state_dict(), layout="dino")
    ten = write({**dino_form, **head(384, 10, seed=1), "head.fc.weight": torch.ones(3, 3)}, tmp_path / "ten.pth")
    loaded = load_backbone(ten, which="teacher", form="backbone")
    assert loaded.format == "classifier"
    assert {"head.bias", "head.weight", "head.fc.weight"} <= set(loaded.dropped)
    assert_same_backbone(loaded.model.state_dict(), every_net["vit-s16"].state_dict())
    pooled = write({**dino_form, **head(384, 10, seed=1), "fc_norm.weight": torch.ones(384)}, tmp_path / "pooled.pth")
    with pytest.raises(CheckpointError, match="1 unexpected keys: fc_norm.weight") as info:
        load_backbone(pooled, which="teacher", form="backbone")
    assert str(info.value).startswith(str(pooled))


def test_a_head_is_no_classifier_without_its_class_token_body(every_net, tmp_path):
    backbone = every_net["vit-s16"].state_dict()
    deit3 = tmp_path / "deit3.pth"
    torch.save({"model": full_form(backbone, layout="deit3")}, deit3)  # class token, head: wrapped, not flat
    assert detect_format(read_checkpoint_file(deit3)) == "deit3"  # DeiT III's head is inside `model`
    assert_same_backbone(load_backbone(deit3, which="teacher", form="backbone").model.state_dict(), backbone)
    class_free = write({**backbone, **head(384, 1000, seed=2)}, tmp_path / "backbone_with_head.pth")
    assert detect_format(read_checkpoint_file(class_free)) == "backbone"  # no class token for a head to read
    with pytest.raises(CheckpointError, match="2 unexpected keys: head.bias, head.weight"):
        load_backbone(class_free, which="teacher", form="backbone")
    only_head = write(head(384, 1000, seed=3), tmp_path / "head_only.pth")
    with pytest.raises(CheckpointError, match="not a recognised checkpoint format"):
        load_backbone(only_head, which="teacher", form="backbone")


# ----------------------------------------------------------------------------------------------------- refusals


def zeros(*shape):
    return torch.zeros(shape, dtype=torch.float16)


def cait_s24_state() -> dict[str, torch.Tensor]:
    """CaiT-S24's names (24 blocks with talking heads, 2 class-attention blocks), tiny tensors: refused by name."""
    state = {"cls_token": zeros(1, 1, 384), "pos_embed": zeros(1, 196, 384), "patch_embed.proj.weight": zeros(384, 3, 16, 16)}
    for i in range(24):
        for part in ("norm1.weight", "attn.qkv.weight", "attn.proj_l.weight", "attn.proj_w.weight", "gamma_1"):
            state[f"blocks.{i}.{part}"] = zeros(1)
    for j in range(2):
        state[f"blocks_token_only.{j}.attn.q.weight"] = zeros(1)
    return state


def xcit_p8_state() -> dict[str, torch.Tensor]:
    """xcit_small_12_p8's backbone: the stem has three stages 3 -> 96 -> 192 -> 384."""
    state = {k: v for k, v in xcit_small_12_p16().state_dict().items() if not k.startswith("patch_embed.")}
    for n, (cin, cout) in enumerate([(3, 96), (96, 192), (192, 384)]):
        p = f"patch_embed.proj.{2 * n}."
        state[p + "0.weight"] = torch.zeros(cout, cin, 3, 3)
        for part in ("weight", "bias", "running_mean", "running_var"):
            state[p + "1." + part] = torch.zeros(cout)
    return state


def vit_state(width: int, patch: int, depth: int) -> dict[str, torch.Tensor]:
    state = {"patch_embed.proj.weight": zeros(width, 3, patch, patch), "patch_embed.proj.bias": zeros(width),
             "pos_embed": zeros(1, (224 // patch) ** 2, width)}
    for i in range(depth):
        p = f"blocks.{i}."
        for part, shape in (("norm1", (width,)), ("attn.qkv", (3 * width, width)), ("attn.proj", (width, width)),
                            ("norm2", (width,)), ("mlp.fc1", (4 * width, width)), ("mlp.fc2", (width, 4 * width))):
            state[p + part + ".weight"] = zeros(*shape)
            state[p + part + ".bias"] = zeros(shape[0])
    return state


REFUSALS = [
    ("cait_s24.pth", cait_s24_state, "found CaiT (attn.proj_l.*, attn.proj_w.*, blocks_token_only.*"),
    ("xcit_small_12_p8.pth", xcit_p8_state, "found XCiT with patch 8 (384 wide, a conv stem of 3 stages, 12 blocks)"),
    ("vit_small_patch32.pth", lambda: vit_state(384, 32, 12), "found ViT-S/32 (384 wide, 32 x 32 patches, 12 blocks)"),
    ("vit_s16_depth6.pth", lambda: vit_state(384, 16, 6), "found ViT-S/16 (384 wide, 16 x 16 patches, 6 blocks)"),
    ("vit_tiny.pth", lambda: vit_state(192, 16, 12), "found ViT-Ti/16 (192 wide, 16 x 16 patches, 12 blocks)"),
]


@pytest.mark.parametrize("name,build,found", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_unsupported_architecture_is_refused_naming_file_what_was_found_and_what_is_supported(tmp_path, name, build,
                                                                                              found):
    path = tmp_path / name
    torch.save(build(), path)
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {found}")
    assert SUPPORTED in message


def test_cait_in_deit_format_with_module_prefix_is_refused(tmp_path):
    path = tmp_path / "S24_224.pth"
    torch.save({"model": {f"module.{k}": v for k, v in cait_s24_state().items()}}, path)
    with pytest.raises(CheckpointError, match="found CaiT") as info:
        load_backbone(path, which="teacher", form="backbone")
    assert "24 blocks" in str(info.value) and str(path) in str(info.value)


# ----------------------------------------------------------------------------------------------------- untrusted files


class RunsAShell:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def lookalikes(payload) -> dict[str, dict]:
    """Files shaped like each new format, a payload in the place a loader would reach first."""
    return {
        "deit3": {"model": {"cls_token": payload, "blocks.0.gamma_1": torch.zeros(384)}},
        "xcit-released": {"cls_token": torch.zeros(1, 1, 384), "blocks.0.attn.temperature": payload},
        "xcit-dino-train": {"teacher": {"module.backbone.blocks.0.attn.temperature": payload}, "student": {},
                            "epoch": 1},
        "augvit-index": {"pos_embed": torch.zeros(1, 197, 384), "blocks.0.augs_attn.0.index_matrix": payload},
        "timm-layerscale": {"patch_embed.proj.weight": torch.zeros(1), "blocks.0.ls1.gamma": payload},
    }


@pytest.mark.parametrize("writer", ["torch.save", "raw pickle"])
@pytest.mark.parametrize("shape", list(lookalikes(None)))
def test_malicious_pickle_shaped_like_a_new_format_never_runs(tmp_path, shape, writer):
    marker = tmp_path / "payload-ran"
    path = tmp_path / f"{shape}.pth"
    state = lookalikes(RunsAShell(marker))[shape]
    if writer == "torch.save":
        torch.save(state, path)
    else:
        path.write_bytes(pickle.dumps(state, protocol=2))
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, which="teacher", form="backbone")
    message = str(info.value)
    assert message.startswith(str(path)) and "refused" in message and "was not run" in message
    if writer == "torch.save":  # a raw pickle of tensors is stopped earlier, at torch's own raw-storage global
        assert "system" in message
    assert not marker.exists()


def test_control_the_lookalike_payloads_do_run_under_an_unrestricted_loader(tmp_path):
    marker = tmp_path / "payload-ran"
    path = tmp_path / "deit3.pth"
    torch.save(lookalikes(RunsAShell(marker))["deit3"], path)
    torch.load(path, weights_only=False)  # what the loader must never do
    assert marker.exists()
