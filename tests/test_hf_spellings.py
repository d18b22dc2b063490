"""Hugging Face's spellings of the DINO family (DESIGN 17): `ViTModel`, `Dinov2Model`, `Dinov2WithRegistersModel` and
their task models, read from `model.safetensors` or `pytorch_model.bin` without config.json, load to exactly the
tensors of the authors' hub files, so their features are the hub files' byte for byte. (DINOv3's `DINOv3ViTModel`:
tests/test_dinov3.py.)

The hub files are written here by name and shape from DESIGN 11's table, and their transformers spellings from
DESIGN 17's table (`hf_vit`, `hf_dinov2`), independently of the product's converters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch

from evaluate.demo.checkpoints import make_demo_checkpoint
from evaluate.networks import hf_forms
from evaluate.networks.checkpoints import CheckpointError, convert_checkpoint, detect_format, load_backbone
from evaluate.pixels.images import keys480_input, tokens224_input

# name -> (D, patch, registers, DINOv2, table rows (1 + grid^2))
MEMBERS = {
    "vit-s16": (384, 16, 0, False, 197),
    "vit-b8": (768, 8, 0, False, 785),
    "dinov2-s14": (384, 14, 0, True, 1370),
    "dinov2-s14-reg4": (384, 14, 4, True, 1370),
    "dinov2-l14": (1024, 14, 0, True, 1370),
}
FORMS = ("backbone", "released")
LABELS = 10  # a task model's classes


def hub_state(name: str, depth: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    """A released (hub) file of family member `name` (DESIGN 11's names and shapes), a working float32 network."""
    width, patch, registers, dinov2, rows = MEMBERS[name]
    shapes: dict[str, tuple[int, ...]] = {"cls_token": (1, 1, width), "pos_embed": (1, rows, width)}
    if registers:
        shapes["register_tokens"] = (1, registers, width)
    if dinov2:
        shapes["mask_token"] = (1, width)
    shapes |= {"patch_embed.proj.weight": (width, 3, patch, patch), "patch_embed.proj.bias": (width,)}
    for i in range(depth):
        block = {"norm1.weight": (width,), "norm1.bias": (width,), "attn.qkv.weight": (3 * width, width),
                 "attn.qkv.bias": (3 * width,), "attn.proj.weight": (width, width), "attn.proj.bias": (width,),
                 "norm2.weight": (width,), "norm2.bias": (width,), "mlp.fc1.weight": (4 * width, width),
                 "mlp.fc1.bias": (4 * width,), "mlp.fc2.weight": (width, 4 * width), "mlp.fc2.bias": (width,)}
        if dinov2:
            block |= {"ls1.gamma": (width,), "ls2.gamma": (width,)}
        shapes |= {f"blocks.{i}.{key}": shape for key, shape in block.items()}
    shapes |= {"norm.weight": (width,), "norm.bias": (width,)}
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in shapes.items():
        noise = torch.randn(shape, generator=gen)
        if key.endswith(("norm1.weight", "norm2.weight")) or key == "norm.weight":
            state[key] = 1 + 0.2 * noise
        elif key.endswith(".gamma"):
            state[key] = 0.5 + 0.1 * noise
        elif key.endswith(".weight"):
            state[key] = noise / math.sqrt(math.prod(shape[1:]))
        elif key.endswith(".bias"):
            state[key] = 0.1 * noise
        else:
            state[key] = 0.5 * noise
    return state


def _layers(hub: Mapping[str, torch.Tensor]) -> int:
    return 1 + max(int(key.split(".")[1]) for key in hub if key.startswith("blocks."))


def _qkv(hub: Mapping[str, torch.Tensor], i: int, layer: str) -> dict[str, torch.Tensor]:
    """DESIGN 17: `attention.attention.{query, key, value}` are the [0, D), [D, 2D), [2D, 3D) slices of qkv."""
    weight, bias = hub[f"blocks.{i}.attn.qkv.weight"], hub[f"blocks.{i}.attn.qkv.bias"]
    width = weight.shape[1]
    out = {}
    for n, part in enumerate(("query", "key", "value")):
        out[f"{layer}attention.attention.{part}.weight"] = weight[n * width : (n + 1) * width].clone()
        out[f"{layer}attention.attention.{part}.bias"] = bias[n * width : (n + 1) * width].clone()
    return out


def hf_vit(hub: Mapping[str, torch.Tensor], *, pooler: bool = False, task: bool = False) -> dict[str, torch.Tensor]:
    """`ViTModel`'s names (DESIGN 17), with its pooling layer on request, or `ViTForImageClassification`'s (`vit.`
    prefix and a classifier (labels, D))."""
    width = hub["cls_token"].shape[-1]
    out = {"embeddings.cls_token": hub["cls_token"], "embeddings.position_embeddings": hub["pos_embed"],
           "embeddings.patch_embeddings.projection.weight": hub["patch_embed.proj.weight"],
           "embeddings.patch_embeddings.projection.bias": hub["patch_embed.proj.bias"]}
    names = {"norm1": "layernorm_before", "attn.proj": "attention.output.dense", "norm2": "layernorm_after",
             "mlp.fc1": "intermediate.dense", "mlp.fc2": "output.dense"}
    for i in range(_layers(hub)):
        layer = f"encoder.layer.{i}."
        out |= _qkv(hub, i, layer)
        for ours, theirs in names.items():
            for kind in ("weight", "bias"):
                out[f"{layer}{theirs}.{kind}"] = hub[f"blocks.{i}.{ours}.{kind}"]
    out |= {"layernorm.weight": hub["norm.weight"], "layernorm.bias": hub["norm.bias"]}
    if pooler:
        out |= {"pooler.dense.weight": torch.eye(width), "pooler.dense.bias": torch.zeros(width)}
    if task:
        out = {f"vit.{key}": value for key, value in out.items()}
        out |= {"classifier.weight": torch.ones(LABELS, width), "classifier.bias": torch.zeros(LABELS)}
    return out


def hf_dinov2(hub: Mapping[str, torch.Tensor], *, task: bool = False) -> dict[str, torch.Tensor]:
    """`Dinov2Model`'s / `Dinov2WithRegistersModel`'s names (DESIGN 17), or their classification models' (`dinov2.` /
    `dinov2_with_registers.` prefix and a classifier (labels, 2 D))."""
    width = hub["cls_token"].shape[-1]
    out = {"embeddings.cls_token": hub["cls_token"], "embeddings.mask_token": hub["mask_token"],
           "embeddings.position_embeddings": hub["pos_embed"],
           "embeddings.patch_embeddings.projection.weight": hub["patch_embed.proj.weight"],
           "embeddings.patch_embeddings.projection.bias": hub["patch_embed.proj.bias"]}
    if "register_tokens" in hub:
        out["embeddings.register_tokens"] = hub["register_tokens"]
    names = {"norm1.weight": "norm1.weight", "norm1.bias": "norm1.bias",
             "attn.proj.weight": "attention.output.dense.weight", "attn.proj.bias": "attention.output.dense.bias",
             "ls1.gamma": "layer_scale1.lambda1",
             "norm2.weight": "norm2.weight", "norm2.bias": "norm2.bias", "mlp.fc1.weight": "mlp.fc1.weight",
             "mlp.fc1.bias": "mlp.fc1.bias", "mlp.fc2.weight": "mlp.fc2.weight", "mlp.fc2.bias": "mlp.fc2.bias",
             "ls2.gamma": "layer_scale2.lambda1"}
    for i in range(_layers(hub)):
        layer = f"encoder.layer.{i}."
        out |= _qkv(hub, i, layer)
        out |= {layer + theirs: hub[f"blocks.{i}.{ours}"] for ours, theirs in names.items()}
    out |= {"layernorm.weight": hub["norm.weight"], "layernorm.bias": hub["norm.bias"]}
    if task:
        prefix = "dinov2_with_registers." if "register_tokens" in hub else "dinov2."
        out = {prefix + key: value for key, value in out.items()}
        out |= {"classifier.weight": torch.ones(LABELS, 2 * width), "classifier.bias": torch.zeros(LABELS)}
    return out


# (member, class, its file, the keys the format drops)
CASES = [
    ("vit-s16", "ViTModel", lambda hub: hf_vit(hub), set()),
    ("vit-s16", "ViTModel", lambda hub: hf_vit(hub, pooler=True), {"pooler.dense.weight", "pooler.dense.bias"}),
    ("vit-s16", "ViTForImageClassification", lambda hub: hf_vit(hub, task=True),
     {"classifier.weight", "classifier.bias"}),
    ("vit-b8", "ViTModel", lambda hub: hf_vit(hub), set()),
    ("dinov2-s14", "Dinov2Model", lambda hub: hf_dinov2(hub), set()),
    ("dinov2-s14", "Dinov2ForImageClassification", lambda hub: hf_dinov2(hub, task=True),
     {"classifier.weight", "classifier.bias"}),
    ("dinov2-s14-reg4", "Dinov2WithRegistersModel", lambda hub: hf_dinov2(hub), set()),
    ("dinov2-s14-reg4", "Dinov2WithRegistersForImageClassification", lambda hub: hf_dinov2(hub, task=True),
     {"classifier.weight", "classifier.bias"}),
    ("dinov2-l14", "Dinov2Model", lambda hub: hf_dinov2(hub), set()),
]


@pytest.mark.parametrize("name, hf_class, spell, heads", CASES, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_each_hugging_face_class_converts_to_its_hub_files_tensors(name, hf_class, spell, heads):
    hub = hub_state(name, depth=2)  # the depth is checked when a network is built, not here
    top = spell(hub)
    assert detect_format(top) == "hf" and hf_forms.model_class(top) == hf_class
    for form in FORMS:
        want, hub_dropped = convert_checkpoint(hub, detect_format(hub), "teacher", form)
        got, dropped = convert_checkpoint(top, "hf", "teacher", form)
        assert sorted(got) == sorted(want), sorted(set(got) ^ set(want))
        for key, value in want.items():
            assert torch.equal(got[key], value), (form, key)
        assert set(dropped) == set(hub_dropped) | heads


def write(top: Mapping[str, Any], path: Path) -> Path:
    if path.suffix == ".safetensors":
        safetensors.torch.save_file({k: v.contiguous() for k, v in top.items()}, str(path))
    else:
        torch.save(dict(top), path)
    return path


@pytest.mark.parametrize("name, spell, file_name, rule, forms", [
    ("vit-s16", hf_vit, "model.safetensors", "dino", FORMS),
    ("dinov2-s14-reg4", hf_dinov2, "model.safetensors", "antialias", FORMS),
    ("dinov2-s14-reg4", lambda hub: hf_dinov2(hub, task=True), "pytorch_model.bin", "antialias", ("released",)),
], ids=["dino-vits16", "dinov2-with-registers-small", "dinov2-with-registers-small-imagenet1k-1-layer"])
def test_a_hugging_face_file_gives_its_hub_files_features_byte_for_byte(tmp_path, two_photos, name, spell, file_name,
                                                                         rule, forms):
    hub = hub_state(name, seed=3)
    side = 16 * 30 if MEMBERS[name][1] == 16 else 14 * 34  # keys480's side: 480, or 476 for patch 14
    x480 = keys480_input(two_photos[0], side)[None]  # one photo at 480 px (seconds per image on two cores), two at 224
    x224 = torch.stack([tokens224_input(img) for img in two_photos])
    paths = {"hub": write(hub, tmp_path / "hub.pth"), "hf": write(spell(hub), tmp_path / file_name)}
    for form in forms:
        features = {}
        for label, path in paths.items():
            loaded = load_backbone(path, "teacher", form)
            assert (loaded.architecture, loaded.position_rule) == (name, rule)  # the network's rule (DESIGN 17)
            with torch.no_grad():
                features[label] = (loaded.model.last_keys(x480), loaded.model.tokens(x224))
        for hub_reading, hf_reading in zip(features["hub"], features["hf"], strict=True):
            assert torch.equal(hub_reading, hf_reading), form


def test_meta_records_the_class_its_prefix_and_the_dropped_keys(tmp_path):
    hub = hub_state("dinov2-s14-reg4", seed=4)
    loaded = load_backbone(write(hf_dinov2(hub, task=True), tmp_path / "model.safetensors"), "teacher", "backbone")
    meta = loaded.file_meta()
    assert {k: meta[k] for k in ("checkpoint_format", "spelling", "hf_class", "hf_prefix", "hf_dropped")} == {
        "checkpoint_format": "hf", "spelling": "hf", "hf_class": "Dinov2WithRegistersForImageClassification",
        "hf_prefix": "dinov2_with_registers.", "hf_dropped": ["classifier.bias", "classifier.weight"]}
    assert "spelling" not in load_backbone(write(hub, tmp_path / "hub.pth"), "teacher", "backbone").file_meta()


@pytest.mark.parametrize("architecture, hf_class", [("dinov2-s14-reg4", "Dinov2WithRegistersModel")])  # ViT-S/16:
def test_the_demo_writes_the_familys_networks_in_hugging_faces_spelling(tmp_path, architecture, hf_class):  # checkpoints
    hub = make_demo_checkpoint(tmp_path / "hub.pth", "dino-backbone", seed=8, architecture=architecture)
    hf = make_demo_checkpoint(tmp_path / "model.safetensors", "hf", seed=8, architecture=architecture)
    assert hf_forms.model_class(safetensors.torch.load_file(str(hf))) == hf_class
    want = load_backbone(hub, "teacher", "released").model.state_dict()
    got = load_backbone(hf, "teacher", "released").model.state_dict()
    assert sorted(got) == sorted(want) and all(torch.equal(got[key], want[key]) for key in want)


# ----------------------------------------------------------------------------------------------------- refusals


def refusal(path: Path) -> str:
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, "teacher", "backbone")
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    return message


def test_the_dinov2_giant_in_hugging_faces_names_is_refused_by_name(tmp_path):
    z = torch.zeros(1)
    top = {"embeddings.cls_token": z, "embeddings.mask_token": z, "embeddings.position_embeddings": z,
           "embeddings.patch_embeddings.projection.weight": torch.zeros(1536, 3, 14, 14)}
    for i in range(40):
        layer = f"encoder.layer.{i}."
        top |= {layer + key: z for key in ("norm1.weight", "layer_scale1.lambda1", "layer_scale2.lambda1",
                                           "mlp.weights_in.weight", "mlp.weights_out.weight")}
    message = refusal(write(top, tmp_path / "pytorch_model.bin"))
    assert "found the DINOv2 giant" in message and "SwiGLU" in message and "40 blocks, 1536 wide" in message


def test_a_prefix_on_only_some_keys_is_not_stripped(tmp_path):
    top = hf_vit(hub_state("vit-s16", depth=1), task=True)
    top["layernorm.weight"] = top.pop("vit.layernorm.weight")  # one backbone key without the prefix
    message = refusal(write(top, tmp_path / "model.safetensors"))
    assert "not a recognised checkpoint format" in message


def test_a_missing_key_projection_is_named(tmp_path):
    top = hf_vit(hub_state("vit-s16"))
    del top["encoder.layer.3.attention.attention.key.weight"]
    message = refusal(write(top, tmp_path / "model.safetensors"))
    assert "encoder.layer.3.attention.attention: the k projection's weight is missing" in message
