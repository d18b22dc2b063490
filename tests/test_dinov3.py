"""DINOv3's ViTs (docs/design.md §14, DESIGN 14): S/16, S+/16, B/16, L/16 and H+/16 in their four spellings, both
forms, rotary positions, the masked key bias, and the files refused by name.

Every expected value is written here from DESIGN 14's text: the hub file by name and shape (`hub_state`), the other
spellings derived from it in the test (`teacher`, `timm`, `hf`), and the network's forward as the text describes it
(`reference_forward`, float64). S and S+ run at real size; B, L and H+ at real width with 2 blocks (the depth is read
from the file).
"""

from __future__ import annotations

import math
import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
import torch.nn.functional as F
from PIL import Image

from evaluate.demo.checkpoints import demo_network, make_demo_checkpoint
from evaluate.networks import ArchitectureError, hf_forms
from evaluate.networks.checkpoints import CheckpointError, convert_checkpoint, detect_format, load_backbone
from evaluate.networks.dinov3 import RotaryPositions, rotary_angles, rotate
from evaluate.networks.registry import DINOV3, REGISTRY, full_form
from evaluate.pixels.images import normalise

# DESIGN 14's table: name -> (D, FFN, hidden, depth of the release, parameters of the module, of the backbone form)
MEMBERS = {
    "dinov3-s16": (384, "mlp", 1536, 12, 21_601_152, 21_598_080),
    "dinov3-s16plus": (384, "swiglu", 1536, 12, 28_697_472, 28_694_400),
    "dinov3-b16": (768, "mlp", 3072, 12, 85_669_632, 85_663_488),
    "dinov3-l16": (1024, "mlp", 4096, 24, 303_154_176, 303_145_984),
    "dinov3-h16plus": (1280, "swiglu", 5120, 32, 840_633_600, 840_623_360),
}
SMALL = ("dinov3-s16", "dinov3-s16plus")
FORMS = ("backbone", "released")
STORAGE = 4


def hand_periods() -> torch.Tensor:
    """DESIGN 14: p_k = 100^(2k / (d / 2)) = 100^(k / 16), k = 0..15, float32."""
    return 100.0 ** (torch.arange(16, dtype=torch.float32) / 16)


# ----------------------------------------------------------------------------------------------------- the files


def hub_shapes(width: int, ffn: str, hidden: int, depth: int) -> dict[str, tuple[int, ...]]:
    """The hub release's names and shapes (DESIGN 14), in its order."""
    shapes: dict[str, tuple[int, ...]] = {
        "cls_token": (1, 1, width), "storage_tokens": (1, STORAGE, width), "mask_token": (1, width),
        "patch_embed.proj.weight": (width, 3, 16, 16), "patch_embed.proj.bias": (width,), "rope_embed.periods": (16,),
    }
    ffn_shapes = ({"mlp.fc1.weight": (hidden, width), "mlp.fc1.bias": (hidden,), "mlp.fc2.weight": (width, hidden),
                   "mlp.fc2.bias": (width,)} if ffn == "mlp" else
                  {"mlp.w1.weight": (hidden, width), "mlp.w1.bias": (hidden,), "mlp.w2.weight": (hidden, width),
                   "mlp.w2.bias": (hidden,), "mlp.w3.weight": (width, hidden), "mlp.w3.bias": (width,)})
    for i in range(depth):
        block = {"norm1.weight": (width,), "norm1.bias": (width,), "attn.qkv.weight": (3 * width, width),
                 "attn.qkv.bias": (3 * width,), "attn.qkv.bias_mask": (3 * width,), "attn.proj.weight": (width, width),
                 "attn.proj.bias": (width,), "ls1.gamma": (width,), "norm2.weight": (width,), "norm2.bias": (width,),
                 **ffn_shapes, "ls2.gamma": (width,)}
        shapes |= {f"blocks.{i}.{key}": shape for key, shape in block.items()}
    return shapes | {"norm.weight": (width,), "norm.bias": (width,)}


def key_mask(width: int) -> torch.Tensor:
    """`bias_mask`: 1 on the query and value thirds, 0 on the key third [D, 2D)."""
    mask = torch.ones(3 * width)
    mask[width : 2 * width] = 0
    return mask


def hub_state(name: str, *, depth: int | None = None, seed: int = 0, dtype: torch.dtype = torch.float32
              ) -> dict[str, torch.Tensor]:
    """A hub file of member `name` holding a working network (unit-variance linears, LayerNorm gains near 1,
    LayerScale near 0.5, a key bias the mask cancels), the formula's periods and the key mask; `dtype` for the
    weights (the mask and periods stay float32)."""
    width, ffn, hidden, release_depth, _, _ = MEMBERS[name]
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in hub_shapes(width, ffn, hidden, release_depth if depth is None else depth).items():
        if key == "rope_embed.periods":
            state[key] = hand_periods()
            continue
        if key.endswith("bias_mask"):
            state[key] = key_mask(width)
            continue
        noise = torch.randn(shape, generator=gen)
        if key.endswith(("norm1.weight", "norm2.weight")) or key == "norm.weight":
            value = 1 + 0.2 * noise
        elif key.endswith(".gamma"):
            value = 0.5 + 0.1 * noise
        elif key == "patch_embed.proj.weight":  # small patch tokens: block 1's LayerNorms see their eps
            value = 0.03 * noise / math.sqrt(math.prod(shape[1:]))
        elif key.endswith(".weight"):  # linears: unit-variance outputs
            value = noise / math.sqrt(math.prod(shape[1:]))
        elif key.endswith(".bias"):
            value = 0.1 * noise
        elif key == "mask_token":
            value = torch.zeros(shape)
        else:  # class and storage tokens, as small as the patch tokens
            value = 0.03 * noise
        state[key] = value.to(dtype)
    return state


def teacher(hub: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """`train.py`'s `teacher_checkpoint.pth`: `{"teacher": {backbone.* (hub names), dino_head.*, ibot_head.*}}`."""
    heads = {f"{head}mlp.0.weight": torch.ones(16, 4) for head in ("dino_head.", "ibot_head.")}
    return {"teacher": {f"backbone.{key}": value for key, value in hub.items()} | heads}


def timm(hub: Mapping[str, torch.Tensor], qkv_bias: bool = True) -> dict[str, torch.Tensor]:
    """timm 1.0.31's spelling: `reg_token`, `gamma_1/2`, `attn.q_bias` / `attn.v_bias` (`_qkvb` models; none in the
    others), SwiGLU `mlp.fc1_g` (w1), `fc1_x` (w2), `fc2` (w3); no periods, `mask_token`, `bias_mask`."""
    out = {}
    swiglu = {"mlp.w1.": "mlp.fc1_g.", "mlp.w2.": "mlp.fc1_x.", "mlp.w3.": "mlp.fc2."}
    for key, value in hub.items():
        if key in ("mask_token", "rope_embed.periods") or key.endswith("bias_mask"):
            continue
        if key == "storage_tokens":
            key = "reg_token"
        if key.endswith("attn.qkv.bias"):
            if qkv_bias:
                width = value.shape[0] // 3
                out[key.replace("qkv.bias", "q_bias")] = value[:width].clone()
                out[key.replace("qkv.bias", "v_bias")] = value[2 * width :].clone()
            continue
        key = key.replace("ls1.gamma", "gamma_1").replace("ls2.gamma", "gamma_2")
        for ours, theirs in swiglu.items():
            key = key.replace(ours, theirs)
        out[key] = value
    return out


def hf(hub: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Hugging Face's `DINOv3ViTModel` (DESIGN 14, 17): `embeddings.*`, `layer.{i}.attention.{q,k,v,o}_proj` (no
    `k_proj.bias`), `layer_scale{1,2}.lambda1`, MLP `up_proj` (fc1) / `down_proj` (fc2), SwiGLU `gate_proj` (w1),
    `up_proj` (w2), `down_proj` (w3), `norm`."""
    width = hub["cls_token"].shape[-1]
    out = {"embeddings.cls_token": hub["cls_token"], "embeddings.mask_token": hub["mask_token"].reshape(1, 1, width),
           "embeddings.register_tokens": hub["storage_tokens"],
           "embeddings.patch_embeddings.weight": hub["patch_embed.proj.weight"],
           "embeddings.patch_embeddings.bias": hub["patch_embed.proj.bias"]}
    depth = 1 + max(int(key.split(".")[1]) for key in hub if key.startswith("blocks."))
    for i in range(depth):
        b, layer = f"blocks.{i}.", f"layer.{i}."
        weight, bias = hub[b + "attn.qkv.weight"], hub[b + "attn.qkv.bias"]
        out |= {layer + "norm1.weight": hub[b + "norm1.weight"], layer + "norm1.bias": hub[b + "norm1.bias"],
                layer + "attention.q_proj.weight": weight[:width].clone(),
                layer + "attention.k_proj.weight": weight[width : 2 * width].clone(),
                layer + "attention.v_proj.weight": weight[2 * width :].clone(),
                layer + "attention.q_proj.bias": bias[:width].clone(),
                layer + "attention.v_proj.bias": bias[2 * width :].clone(),
                layer + "attention.o_proj.weight": hub[b + "attn.proj.weight"],
                layer + "attention.o_proj.bias": hub[b + "attn.proj.bias"],
                layer + "layer_scale1.lambda1": hub[b + "ls1.gamma"],
                layer + "norm2.weight": hub[b + "norm2.weight"], layer + "norm2.bias": hub[b + "norm2.bias"],
                layer + "layer_scale2.lambda1": hub[b + "ls2.gamma"]}
        names = ({"fc1": "up_proj", "fc2": "down_proj"} if b + "mlp.fc1.weight" in hub else
                 {"w1": "gate_proj", "w2": "up_proj", "w3": "down_proj"})
        for ours, theirs in names.items():
            for kind in ("weight", "bias"):
                out[f"{layer}mlp.{theirs}.{kind}"] = hub[f"{b}mlp.{ours}.{kind}"]
    return out | {"norm.weight": hub["norm.weight"], "norm.bias": hub["norm.bias"]}


def spellings(hub: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    return {"hub": dict(hub), "teacher": teacher(hub), "timm": timm(hub), "hf": hf(hub)}


FILE_FORMAT = {"hub": "dino-backbone", "teacher": "dinov2-train", "timm": "dino-backbone", "hf": "hf"}


def expected_form(hub: Mapping[str, torch.Tensor], form: str, periods: bool = True) -> dict[str, torch.Tensor]:
    """DESIGN 14: the released form is the hub file less the unused mask token, its bias_mask applied to the qkv bias
    (b * m: no key bias); the backbone form also less the class token, the storage tokens and the final norm. The
    periods stay where the file has them."""
    out = {key: value for key, value in hub.items() if key != "mask_token" and not key.endswith("bias_mask")}
    for key in [k for k in out if k.endswith("attn.qkv.bias")]:
        out[key] = hub[key].float() * hub[key + "_mask"]
    if not periods:
        del out["rope_embed.periods"]
    if form == "backbone":
        out = {k: v for k, v in out.items() if k not in ("cls_token", "storage_tokens", "norm.weight", "norm.bias")}
    return out


def assert_same_tensors(got: Mapping[str, torch.Tensor], want: Mapping[str, torch.Tensor], label: str) -> None:
    """Key by key, bit for bit (as float32)."""
    assert sorted(got) == sorted(want), f"{label}: keys differ: {sorted(set(got) ^ set(want))}"
    for key, value in want.items():
        assert got[key].shape == value.shape, f"{label}: {key} {tuple(got[key].shape)} != {tuple(value.shape)}"
        assert torch.equal(got[key].float(), value.float()), f"{label}: {key} differs"


def write(top: Mapping[str, Any], path: Path) -> Path:
    if path.suffix == ".safetensors":
        safetensors.torch.save_file({k: v.contiguous() for k, v in top.items()}, str(path))
    else:
        torch.save(dict(top), path)
    return path


# ----------------------------------------------------------------------------------------------------- 1. the registry


def parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", MEMBERS)
def test_each_member_has_the_tables_parameters_in_both_forms(name):
    width, _, _, depth, module, backbone = MEMBERS[name]
    arch = REGISTRY[name]
    with torch.device("meta"):
        released = arch.build("hub", class_token=True, registers=STORAGE, final_norm=True)
        bare = arch.build("hub")
    assert parameters(released) + width == module  # their module also holds the unused mask token (1, D)
    assert parameters(bare) == backbone
    g = released.geometry
    assert (g.patch, g.width, g.depth, g.registers, g.heads) == (16, width, depth, STORAGE, width // 64)
    assert set(DINOV3) == set(MEMBERS)


# ----------------------------------------------------------------------------------------------------- 2. spellings


def check_spellings(name: str, depth: int | None, dtype: torch.dtype) -> None:
    hub = hub_state(name, depth=depth, dtype=dtype)
    mask_keys = {k for k in hub if k.endswith("bias_mask")}
    for form in FORMS:
        left_out = {"mask_token"} | mask_keys
        if form == "backbone":
            left_out |= {"cls_token", "storage_tokens", "norm.weight", "norm.bias"}
        for label, top in spellings(hub).items():
            assert detect_format(top) == FILE_FORMAT[label], label
            got, dropped = convert_checkpoint(top, detect_format(top), "teacher", form)
            assert_same_tensors(got, expected_form(hub, form, periods=label in ("hub", "teacher")),
                                f"{name} {label} {form}")
            if label == "hub":  # exactly the mask token and key masks, and what the form leaves out
                assert set(dropped) == left_out, sorted(set(dropped) ^ left_out)


@pytest.mark.parametrize("name", SMALL)
def test_every_spelling_of_s_and_s_plus_converts_to_the_hub_files_tensors(name):
    check_spellings(name, None, torch.float32)


@pytest.mark.parametrize("name", ["dinov3-b16", "dinov3-l16", "dinov3-h16plus"])
def test_every_spelling_of_b_l_and_h_plus_converts_to_the_hub_files_tensors_at_real_width(name):
    check_spellings(name, 2, torch.float16)


def test_a_timm_file_without_qkv_bias_gets_a_zero_bias():
    hub = hub_state("dinov3-s16", depth=1)
    got, _ = convert_checkpoint(timm(hub, qkv_bias=False), "dino-backbone", "teacher", "released")
    assert torch.equal(got["blocks.0.attn.qkv.bias"], torch.zeros(3 * 384))
    assert torch.equal(got["blocks.0.attn.qkv.weight"], hub["blocks.0.attn.qkv.weight"])


@pytest.mark.parametrize("name", SMALL)
def test_every_file_of_s_and_s_plus_loads_with_its_spelling_recorded(tmp_path, name):
    hub = hub_state(name, depth=2, seed=3)
    files = {"hub": ("hub", write(hub, tmp_path / "hub.pth")),
             "teacher": ("teacher", write(teacher(hub), tmp_path / "teacher_checkpoint.pth")),
             "timm": ("timm", write(timm(hub), tmp_path / "timm.safetensors")),
             "hf": ("hf", write(hf(hub), tmp_path / "model.safetensors")),
             "hf-bin": ("hf", write(hf(hub), tmp_path / "pytorch_model.bin"))}
    ffn = MEMBERS[name][1]
    for label, (spelling, path) in files.items():
        for form in FORMS:
            loaded = load_backbone(path, "teacher", form)
            assert (loaded.architecture, loaded.form, loaded.position_rule) == (name, form, "rope")
            state = loaded.model.state_dict()
            from_file = spelling in ("hub", "teacher")
            assert_same_tensors(state, expected_form(hub, form, periods=from_file), f"{label} {form}")
            assert torch.equal(loaded.model.rope_embed.periods, hand_periods())  # the formula's equal the file's
            meta = loaded.file_meta()
            assert {k: meta[k] for k in ("spelling", "ffn", "storage_tokens", "registers", "rope_periods", "heads",
                                         "depth", "patch", "width", "checkpoint_format", "form")} == {
                "spelling": spelling, "ffn": ffn, "storage_tokens": STORAGE, "registers": STORAGE,
                "rope_periods": "file" if from_file else "formula", "heads": 6, "depth": 2, "patch": 16,
                "width": 384, "checkpoint_format": FILE_FORMAT[spelling], "form": form}


def test_the_sat_493m_releases_unused_norm_is_dropped_and_its_normalisation_noted(tmp_path):
    hub = hub_state("dinov3-s16", depth=1, seed=5)  # the SAT-493M ViT-L's extra keys, on a small network
    sat = hub | {"local_cls_norm.weight": torch.ones(384), "local_cls_norm.bias": torch.zeros(384)}
    loaded = load_backbone(write(sat, tmp_path / "dinov3_vitl16_pretrain_sat493m.pth"), "teacher", "released")
    assert {"local_cls_norm.weight", "local_cls_norm.bias"} <= set(loaded.dropped)
    assert_same_tensors(loaded.model.state_dict(), expected_form(hub, "released"), "sat")
    meta = loaded.file_meta()
    assert meta["normalisation"] == "imagenet"
    assert meta["release_normalisation_not_used"] == "SAT-493M: mean (0.430, 0.411, 0.296), std (0.213, 0.156, 0.143)"


def test_a_files_own_periods_are_used_and_recorded(tmp_path):
    hub = hub_state("dinov3-s16", depth=1, seed=4)
    own = dict(hub, **{"rope_embed.periods": hand_periods() * 1.25})
    x = torch.randn(1, 3, 64, 96, generator=torch.Generator().manual_seed(0))
    tokens = {}
    for label, state in (("formula", hub), ("own", own)):
        loaded = load_backbone(write(state, tmp_path / f"{label}.pth"), "teacher", "released")
        assert torch.equal(loaded.model.rope_embed.periods, state["rope_embed.periods"])
        with torch.no_grad():
            tokens[label] = loaded.model.tokens(x)
    assert (tokens["own"] - tokens["formula"]).abs().max() > 1e-3


# ----------------------------------------------------------------------------------------------------- 3. forwards


def layer_norm(x: torch.Tensor, state: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    """DESIGN 14: every LayerNorm has eps 1e-5."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * state[name + ".weight"] + state[name + ".bias"]


def hand_rotation(grid: tuple[int, int], periods: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """DESIGN 14's angles, patch by patch: y_i = 2 (i + 0.5) / gh - 1, x_j = 2 (j + 0.5) / gw - 1, numerators 2 pi y
    and 2 pi x in float32, theta = [2 pi y / p_0..15, 2 pi x / p_0..15] twice. Returns (sin, cos), (gh gw, 64)."""
    gh, gw = grid
    rows = []
    for i in range(gh):
        for j in range(gw):
            y = torch.tensor(2 * (i + 0.5) / gh - 1, dtype=torch.float32)
            x = torch.tensor(2 * (j + 0.5) / gw - 1, dtype=torch.float32)
            half = torch.cat([2 * math.pi * y / periods, 2 * math.pi * x / periods])
            rows.append(torch.cat([half, half]))
    theta = torch.stack(rows).to(dtype)
    return torch.sin(theta), torch.cos(theta)


def rope(v: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor, prefix: int) -> torch.Tensor:
    """R(v) = v cos theta + [-v_32..63, v_0..31] sin theta on the rows from `prefix` on."""
    p = v[..., prefix:, :]
    rotated = p * cos + torch.cat([-p[..., 32:], p[..., :32]], dim=-1) * sin
    return torch.cat([v[..., :prefix, :], rotated], dim=-2)


def reference_forward(hub: Mapping[str, torch.Tensor], x: torch.Tensor, form: str) -> tuple[torch.Tensor, ...]:
    """DINOv3's network as DESIGN 14 writes it, in float64 from the hub state dict: the 16 / 16 convolution, row by
    row; released: class token and storage tokens in front, nothing added; per block qkv = W h + b * bias_mask,
    RoPE on the patch rows of q and k, softmax(R(q) R(k) / 8) v, x += g1 * proj; x += g2 * ffn(LN2 x) (MLP with exact
    GELU, or w3(silu(w1 h) * w2 h)). Returns (keys: the last block's key third BEFORE RoPE, tokens: the output, final
    norm in the released form), patch rows only."""
    hub = {key: value.double() for key, value in hub.items()}
    x = x.double()
    width = hub["patch_embed.proj.weight"].shape[0]
    heads = width // 64
    depth = 1 + max(int(key.split(".")[1]) for key in hub if key.startswith("blocks."))
    z = F.conv2d(x, hub["patch_embed.proj.weight"], hub["patch_embed.proj.bias"], stride=16)
    b, _, gh, gw = z.shape
    z = z.flatten(2).transpose(1, 2)
    prefix = 0
    if form == "released":
        z = torch.cat([hub["cls_token"].expand(b, -1, -1), hub["storage_tokens"].expand(b, -1, -1), z], dim=1)
        prefix = 1 + STORAGE
    sin, cos = hand_rotation((gh, gw), hub["rope_embed.periods"].float(), torch.float64)
    n = z.shape[1]
    for i in range(depth):
        p = f"blocks.{i}."
        h = layer_norm(z, hub, p + "norm1")
        qkv = h @ hub[p + "attn.qkv.weight"].T + hub[p + "attn.qkv.bias"] * hub[p + "attn.qkv.bias_mask"]
        keys = qkv[:, prefix:, width : 2 * width]
        q, k, v = qkv.reshape(b, n, 3, heads, 64).permute(2, 0, 3, 1, 4)
        q, k = rope(q, sin, cos, prefix), rope(k, sin, cos, prefix)
        attended = torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1) @ v
        z = z + hub[p + "ls1.gamma"] * (attended.transpose(1, 2).reshape(b, n, width) @ hub[p + "attn.proj.weight"].T
                                        + hub[p + "attn.proj.bias"])
        h = layer_norm(z, hub, p + "norm2")
        if p + "mlp.fc1.weight" in hub:
            ffn = F.gelu(h @ hub[p + "mlp.fc1.weight"].T + hub[p + "mlp.fc1.bias"])
            ffn = ffn @ hub[p + "mlp.fc2.weight"].T + hub[p + "mlp.fc2.bias"]
        else:
            gate = F.silu(h @ hub[p + "mlp.w1.weight"].T + hub[p + "mlp.w1.bias"])
            ffn = (gate * (h @ hub[p + "mlp.w2.weight"].T + hub[p + "mlp.w2.bias"])) @ hub[p + "mlp.w3.weight"].T
            ffn = ffn + hub[p + "mlp.w3.bias"]
        z = z + hub[p + "ls2.gamma"] * ffn
    if form == "released":
        z = layer_norm(z, hub, "norm")
    return keys, z[:, prefix:]


def relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.double() - want).abs().max() / want.abs().max()).item()


@pytest.fixture(scope="module")
def networks(tmp_path_factory):
    """network(name, form) -> (hub state dict, loaded model): an S or S+ hub file of a working float32 network
    (real size, 12 blocks), loaded in `form`; each written and loaded once."""
    root = tmp_path_factory.mktemp("dinov3_networks")
    hubs: dict[str, tuple[dict[str, torch.Tensor], Path]] = {}
    loaded = {}

    def network(name: str, form: str):
        if name not in hubs:
            hub = hub_state(name, seed=10 + SMALL.index(name))
            for key in [k for k in hub if k.endswith("attn.qkv.bias")]:  # a key bias the mask must cancel
                hub[key] = hub[key] + 5 * (1 - hub[key + "_mask"])
            hubs[name] = (hub, write(hub, root / f"{name}.pth"))
        if (name, form) not in loaded:
            loaded[name, form] = load_backbone(hubs[name][1], "teacher", form).model
        return hubs[name][0], loaded[name, form]

    return network


# (height, width) in patches: tokens224's grid (square), two non-square ones, keys480's grid (square, slow: the float64
# reference takes seconds per image there)
GRIDS = {"tokens224": (14, 14), "portrait": (10, 6), "landscape": (6, 11), "keys480": (30, 30)}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name, grid", [
    ("dinov3-s16", "tokens224"), ("dinov3-s16", "landscape"), ("dinov3-s16plus", "tokens224"),
    ("dinov3-s16plus", "portrait"), pytest.param("dinov3-s16", "keys480", marks=pytest.mark.slow),
])
def test_keys_and_tokens_equal_designs_forward_on_real_photos(networks, two_photos, name, grid, form):
    hub, model = networks(name, form)
    gh, gw = GRIDS[grid]
    x = torch.stack([normalise(img.resize((16 * gw, 16 * gh), Image.BICUBIC)) for img in two_photos])
    with torch.no_grad():
        got = {"keys": model.last_keys(x), "tokens": model.tokens(x)}
    want = dict(zip(("keys", "tokens"), reference_forward(hub, x, form), strict=True))
    for reading in got:
        assert got[reading].shape == want[reading].shape == (2, gh * gw, 384)
        assert relative(got[reading], want[reading]) <= 1e-5, (reading, relative(got[reading], want[reading]))


# ----------------------------------------------------------------------------------------------------- 4. rotation

COS18, SIN18 = 0.9510565162951535, 0.3090169943749474  # 2 pi 0.5 / 10 = pi / 10
COS24, SIN24 = 0.9135454576426009, 0.4067366430758002  # 2 pi (2/3) / 10 = 2 pi / 15
S3 = 0.8660254037844386
# the 2 x 3 grid, row by row: y = -1/2, +1/2; x = -2/3, 0, 2/3. For v = e_0 + e_8 + e_16 + e_24, R(v) keeps
# [cos of y / p_0, y / p_8, x / p_0, x / p_8] on channels 0, 8, 16, 24 and puts the sines on 32, 40, 48, 56
# (p_0 = 1, p_8 = 100^(8/16) = 10): by hand
HAND_2X3 = [
    # ch 0, 8,     16,    24,    32, 40,     48,   56
    [-1, COS18, -0.5, COS24, 0, -SIN18, S3, -SIN24],
    [-1, COS18, 1.0, 1.0, 0, -SIN18, 0.0, 0.0],
    [-1, COS18, -0.5, COS24, 0, -SIN18, -S3, SIN24],
    [-1, COS18, -0.5, COS24, 0, SIN18, S3, -SIN24],
    [-1, COS18, 1.0, 1.0, 0, SIN18, 0.0, 0.0],
    [-1, COS18, -0.5, COS24, 0, SIN18, -S3, SIN24],
]
HAND_CHANNELS = [0, 8, 16, 24, 32, 40, 48, 56]


def test_the_rotation_on_a_2_by_3_grid_is_the_hand_computed_one():
    v = torch.zeros(1, 1, 5 + 6, 64)
    v[..., [0, 8, 16, 24]] = 1.0
    v[..., :5, :] = torch.arange(5 * 64, dtype=torch.float32).reshape(5, 64)  # prefix rows: left alone
    sin, cos = RotaryPositions(64, from_file=False).sin_cos((2, 3))
    rotated = rotate(v, sin, cos, prefix=5)[0, 0]
    assert torch.equal(rotated[:5], v[0, 0, :5])
    want = torch.zeros(6, 64)
    want[:, HAND_CHANNELS] = torch.tensor(HAND_2X3, dtype=torch.float32)
    torch.testing.assert_close(rotated[5:], want, rtol=0, atol=1e-6)


def test_the_angles_follow_designs_worked_numbers():
    theta = rotary_angles((30, 30), hand_periods())
    assert theta.shape == (900, 64)
    assert theta[0, 0].item() == pytest.approx(-6.07375, abs=5e-6)  # y_0 = -0.966667, p_0 = 1
    assert theta[0, 0].item() == pytest.approx(2 * math.pi * (2 * 0.5 / 30 - 1), abs=1e-6)
    # each axis by its own size: on a 2 x 5 grid the first column's x is 2 (0.5) / 5 - 1 = -0.8
    assert rotary_angles((2, 5), hand_periods())[0, 16].item() == pytest.approx(2 * math.pi * -0.8, abs=1e-6)


def test_keys_are_read_before_the_rotation_and_the_tap_sees_the_rotated_ones(networks):
    hub, model = networks("dinov3-s16", "released")
    x = torch.randn(2, 3, 32, 48, generator=torch.Generator().manual_seed(5))  # a 2 x 3 grid
    seen = {}
    with torch.no_grad():
        tokens = model.tokens_tapped(x, lambda block, q, k: seen.__setitem__(block, (q, k)))
        keys = model.last_keys(x)  # (2, 6, 384), before the rotation
        assert torch.equal(tokens, model.tokens(x))
    q, k = seen[11]
    assert k.shape == (2, 6, 5 + 6, 64)
    unrotated = keys.reshape(2, 6, 6, 64).transpose(1, 2)
    sin, cos = hand_rotation((2, 3), hand_periods(), torch.float32)
    torch.testing.assert_close(k[:, :, 5:], rope(unrotated, sin, cos, 0), rtol=0, atol=2e-5)
    assert (k[:, :, 5:] - unrotated).abs().max() > 0.1  # the rotation is not the identity here


def test_the_key_bias_is_masked_and_a_file_without_a_mask_applies_its_bias(tmp_path):
    hub = hub_state("dinov3-s16", depth=1, seed=6)
    hub["blocks.0.attn.qkv.bias"] = hub["blocks.0.attn.qkv.bias"] + 3 * (1 - key_mask(384))  # a key bias
    unmasked = {k: v for k, v in hub.items() if not k.endswith("bias_mask")}
    x = torch.randn(1, 3, 48, 64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        masked_keys = load_backbone(write(hub, tmp_path / "hub.pth"), "teacher", "backbone").model.last_keys(x)
        bias_keys = load_backbone(write(unmasked, tmp_path / "no_mask.pth"), "teacher", "backbone").model.last_keys(x)
    want, _ = reference_forward(hub, x, "backbone")
    assert relative(masked_keys, want) <= 1e-6
    # without the mask the stored key bias is added as it is
    key_bias = hub["blocks.0.attn.qkv.bias"][384:768]
    torch.testing.assert_close(bias_keys - masked_keys, key_bias.expand_as(masked_keys), rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------------------------------- 5. refusals


def refusal(path: Path, **kwargs) -> str:
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, "teacher", **{"form": "backbone", **kwargs})
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    return message


def vit_7b_state() -> dict[str, torch.Tensor]:
    """The ViT-7B/16's names (DESIGN 14: D 4096, SwiGLU `mlp.w1` (8192, 4096), no qkv bias), 40 blocks of tiny
    tensors but its patch embedding and first feed-forward: the refusal comes before any other shape is checked."""
    z = torch.zeros(1, dtype=torch.float16)
    state = {"cls_token": z, "storage_tokens": z, "mask_token": z, "rope_embed.periods": hand_periods(),
             "patch_embed.proj.weight": torch.zeros(4096, 3, 16, 16, dtype=torch.float16)}
    for i in range(40):
        for key in ("norm1.weight", "attn.qkv.weight", "attn.proj.weight", "ls1.gamma", "ls2.gamma", "mlp.w2.weight",
                    "mlp.w3.weight"):
            state[f"blocks.{i}.{key}"] = z
        state[f"blocks.{i}.mlp.w1.weight"] = torch.zeros(8192, 4096, dtype=torch.float16) if i == 0 else z
    return state


@pytest.mark.parametrize("wrapping", ["hub", "teacher"])
def test_the_vit_7b_is_refused_by_name(tmp_path, wrapping):
    state = vit_7b_state()
    message = refusal(write(state if wrapping == "hub" else teacher(state), tmp_path / "dinov3_vit7b16.pth"))
    assert "found DINOv3 ViT-7B/16 (4096 wide" in message and "SwiGLU hidden 8192" in message
    assert "no qkv bias" in message and "40 blocks" in message and "DINOv3 ViT-H+/16" in message  # what loads


def test_a_dinov3_of_another_width_is_refused_saying_what_was_found(tmp_path):
    state = {k: torch.zeros(s) for k, s in hub_shapes(512, "mlp", 2048, 1).items()}
    message = refusal(write(state, tmp_path / "dinov3_odd.pth"))
    assert "found DINOv3 ViT/16 (512 wide, 16 x 16 patches, MLP hidden 2048, qkv bias, 1 blocks)" in message


def convnext_state() -> dict[str, torch.Tensor]:
    """DINOv3's ConvNeXt-T names: `downsample_layers.*`, `stages.*` (4 stages), `norm.*`."""
    z = torch.zeros(2)
    state = {f"downsample_layers.{s}.0.weight": z for s in range(4)}
    for s in range(4):
        state |= {f"stages.{s}.0.dwconv.weight": z, f"stages.{s}.0.pwconv1.weight": z, f"stages.{s}.0.gamma": z}
    return state | {"norm.weight": z, "norm.bias": z}


@pytest.mark.parametrize("wrapping", ["hub", "teacher"])
def test_dinov3s_convnexts_are_refused_by_name(tmp_path, wrapping):
    state = convnext_state()
    message = refusal(write(state if wrapping == "hub" else teacher(state), tmp_path / "dinov3_convnext_tiny.pth"))
    assert "found a DINOv3 ConvNeXt (downsample_layers.*, stages.*: 4 stages" in message
    assert "not supported" in message and "DINOv3 ViT-S/16" in message


class Payload:
    """What a hostile `.metadata` could hold: unpickling it makes a folder."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


@pytest.mark.parametrize("point_at", ["folder", ".metadata", "__0_0.distcp"])
def test_a_distributed_checkpoint_is_refused_without_reading_its_metadata(tmp_path, point_at):
    folder = tmp_path / "sharded_teacher_checkpoint"
    folder.mkdir()
    marker = tmp_path / "payload-ran"
    (folder / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    for rank in range(2):
        (folder / f"__{rank}_0.distcp").write_bytes(b"\0" * 64)
    path = folder if point_at == "folder" else folder / point_at
    message = refusal(path)
    assert "distributed checkpoint (DCP)" in message and "2 *.distcp shards" in message
    assert "torch.distributed.checkpoint.format_utils.dcp_to_torch_save" in message
    assert not marker.exists()


def test_storage_tokens_under_both_names_are_refused(tmp_path):
    hub = hub_state("dinov3-s16", depth=1)
    message = refusal(write(hub | {"reg_token": hub["storage_tokens"].clone()}, tmp_path / "both.pth"))
    assert "storage tokens under both names, storage_tokens and reg_token" in message


def test_a_position_rule_does_not_apply_to_a_dinov3(tmp_path):
    path = write(hub_state("dinov3-s16", depth=1), tmp_path / "hub.pth")
    message = refusal(path, position_rule="antialias")
    assert "rotary positions and no position table" in message and "'antialias'" in message


# what timm's and Hugging Face's DINOv3 have no place for, so a file in their names cannot be written: (holder in the
# message, its writer of a hub state dict: timm's names of the state as it is, `DINOv3ViTModel`'s)
HOLDERS = {"timm": ("timm's DINOv3", lambda hub: full_form(hub, "timm", "backbone")),
           "hf": ("DINOv3ViTModel", lambda hub: hf_forms.to_hf(hub, "DINOv3ViTModel"))}


def unholdable(hub: Mapping[str, torch.Tensor], holder: str) -> str:
    """The ArchitectureError's message of writing `hub` in `holder`'s names."""
    with pytest.raises(ArchitectureError) as info:
        HOLDERS[holder][1](hub)
    return str(info.value)


@pytest.mark.parametrize("holder", HOLDERS)
def test_periods_other_than_the_formulas_cannot_be_written_in_timms_or_hugging_faces_names(holder):
    hub = hub_state("dinov3-s16", depth=2, seed=8)
    written = HOLDERS[holder][1](hub)  # the formula's periods: nothing to hold, none written
    assert not any(key.endswith("periods") for key in written)
    own = dict(hub, **{"rope_embed.periods": hand_periods() * 1.25})
    assert unholdable(own, holder) == f"{HOLDERS[holder][0]} holds no periods: these differ from the formula's"


@pytest.mark.parametrize("holder", HOLDERS)
def test_a_key_bias_its_mask_does_not_cancel_cannot_be_written_in_timms_or_hugging_faces_names(holder):
    hub = hub_state("dinov3-s16", depth=2, seed=9)  # every block's key third nonzero, cancelled by its mask
    assert (hub["blocks.1.attn.qkv.bias"][384:768] != 0).all()
    written = HOLDERS[holder][1](hub)
    assert not any(key.endswith(("k_proj.bias", "bias_mask")) for key in written)
    name = HOLDERS[holder][0]
    unmasked = dict(hub, **{"blocks.1.attn.qkv.bias_mask": torch.ones(3 * 384)})  # block 1's mask keeps it
    assert unholdable(unmasked, holder) == f"{name} holds no key bias: blocks.1.attn.qkv.bias has one"
    no_masks = {key: value for key, value in hub.items() if not key.endswith("bias_mask")}  # the bias as stored
    assert unholdable(no_masks, holder) == f"{name} holds no key bias: blocks.0.attn.qkv.bias has one"


# ----------------------------------------------------------------------------------------------------- 6. the demo


def test_the_demo_writes_a_seeded_dinov3_s16_in_hugging_faces_spelling_that_loads_back(tmp_path):
    path = make_demo_checkpoint(tmp_path / "model.safetensors", "hf", seed=7, architecture="dinov3-s16")
    keys = set(safetensors.torch.load_file(str(path)))
    assert {"embeddings.register_tokens", "layer.0.attention.q_proj.weight", "layer.11.mlp.up_proj.weight",
            "layer.0.layer_scale1.lambda1", "norm.weight"} <= keys
    assert not any(key.endswith(("k_proj.bias", "bias_mask", "periods")) or key.startswith("blocks.") for key in keys)
    loaded = load_backbone(path, "teacher", "backbone")
    assert (loaded.format, loaded.architecture, loaded.file_meta()["spelling"]) == ("hf", "dinov3-s16", "hf")
    seeded = demo_network("dinov3-s16", 7).state_dict()
    want = {k: v for k, v in seeded.items() if k != "storage_tokens" and k != "rope_embed.periods"}
    assert_same_tensors(loaded.model.state_dict(), want, "demo")
    assert torch.equal(loaded.model.rope_embed.periods, seeded["rope_embed.periods"])
    released = load_backbone(path, "teacher", "released").model.state_dict()
    assert torch.equal(released["storage_tokens"], seeded["storage_tokens"])
