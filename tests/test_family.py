"""The DINO family (docs/design.md §11): DINO v1 ViT-S/8, B/16, B/8 and DINOv2 S/B/L/14 with 0 or 4 registers.

Every expected value is computed here from the design's text: the released files are written by name and shape
(`family_state`), their other spellings derived in the test (DINO's and DINOv2's training checkpoints, timm's
names, safetensors), and the network's forward written out as the authors run it (`authors_forward`). The S members
run at real size through files and forwards; B and L are converted in memory (float16, no files).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
import torch.nn.functional as F

from evaluate.networks import vit
from evaluate.networks.checkpoints import (
    CheckpointError,
    convert_checkpoint,
    detect_format,
    load_backbone,
    unflatten_training_groups,
)
from evaluate.networks.registry import FAMILY, REGISTRY, SEED_ARCHITECTURES
from evaluate.pixels.images import keys480_input, tokens224_input

# docs/design.md §11's table: name -> (width D, patch p, depth, registers R, DINOv2)
MEMBERS = {
    "vit-s8": (384, 8, 12, 0, False),
    "vit-b16": (768, 16, 12, 0, False),
    "vit-b8": (768, 8, 12, 0, False),
    "dinov2-s14": (384, 14, 12, 0, True),
    "dinov2-b14": (768, 14, 12, 0, True),
    "dinov2-l14": (1024, 14, 24, 0, True),
    "dinov2-s14-reg4": (384, 14, 12, 4, True),
    "dinov2-b14-reg4": (768, 14, 12, 4, True),
    "dinov2-l14-reg4": (1024, 14, 24, 4, True),
}
SMALL = ("vit-s8", "dinov2-s14", "dinov2-s14-reg4")
LARGE = tuple(name for name in MEMBERS if name not in SMALL)
HUB_GRID = 37  # DINOv2's hub tables are for 518-px inputs
TRAIN_GRID = 16  # DINOv2's training dumps: 224-px crops
CHUNKS = 4  # DINOv2's block_chunks
LN_EPS = 1e-6
FORMS = ("backbone", "released")

# ----------------------------------------------------------------------------------------------------- the files


def block_shapes(width: int, dinov2: bool) -> dict[str, tuple[int, ...]]:
    """One block's names and shapes (§1, §9.1 with DINOv2's `ls1.gamma` / `ls2.gamma`)."""
    shapes = {
        "norm1.weight": (width,), "norm1.bias": (width,),
        "attn.qkv.weight": (3 * width, width), "attn.qkv.bias": (3 * width,),
        "attn.proj.weight": (width, width), "attn.proj.bias": (width,),
        "norm2.weight": (width,), "norm2.bias": (width,),
        "mlp.fc1.weight": (4 * width, width), "mlp.fc1.bias": (4 * width,),
        "mlp.fc2.weight": (width, 4 * width), "mlp.fc2.bias": (width,),
    }
    if dinov2:
        shapes |= {"ls1.gamma": (width,), "ls2.gamma": (width,)}
    return shapes


def family_shapes(width: int, patch: int, depth: int, registers: int, dinov2: bool,
                  grid: int | None = None) -> dict[str, tuple[int, ...]]:
    """The released (hub) file's names and shapes, in the authors' order (§11)."""
    grid = grid or (HUB_GRID if dinov2 else 224 // patch)
    shapes: dict[str, tuple[int, ...]] = {"cls_token": (1, 1, width), "pos_embed": (1, 1 + grid * grid, width)}
    if registers:
        shapes["register_tokens"] = (1, registers, width)
    if dinov2:
        shapes["mask_token"] = (1, width)
    shapes |= {"patch_embed.proj.weight": (width, 3, patch, patch), "patch_embed.proj.bias": (width,)}
    for i in range(depth):
        shapes |= {f"blocks.{i}.{key}": shape for key, shape in block_shapes(width, dinov2).items()}
    return shapes | {"norm.weight": (width,), "norm.bias": (width,)}


_POOL: list[torch.Tensor] = []


def _codes(dtype: torch.dtype) -> torch.Tensor:
    """5M random multiples of 1/1024 in [-1/2, 1/2]: every sum of two is exact even in float16, so a folded class
    token equals the hub's class-token input bit for bit. Generated once."""
    if not _POOL:
        gen = torch.Generator().manual_seed(25)
        _POOL.append(torch.randint(-512, 513, (5_000_000,), generator=gen, dtype=torch.int16).to(torch.float16) / 1024)
    return _POOL[0].to(dtype)


def family_state(name: str, *, grid: int | None = None, network: bool = False, seed: int = 0,
                 dtype: torch.dtype = torch.float16) -> dict[str, torch.Tensor]:
    """A released flat state dict of family member `name`, written from §11 by name and shape.

    network=False: codes (`_codes`) in `dtype` (float16 for B and L in memory; float32 for files, which load
    faster so), each tensor a different window of the pool (cheap at L's size, and no two keys hold the same
    values); network=True: float32 values of a working network (unit-variance linears,
    LayerNorm gains near 1, LayerScale near 0.5, a position table large enough that its resampling shows)."""
    width, patch, depth, registers, dinov2 = MEMBERS[name]
    shapes = family_shapes(width, patch, depth, registers, dinov2, grid)
    if not network:
        pool = _codes(dtype)
        return {key: pool[(i * 104_729 + seed) % 800_000:][: math.prod(shape)].view(shape).clone()
                for i, (key, shape) in enumerate(shapes.items())}
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in shapes.items():
        noise = torch.randn(shape, generator=gen)
        if key.endswith(("norm1.weight", "norm2.weight")) or key == "norm.weight":
            value = 1 + 0.2 * noise
        elif key.endswith(".gamma"):
            value = 0.5 + 0.1 * noise
        elif key.endswith(".weight"):  # linears and the patch convolution: unit-variance outputs
            value = noise / math.sqrt(math.prod(shape[1:]))
        elif key.endswith(".bias"):
            value = 0.1 * noise
        else:  # class token, position table, registers, mask token
            value = 0.5 * noise
        state[key] = value
    return state


def dino_train(hub: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """DINO v1's training checkpoint (§2): teacher `backbone.*` beside `head.*`, the student under
    `module.backbone.*` (a copy: safetensors refuses shared storage), optimizer, epoch, args, dino_loss."""
    width = hub["cls_token"].shape[-1]
    head = {"head.mlp.0.weight": torch.ones(32, width, dtype=hub["cls_token"].dtype), "head.mlp.0.bias": torch.zeros(32),
            "head.last_layer.weight_g": torch.ones(64, 1)}
    return {
        "student": {f"module.backbone.{k}": v.clone() for k, v in hub.items()}
        | {f"module.{k}": v.clone() for k, v in head.items()},
        "teacher": {f"backbone.{k}": v for k, v in hub.items()} | head,
        "optimizer": {"state": {}, "param_groups": [{"lr": 5e-4, "params": [0, 1]}]},
        "epoch": 100,
        "args": argparse.Namespace(arch="vit_small", patch_size=8),
        "dino_loss": {"center": torch.zeros(1, 64)},
    }


def dinov2_train(hub: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """DINOv2's teacher (§11): `backbone.*` with the blocks chunked four ways as `backbone.blocks.{c}.{i}.*` (block
    numbers kept), beside `dino_head.*` and `ibot_head.*`."""
    depth = 1 + max(int(key.split(".")[1]) for key in hub if key.startswith("blocks."))
    per_chunk = depth // CHUNKS
    teacher = {}
    for key, value in hub.items():
        if key.startswith("blocks."):
            i = int(key.split(".")[1])
            key = f"blocks.{i // per_chunk}.{key[len('blocks.'):]}"
        teacher[f"backbone.{key}"] = value
    for head in ("dino_head.", "ibot_head."):
        teacher |= {f"{head}mlp.0.weight": torch.ones(16, 4), f"{head}last_layer.weight_g": torch.ones(8, 1)}
    return {"teacher": teacher}


def timm(hub: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """timm's spelling of a DINOv2 (§11): no `mask_token`; with registers `reg_token`, and the class row folded into
    `cls_token` (a g^2-row table)."""
    out = {k: v for k, v in hub.items() if k != "mask_token"}
    if "register_tokens" in out:
        out["reg_token"] = out.pop("register_tokens")
        out["cls_token"] = hub["cls_token"] + hub["pos_embed"][:, :1]
        out["pos_embed"] = hub["pos_embed"][:, 1:].clone()
    return out


SPELLING_FORMAT = {"hub": "dino-backbone", "dino-train": "dino-train", "dinov2-train": "dinov2-train",
                   "timm": "dino-backbone"}


def spellings(name: str, hub: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Every file spelling of a member (top-level dicts), derived from its hub file."""
    if MEMBERS[name][4]:
        return {"hub": dict(hub), "dinov2-train": dinov2_train(hub), "timm": timm(hub)}
    return {"hub": dict(hub), "dino-train": dino_train(hub)}


def flat_tensors(top: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """A top-level dict as safetensors holds it: training groups flattened as `<group>.<key>`, tensors only."""
    if not any(isinstance(value, Mapping) for value in top.values()):
        return {k: v.contiguous() for k, v in top.items()}
    return {f"{group}.{k}": v.contiguous() for group in ("student", "teacher", "dino_loss")
            for k, v in (top.get(group) or {}).items() if isinstance(v, torch.Tensor)}


def through_safetensors(top: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level dict a safetensors file of `top` reads back as (in memory)."""
    return unflatten_training_groups(safetensors.torch.load(safetensors.torch.save(flat_tensors(top))))


def write(top: Mapping[str, Any], path: Path) -> Path:
    if path.suffix == ".safetensors":
        safetensors.torch.save_file(flat_tensors(top), str(path))
    else:
        torch.save(dict(top), path)
    return path


# ----------------------------------------------------------------------------------------------------- expectations


def ours(key: str) -> str:
    """Our layout's name of a hub key: LayerScale as `gamma_1` / `gamma_2` (§9.1: the same parameters)."""
    return key.replace(".ls1.gamma", ".gamma_1").replace(".ls2.gamma", ".gamma_2")


def expected_form(hub: Mapping[str, torch.Tensor], form: str) -> dict[str, torch.Tensor]:
    """What either form of a hub file is (§11): released = everything but the unused `mask_token`; backbone =
    released less class token, its position row, registers and final norm."""
    released = {ours(k): v for k, v in hub.items() if k != "mask_token"}
    if form == "released":
        return released
    out = {k: v for k, v in released.items() if k not in ("cls_token", "register_tokens", "norm.weight", "norm.bias")}
    out["pos_embed"] = hub["pos_embed"][:, 1:]
    return out


def class_input(state: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The class token's input to block 1: the token plus its position row, in float32."""
    return state["cls_token"].float() + state["pos_embed"][:, :1].float()


def assert_same_tensors(got: Mapping[str, torch.Tensor], want: Mapping[str, torch.Tensor], label: str,
                        folded: bool = False) -> None:
    """Key by key, bit for bit (as float32). folded: a timm-folded released form, whose class token and class row
    differ from the hub's and only their sum (the class-token input) must agree."""
    assert sorted(got) == sorted(want), f"{label}: keys differ: {sorted(set(got) ^ set(want))}"
    for key, value in want.items():
        if folded and key in ("cls_token", "pos_embed"):
            continue
        assert got[key].shape == value.shape, f"{label}: {key} {tuple(got[key].shape)} != {tuple(value.shape)}"
        if got[key] is value:  # the very tensor the expected key names (L's 300M values compared once, not 14 times)
            continue
        same = got[key].dtype == value.dtype
        assert torch.equal(got[key], value) if same else torch.equal(got[key].float(), value.float()), \
            f"{label}: {key} differs"
    if folded:
        assert torch.equal(got["pos_embed"][:, 1:].float(), want["pos_embed"][:, 1:].float()), label
        assert torch.equal(class_input(got), class_input(want)), f"{label}: class-token input differs"


# ----------------------------------------------------------------------------------------------------- 1. spellings


def test_the_family_is_exactly_the_design_table_beside_the_seeds():
    assert set(FAMILY) == set(MEMBERS) and not set(FAMILY) & set(SEED_ARCHITECTURES)
    for name, (width, patch, depth, registers, _) in MEMBERS.items():
        g = REGISTRY[name].geometry
        assert (g.patch, g.width, g.depth, g.registers) == (patch, width, depth, registers), name


def left_out(name: str, form: str) -> set[str]:
    """What each form of a hub file leaves out (§11): the unused mask token; the backbone form also the class token,
    the class row, the registers and the final norm."""
    _, _, _, registers, dinov2 = MEMBERS[name]
    unused = {"mask_token"} if dinov2 else set()
    if form == "released":
        return unused
    return unused | {"cls_token", "pos_embed[0]", "norm.weight", "norm.bias"} | ({"register_tokens"} if registers else set())


def check_every_spelling_in_memory(name: str) -> None:
    hub = family_state(name)
    files = {(label, "torch"): top for label, top in spellings(name, hub).items()}
    # safetensors' flattening is the same for every spelling; the S files test each spelling in it
    files["hub", "safetensors"] = through_safetensors(hub)
    for form in FORMS:
        reference, dropped = convert_checkpoint(hub, detect_format(hub), "teacher", form)
        assert_same_tensors(reference, expected_form(hub, form), f"{name} hub {form}")
        # exactly the class token, its row, registers, final norm and the mask token leave the backbone form
        assert set(dropped) == left_out(name, form), (form, dropped)
        for (label, container), top in files.items():
            assert detect_format(top) == SPELLING_FORMAT[label], (label, container)
            got, dropped = convert_checkpoint(top, detect_format(top), "teacher", form)
            folded = label == "timm" and MEMBERS[name][3] > 0 and form == "released"
            assert_same_tensors(got, reference, f"{name} {label} ({container}) {form}", folded=folded)
            assert not any("head." in key for key in got), (label, form)


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if "-l14" in name else name
                                  for name in LARGE])
def test_every_spelling_of_a_b_or_l_member_converts_to_its_hub_files_tensors(name):
    check_every_spelling_in_memory(name)


@pytest.mark.parametrize("name", SMALL)
def test_every_file_of_a_small_member_loads_the_hub_files_network_in_both_forms(tmp_path, name):
    hub = family_state(name, dtype=torch.float32)
    registers = MEMBERS[name][3]
    hub_models = {}
    for label, top in spellings(name, hub).items():
        for suffix in (".pth", ".safetensors"):
            path = write(top, tmp_path / f"{label}{suffix}")
            for form in FORMS:
                loaded = load_backbone(path, "teacher", form)
                assert loaded.architecture == name and loaded.form == form
                assert loaded.format == SPELLING_FORMAT[label]
                state = loaded.model.state_dict()
                folded = label == "timm" and registers > 0 and form == "released"
                assert_same_tensors(state, expected_form(hub, form), f"{label}{suffix} {form}", folded=folded)
                wanted = left_out(name, form)
                if label == "timm":  # no mask token in timm's files, and no class row where it is folded
                    wanted -= {"mask_token"} | ({"pos_embed[0]"} if registers else set())
                if label in ("hub", "timm"):  # flat files: exactly what the form leaves out
                    assert set(loaded.dropped) == wanted, loaded.dropped
                else:  # training files: that beside the heads
                    assert wanted <= set(loaded.dropped) and any("head." in k for k in loaded.dropped)
                if form == "released" and suffix == ".pth":
                    hub_models.setdefault(label, loaded.model)
            path.unlink()
    if "timm" in hub_models:  # the class token enters block 1 with the same input from the timm and hub files
        x = torch.zeros(1, 3, 28, 28)
        with torch.no_grad():
            rows = {label: hub_models[label].prepare_tokens(x) for label in ("hub", "timm")}
        assert torch.equal(rows["hub"][:, : 1 + registers], rows["timm"][:, : 1 + registers])
        assert torch.equal(rows["hub"][:, 0], class_input(hub)[:, 0])


# ----------------------------------------------------------------------------------------------------- 2. forwards


def resample(table: torch.Tensor, grid: tuple[int, int], rule: str) -> torch.Tensor:
    """§1 / §11's position rule, written out: (1, g0^2, C) -> (1, gh * gw, C)."""
    g0 = math.isqrt(table.shape[1])
    if (g0, g0) == tuple(grid):
        return table
    square = table.reshape(1, g0, g0, -1).permute(0, 3, 1, 2).float()
    if rule == "dino":
        out = F.interpolate(square, scale_factor=((grid[0] + 0.1) / g0, (grid[1] + 0.1) / g0), mode="bicubic",
                            align_corners=False)
    else:
        out = F.interpolate(square, size=tuple(grid), mode="bicubic", align_corners=False, antialias=True)
    assert tuple(out.shape[-2:]) == tuple(grid)
    return out.permute(0, 2, 3, 1).reshape(1, grid[0] * grid[1], -1)


def layer_norm(x: torch.Tensor, state: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + LN_EPS) * state[name + ".weight"] + state[name + ".bias"]


def authors_forward(hub: Mapping[str, torch.Tensor], x: torch.Tensor, *, rule: str, form: str,
                    reading: str) -> torch.Tensor:
    """The network as §1 and §11 describe it, from the hub state dict: patch convolution, the table resampled by
    `rule`, in the released form the class token plus its row and then the registers (no position) before the
    patches; pre-norm blocks (LayerScale where the file has it), softmax(q k / 8); keys480 = the last block's LN1 ->
    key third of qkv; tokens224 = the last block's output (final LayerNorm in the released form); patch rows."""
    width, _, patch, _ = hub["patch_embed.proj.weight"].shape
    depth = 1 + max(int(key.split(".")[1]) for key in hub if key.startswith("blocks."))
    heads = width // 64
    z = F.conv2d(x, hub["patch_embed.proj.weight"], hub["patch_embed.proj.bias"], stride=patch)
    b, _, gh, gw = z.shape
    z = z.flatten(2).transpose(1, 2) + resample(hub["pos_embed"][:, 1:], (gh, gw), rule)
    extra = 0
    if form == "released":
        front = [(hub["cls_token"] + hub["pos_embed"][:, :1]).expand(b, -1, -1)]
        if "register_tokens" in hub:
            front.append(hub["register_tokens"].expand(b, -1, -1))
        z = torch.cat([*front, z], dim=1)
        extra = 1 + (hub["register_tokens"].shape[1] if "register_tokens" in hub else 0)
    n = z.shape[1]
    for i in range(depth):
        p = f"blocks.{i}."
        h = layer_norm(z, hub, p + "norm1")
        weight, bias = hub[p + "attn.qkv.weight"], hub[p + "attn.qkv.bias"]
        if i == depth - 1 and reading == "keys480":
            return (h @ weight[width : 2 * width].T + bias[width : 2 * width])[:, extra:]
        q, k, v = (h @ weight.T + bias).reshape(b, n, 3, heads, 64).permute(2, 0, 3, 1, 4)
        attended = torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1) @ v
        branch = attended.transpose(1, 2).reshape(b, n, width) @ hub[p + "attn.proj.weight"].T + hub[p + "attn.proj.bias"]
        z = z + branch * hub.get(p + "ls1.gamma", 1.0)
        h = layer_norm(z, hub, p + "norm2")
        hidden = F.gelu(h @ hub[p + "mlp.fc1.weight"].T + hub[p + "mlp.fc1.bias"])
        z = z + (hidden @ hub[p + "mlp.fc2.weight"].T + hub[p + "mlp.fc2.bias"]) * hub.get(p + "ls2.gamma", 1.0)
    if form == "released":
        z = layer_norm(z, hub, "norm")
    return z[:, extra:]


def relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got - want).abs().max() / want.abs().max()).item()


@pytest.fixture(scope="module")
def networks(tmp_path_factory):
    """network(name, form) -> (hub state dict, LoadedCheckpoint): an S member's hub file holding a working float32
    network, written with torch.save and loaded in `form`; each file written and each form loaded once."""
    root = tmp_path_factory.mktemp("family_networks")
    hubs: dict[str, tuple[dict[str, torch.Tensor], Path]] = {}
    loaded = {}

    def network(name: str, form: str):
        if name not in hubs:
            hub = family_state(name, network=True, seed=10 + SMALL.index(name))
            hubs[name] = (hub, write(hub, root / f"{name}.pth"))
        if (name, form) not in loaded:
            loaded[name, form] = load_backbone(hubs[name][1], "teacher", form)
        return hubs[name][0], loaded[name, form]

    return network


READINGS = [
    pytest.param("vit-s8", "keys480", marks=pytest.mark.slow),
    ("vit-s8", "tokens224"),
    ("dinov2-s14", "keys480"),
    ("dinov2-s14", "tokens224"),
    ("dinov2-s14-reg4", "keys480"),
    ("dinov2-s14-reg4", "tokens224"),
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name, reading", READINGS)
def test_readings_of_a_loaded_member_equal_the_authors_forward_on_real_photos(networks, two_photos, name, reading,
                                                                             form):
    hub, loaded = networks(name, form)
    rule = "antialias" if MEMBERS[name][3] else "dino"  # §11: the hub's register models resample antialiased
    side = MEMBERS[name][1] * round(480 / MEMBERS[name][1])
    if reading == "keys480":
        x = torch.stack([keys480_input(img, side) for img in two_photos[: 1 if MEMBERS[name][1] == 8 else 2]])
    else:
        x = torch.stack([tokens224_input(img) for img in two_photos])
    with torch.no_grad():
        got = loaded.model.last_keys(x) if reading == "keys480" else loaded.model.tokens(x)
        want = authors_forward(hub, x, rule=rule, form=form, reading=reading)
    grid = side // MEMBERS[name][1] if reading == "keys480" else 224 // MEMBERS[name][1]
    assert got.shape == want.shape == (x.shape[0], grid * grid, MEMBERS[name][0])
    assert relative(got, want) <= 1e-5, relative(got, want)


# ----------------------------------------------------------------------------------------------------- 3. position rules


def test_the_two_position_rules_give_different_tables_from_37_to_34():
    table = torch.randn(1, HUB_GRID**2, 384, generator=torch.Generator().manual_seed(3))
    dino = vit.resample_pos_embed(table, (34, 34), "dino")
    antialias = vit.resample_pos_embed(table, (34, 34), "antialias")
    assert torch.equal(dino, resample(table, (34, 34), "dino"))
    assert torch.equal(antialias, resample(table, (34, 34), "antialias"))
    assert dino.shape == antialias.shape == (1, 34 * 34, 384)
    assert relative(dino, antialias) > 0.05  # not rounding: the rules are different tables
    # non-square grids resample row by row too
    assert torch.equal(vit.resample_pos_embed(table, (30, 40), "antialias"), resample(table, (30, 40), "antialias"))


# (member, spelling, table grid) -> the rule §11 says it was built with
DEFAULT_RULES = [  # (member, spelling, table grid, rule, form loaded: the rule is the file's, whatever the form)
    ("dinov2-s14-reg4", "hub", HUB_GRID, "antialias", "backbone"),
    ("dinov2-s14-reg4", "hub", HUB_GRID, "antialias", "released"),
    ("dinov2-s14", "hub", HUB_GRID, "dino", "released"),
    ("dinov2-s14-reg4", "dinov2-train", TRAIN_GRID, "dino", "released"),
    ("dinov2-s14", "dinov2-train", TRAIN_GRID, "dino", "backbone"),
    ("dinov2-s14-reg4", "dinov2-train", HUB_GRID, "dino", "backbone"),
    ("vit-s8", "hub", 28, "dino", "released"),
    ("vit-s8", "dino-train", 28, "dino", "backbone"),
]


@pytest.mark.parametrize("name, spelling, grid, rule, form", DEFAULT_RULES)
def test_each_family_file_resamples_by_its_own_position_rule_by_default(tmp_path, name, spelling, grid, rule, form):
    hub = family_state(name, grid=grid, dtype=torch.float32)
    path = write(spellings(name, hub)[spelling], tmp_path / f"{spelling}.pth")
    loaded = load_backbone(path, "teacher", form)
    assert loaded.position_rule == rule and loaded.file_meta()["position_rule"] == rule
    target = (34, 34) if MEMBERS[name][1] == 14 else (60, 60)  # keys480's grid
    with torch.no_grad():
        table = loaded.model.pos_embed_for(target)
    assert torch.equal(table, resample(hub["pos_embed"][:, 1:], target, rule))


@pytest.mark.parametrize("name, override, form", [("dinov2-s14-reg4", "dino", "released"),
                                                  ("dinov2-s14", "antialias", "backbone"),
                                                  ("vit-s8", "antialias", "released")])
def test_a_checkpoints_position_rule_overrides_the_default_and_is_recorded(tmp_path, name, override, form):
    hub = family_state(name, dtype=torch.float32)
    loaded = load_backbone(write(hub, tmp_path / "hub.pth"), "teacher", form, position_rule=override)
    assert loaded.position_rule == override and loaded.file_meta()["position_rule"] == override
    target = (34, 34) if MEMBERS[name][1] == 14 else (60, 60)
    with torch.no_grad():
        table = loaded.model.pos_embed_for(target)
    assert torch.equal(table, resample(hub["pos_embed"][:, 1:], target, override))


# ----------------------------------------------------------------------------------------------------- 4. refusals


def giant_state() -> dict[str, torch.Tensor]:
    """The DINOv2 giant's names (SwiGLU `mlp.w12` / `mlp.w3`, 40 blocks of 1536), tiny zero tensors but its patch
    embedding: the refusal comes before any shape is checked."""
    z = torch.zeros(1, dtype=torch.float16)
    state = {"cls_token": z, "pos_embed": z, "mask_token": z,
             "patch_embed.proj.weight": torch.zeros(1536, 3, 14, 14, dtype=torch.float16)}
    for i in range(40):
        for key in ("norm1.weight", "attn.qkv.weight", "ls1.gamma", "ls2.gamma", "mlp.w12.weight", "mlp.w12.bias",
                    "mlp.w3.weight", "mlp.w3.bias"):
            state[f"blocks.{i}.{key}"] = z
    return state


def refusal(path: Path) -> str:
    with pytest.raises(CheckpointError) as info:
        load_backbone(path, "teacher", "backbone")
    message = str(info.value)
    assert message.startswith(f"{path}: found ") and "\n" not in message, message
    return message


@pytest.mark.parametrize("spelling", ["hub", "dinov2-train"])
def test_the_dinov2_giant_is_refused_by_name_in_one_line(tmp_path, spelling):
    state = giant_state()
    top = state if spelling == "hub" else dinov2_train(state)
    message = refusal(write(top, tmp_path / "giant.pth"))
    assert "DINOv2 giant" in message and "mlp.w12" in message and "mlp.w3" in message
    assert "40 blocks" in message and "1536 wide" in message
    assert "not supported" in message and "DINOv2 ViT-L/14" in message  # what is supported


def test_a_dinov2_of_an_unsupported_width_is_refused_naming_what_was_found(tmp_path):
    shapes = family_shapes(192, 14, 12, 0, True)
    message = refusal(write({k: torch.zeros(s, dtype=torch.float16) for k, s in shapes.items()},
                            tmp_path / "dinov2_ti.pth"))
    assert "found ViT-Ti/14 (192 wide, 14 x 14 patches, 12 blocks), which is not supported" in message


def test_a_vit_ti8_is_refused_naming_what_was_found(tmp_path):
    shapes = family_shapes(192, 8, 12, 0, False)
    message = refusal(write({k: torch.zeros(s, dtype=torch.float16) for k, s in shapes.items()},
                            tmp_path / "vit_ti8.safetensors"))
    assert "found ViT-Ti/8 (192 wide, 8 x 8 patches, 12 blocks)" in message and "not supported" in message


# ----------------------------------------------------------------------------------------------------- 5. geometry


@pytest.mark.parametrize("name, grids", [("vit-s8", (60, 28)), ("dinov2-s14-reg4", (34, 16))])
@pytest.mark.parametrize("form", FORMS)
def test_file_meta_records_the_networks_geometry_form_and_rule(networks, name, grids, form):
    width, patch, depth, registers, _ = MEMBERS[name]
    meta = networks(name, form)[1].file_meta()
    assert {key: meta[key] for key in ("patch", "width", "depth", "registers", "keys480_grid", "tokens224_grid",
                                       "form", "position_rule", "architecture")} == {
        "patch": patch, "width": width, "depth": depth, "registers": registers,  # 4 registers in both forms
        "keys480_grid": [grids[0]] * 2, "tokens224_grid": [grids[1]] * 2, "form": form,
        "position_rule": "antialias" if registers else "dino", "architecture": name}


# ----------------------------------------------------------------------------------------------------- 6. sizes


def parameters(name: str, **parts: bool) -> int:
    with torch.device("meta"):
        model = REGISTRY[name].build(REGISTRY[name].variants[0], **parts)
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_are_the_published_ones():
    released = {"class_token": True, "final_norm": True}
    assert parameters("vit-b16", **released) == 85_798_656  # DINO ViT-B/16
    assert parameters("vit-s8", **released) == 21_670_272  # DINO ViT-S/8
    assert parameters("vit-s16") == 21_664_128  # §1: the seed's backbone form
    # DINOv2 ViT-S/14 with registers, as the hub builds it (less its unused mask token), from §11's shapes:
    # patch conv, 1 + 37^2 table rows, class token, 4 registers, 12 LayerScale blocks, final norm
    width = 384
    block = 12 * width * width + 13 * width + 2 * width
    expected = width * 3 * 14 * 14 + width + (1 + 37 * 37) * width + width + 4 * width + 12 * block + 2 * width
    assert parameters("dinov2-s14-reg4", pos_grid=37, registers=4, **released) == expected
