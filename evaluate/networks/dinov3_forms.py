"""DINOv3's ViT files (docs/design.md §14, DESIGN 14): which spelling a state dict is in, the small pure converters
both ways, what a refused DINOv3 file is, and what meta.json records of one. The registry
(`evaluate.networks.registry`) makes one entry of each member of `MEMBERS`; the network is
`evaluate.networks.dinov3.DinoV3ViT`.

Spellings, all to one layout (the hub release's names, which the network uses):

- "hub": `storage_tokens`, `rope_embed.periods`, `mask_token` (1, D), `blocks.{i}.attn.qkv.bias_mask`, `ls1.gamma`,
  `mlp.{fc1, fc2}` or SwiGLU `mlp.{w1, w2, w3}` (the training teacher's `backbone.*` too, once unwrapped). The
  converter drops `mask_token`, `local_cls_norm.*` and `cls_norm.*` and masks the key bias (bias * bias_mask, in
  float32).
- "timm" (timm 1.0.31's `vit_*_patch16_dinov3[_qkvb]`): `reg_token`, `gamma_1` / `gamma_2`, `attn.q_bias` /
  `attn.v_bias` (`_qkvb` only; the others have no qkv bias), SwiGLU `mlp.fc1_g`, `fc1_x`, `fc2`; no periods,
  `mask_token` or `bias_mask`. Renamed; the qkv bias is q | 0 | v (none: 0); SwiGLU's become `w1, w2, w3`.

Hugging Face's `DINOv3ViTModel` is a file format (`evaluate.networks.hf_forms`) that reads back to the hub's names.
A file without `rope_embed.periods` (timm, Hugging Face) gets the formula's periods from the network
(`dinov3.formula_periods`); `rope_embed.periods` stays in the layout only where the file had it.

Recognised (`recognise_dinov3`): a patch embedding, no position table, LayerScale under one of the two names, and a
marker of the spelling (hub: `storage_tokens`, `rope_embed.periods` or a `bias_mask`; timm: `reg_token`, `q_bias` or
`fc1_g`): a ViT with LayerScale that merely lacks its table is not taken for a DINOv3. Refused (`refusal`): the
ViT-7B/16 and any other width, patch or feed-forward, and DINOv3's ConvNeXts (`downsample_layers.*`, `stages.*`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping

from evaluate.networks import ArchitectureError, is_tensor
from evaluate.networks.forms import HEAD_LAYOUTS, LAYERSCALE_TIMM, block_count, classifier_head, renamed

if TYPE_CHECKING:  # torch is imported where a tensor is made (the registry's own note says why)
    from torch import Tensor

# registry name -> (title, width D, feed-forward, depth of the release) (DESIGN 14's table)
MEMBERS: dict[str, tuple[str, int, str, int]] = {
    "dinov3-s16": ("DINOv3 ViT-S/16", 384, "mlp", 12),
    "dinov3-s16plus": ("DINOv3 ViT-S+/16", 384, "swiglu", 12),
    "dinov3-b16": ("DINOv3 ViT-B/16", 768, "mlp", 12),
    "dinov3-l16": ("DINOv3 ViT-L/16", 1024, "mlp", 24),
    "dinov3-h16plus": ("DINOv3 ViT-H+/16", 1280, "swiglu", 32),
}
PATCH = 16
SPELLINGS = ("hub", "timm")  # the naming variants; Hugging Face's is a format, the teacher's a wrapping
TEACHER, HF = "teacher", "hf"  # what meta.json's `spelling` says of a training teacher and of a Hugging Face file
PERIODS = "rope_embed.periods"
STORAGE = "storage_tokens"
TIMM_REGISTERS = "reg_token"
MASK_TOKEN = "mask_token"
UNUSED_NORMS = ("local_cls_norm.", "cls_norm.")  # touch the prefix rows only (or only in training): never read
TIMM_SWIGLU = {"mlp.fc1_g.": "mlp.w1.", "mlp.fc1_x.": "mlp.w2.", "mlp.fc2.": "mlp.w3."}
SAT_MEAN_STD = "mean (0.430, 0.411, 0.296), std (0.213, 0.156, 0.143)"  # the SAT-493M release's own, not used
_BLOCK = re.compile(r"^blocks\.(\d+)\.")


def _block_keys(state: Mapping[str, Any]) -> list[str]:
    return [key for key in state if key.startswith("blocks.")]


def recognise_dinov3(state: Mapping[str, Any]) -> str | None:
    """"hub" or "timm" for a DINOv3 ViT's flat state dict (any width, patch or feed-forward), else None."""
    patch = state.get("patch_embed.proj.weight")
    if not is_tensor(patch) or patch.ndim != 4 or "pos_embed" in state:
        return None
    blocks = _block_keys(state)
    timm_scale = any(key.endswith((".gamma_1", ".gamma_2")) for key in blocks)
    hub_scale = any(key.endswith((".ls1.gamma", ".ls2.gamma")) for key in blocks)
    timm = TIMM_REGISTERS in state or any(key.endswith((".attn.q_bias", ".mlp.fc1_g.weight")) for key in blocks)
    hub = STORAGE in state or PERIODS in state or any(key.endswith(".attn.qkv.bias_mask") for key in blocks)
    if TIMM_REGISTERS in state and STORAGE in state:
        raise ArchitectureError(f"storage tokens under both names, {STORAGE} and {TIMM_REGISTERS}")
    if timm_scale and timm and not hub_scale:
        return "timm"
    if hub_scale and hub and not timm_scale:
        return "hub"
    return None


def ffn_of(state: Mapping[str, Any]) -> str:
    """"swiglu" (`mlp.w1`, timm's `mlp.fc1_g`) or "mlp"."""
    swiglu = any(key.endswith((".mlp.w1.weight", ".mlp.fc1_g.weight")) for key in _block_keys(state))
    return "swiglu" if swiglu else "mlp"


def hidden_of(state: Mapping[str, Any]) -> int:
    """The feed-forward's hidden width, from block 0's first projection (0 when it has none)."""
    for name in ("mlp.fc1.weight", "mlp.w1.weight", "mlp.fc1_g.weight"):
        value = state.get(f"blocks.0.{name}")
        if is_tensor(value) and value.ndim == 2:
            return int(value.shape[0])
    return 0


def describe(state: Mapping[str, Any]) -> str:
    """A DINOv3 ViT in words: "DINOv3 ViT-7B/16 (4096 wide, SwiGLU hidden 8192, no qkv bias, 40 blocks)"."""
    embed = state.get("patch_embed.proj.weight")
    width, _, patch, _ = tuple(embed.shape) if is_tensor(embed) and embed.ndim == 4 else ("?", 0, "?", 0)
    size = {384: "ViT-S", 768: "ViT-B", 1024: "ViT-L", 1280: "ViT-H", 4096: "ViT-7B"}.get(width, "ViT")
    ffn = "SwiGLU" if ffn_of(state) == "swiglu" else "MLP"
    bias = any(key.endswith((".attn.qkv.bias", ".attn.q_bias")) for key in _block_keys(state))
    return (f"DINOv3 {size}/{patch} ({width} wide, {patch} x {patch} patches, {ffn} hidden {hidden_of(state)}, "
            f"{'' if bias else 'no '}qkv bias, {block_count(state)} blocks)")


def refusal(state: Mapping[str, Any]) -> str | None:
    """What a DINOv3 file the registry does not load is ("found DINOv3 ViT-7B/16 (...), which is not supported"),
    or None: DINOv3's ConvNeXts, and DINOv3 ViTs of a width, patch or feed-forward no member of `MEMBERS` has."""
    tops = {str(key).split(".")[0] for key in state}
    if {"downsample_layers", "stages"} <= tops:
        stages = 1 + max((int(m.group(1)) for key in state if (m := re.match(r"^stages\.(\d+)\.", str(key)))),
                         default=-1)
        return (f"found a DINOv3 ConvNeXt (downsample_layers.*, stages.*: {stages} stages, a convolutional network "
                "without patch tokens), which is not supported")
    if recognise_dinov3(state) is None:
        return None
    width, _, patch, _ = tuple(state["patch_embed.proj.weight"].shape)
    member = any(width == w and ffn_of(state) == ffn for _, w, ffn, _ in MEMBERS.values())
    return None if member and patch == PATCH else f"found {describe(state)}, which is not supported"


# ----------------------------------------------------------------------------------------------------- converters


def _from_timm(state: Mapping[str, Any]) -> dict[str, Any]:
    """timm's names as the hub's: `reg_token` -> `storage_tokens`, `gamma_1/2` -> `ls1/2.gamma`, `q_bias` | 0 |
    `v_bias` -> `attn.qkv.bias`, SwiGLU `fc1_g, fc1_x, fc2` -> `w1, w2, w3` (in blocks that have `fc1_g`)."""
    import torch

    swiglu_blocks = {m.group(1) for key in state if key.endswith(".mlp.fc1_g.weight") and (m := _BLOCK.match(key))}
    out: dict[str, Any] = {}
    # LayerScale: the family's two names (`forms.LAYERSCALE_TIMM`), here timm's `gamma_1/2` -> the hub's `ls1/2.gamma`
    for key, value in renamed(state, LAYERSCALE_TIMM).items():
        if key == TIMM_REGISTERS:
            key = STORAGE
        elif (m := _BLOCK.match(key)) is not None:
            if m.group(1) in swiglu_blocks:
                for old, new in TIMM_SWIGLU.items():
                    key = key.replace(f".{old}", f".{new}", 1) if f".{old}" in key else key
            if key.endswith((".attn.q_bias", ".attn.v_bias")):
                continue
        out[key] = value
    for key in [k for k in state if k.endswith(".attn.q_bias")]:
        stem = key[: -len("q_bias")]
        q, v = state[key], state.get(stem + "v_bias")
        if not is_tensor(q) or not is_tensor(v) or q.shape != v.shape:
            raise ArchitectureError(f"timm DINOv3: {key} without a {stem}v_bias of its shape")
        out[stem + "qkv.bias"] = torch.cat([q, torch.zeros_like(q), v])
    return out


def dinov3_to_released(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    """(the released form in the hub's names, dropped keys) of a DINOv3 flat state dict in spelling `variant`.

    timm's names are renamed (`_from_timm`); `mask_token` (unused), `local_cls_norm.*` and `cls_norm.*` (prefix rows
    only) are dropped; each `attn.qkv.bias_mask` is applied to its bias in float32 (b * m: the key bias their
    forward never applies, zero) and dropped; a qkv without bias (timm's, a hub form without one) gets a zero bias.
    """
    import torch

    if variant == "timm":
        state = _from_timm(state)
    masks = sorted(key for key in state if key.endswith(".attn.qkv.bias_mask"))
    dropped = sorted(key for key in state if key == MASK_TOKEN or key.startswith(UNUSED_NORMS)) + masks
    out = {key: value for key, value in state.items() if key not in dropped}
    for key in masks:
        bias_key, mask = key[: -len("_mask")], state[key]
        bias = out.get(bias_key)
        if not is_tensor(bias) or not is_tensor(mask) or bias.shape != mask.shape:
            found = tuple(bias.shape) if is_tensor(bias) else "none"
            raise ArchitectureError(f"{key} {tuple(mask.shape) if is_tensor(mask) else '?'} does not match its "
                                    f"bias ({found})")
        out[bias_key] = bias.float() * mask.float()
    for key in [k for k in out if k.endswith(".attn.qkv.weight")]:
        weight = out[key]
        if is_tensor(weight) and weight.ndim == 2 and key[: -len("weight")] + "bias" not in out:
            out[key[: -len("weight")] + "bias"] = torch.zeros(weight.shape[0], dtype=weight.dtype)
    return out, dropped


def dinov3_full_form(backbone: Mapping[str, Tensor], variant: str, layout: str) -> dict[str, Tensor]:
    """A DINOv3 backbone (hub names) as its files hold it, seeded (1): layout "dino" (the hub release: class token,
    storage tokens where the backbone has none, `mask_token` zeros (1, D), each qkv's `bias_mask` (1 | 0 | 1),
    final norm), "classifier" (that and a 1000-class head) or "backbone" (as it is); in every layout the periods
    (the formula's where absent); variant "timm": timm's names (no periods, mask token or bias mask; q_bias and
    v_bias)."""
    import torch

    from evaluate.networks import dinov3

    if layout not in ("dino", "classifier", "backbone"):
        raise ArchitectureError(f"DINOv3 files have no {layout!r} layout")
    dim = backbone["patch_embed.proj.weight"].shape[0]
    out = dict(backbone)
    out.setdefault(PERIODS, dinov3.formula_periods())  # every file written holds a DINOv3 marker, the backbone's too
    if layout != "backbone":
        gen = torch.Generator().manual_seed(1)
        front = {"cls_token": torch.randn(1, 1, dim, generator=gen) * 0.02}
        front[STORAGE] = out.pop(STORAGE) if STORAGE in out else torch.randn(1, 4, dim, generator=gen) * 0.02
        front[MASK_TOKEN] = torch.zeros(1, dim)
        out = front | out
        for key in [k for k in out if k.endswith(".attn.qkv.bias")]:
            mask = torch.ones(3 * dim)
            mask[dim : 2 * dim] = 0
            out[key + "_mask"] = mask
        out["norm.weight"] = torch.ones(dim) + torch.randn(dim, generator=gen) * 0.01
        out["norm.bias"] = torch.randn(dim, generator=gen) * 0.01
        if layout in HEAD_LAYOUTS:
            out.update(classifier_head(dim, gen))
    return _to_timm(out) if variant == "timm" else out


def refuse_own_periods(state: Mapping[str, Tensor], holder: str) -> None:
    """Raise ArchitectureError when a DINOv3 state dict in the hub's names holds `rope_embed.periods` (16,) other than
    the formula's (`dinov3.formula_periods`, compared in float32): `holder` (timm's DINOv3, Hugging Face's
    "DINOv3ViTModel") has no place for periods, and reading its file back gives the formula's."""
    import torch

    from evaluate.networks import dinov3

    periods = state.get(PERIODS)
    if periods is not None and not torch.equal(periods.float(), dinov3.formula_periods()):
        raise ArchitectureError(f"{holder} holds no periods: these differ from the formula's")


def refuse_key_bias(state: Mapping[str, Tensor], key: str, holder: str) -> None:
    """Raise ArchitectureError when the qkv bias `key` (3 D,) of a DINOv3 state dict in the hub's names has a key
    third [D, 2D) that its `bias_mask` (3 D,; none: 1) does not cancel: `holder` (timm's DINOv3, Hugging Face's
    "DINOv3ViTModel") has no key bias."""
    value = state[key]
    dim = value.shape[0] // 3
    mask = state.get(key + "_mask")
    key_bias = value[dim : 2 * dim] * (mask[dim : 2 * dim] if mask is not None else 1)
    if key_bias.abs().max() > 0:
        raise ArchitectureError(f"{holder} holds no key bias: {key} has one")


def _to_timm(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The hub's names as timm's: the inverse of `_from_timm`; refuses what timm cannot hold (periods other than
    the formula's, `refuse_own_periods`; a key bias the file's mask does not cancel, `refuse_key_bias`)."""
    holder = "timm's DINOv3"
    refuse_own_periods(state, holder)
    out: dict[str, Tensor] = {}
    for key, value in state.items():
        if key in (PERIODS, MASK_TOKEN) or key.endswith(".attn.qkv.bias_mask"):
            continue
        if key == STORAGE:
            out[TIMM_REGISTERS] = value
        elif key.endswith(".attn.qkv.bias"):
            refuse_key_bias(state, key, holder)
            dim = value.shape[0] // 3
            stem = key[: -len("qkv.bias")]
            out[stem + "q_bias"], out[stem + "v_bias"] = value[:dim].clone(), value[2 * dim :].clone()
        else:
            for new, old in TIMM_SWIGLU.items():
                key = key.replace(f".{old}", f".{new}", 1) if f".{old}" in key else key
            out[key] = value
    # LayerScale: the hub's `ls1/2.gamma` -> timm's `gamma_1/2`
    return renamed(out, {hub: timm for timm, hub in LAYERSCALE_TIMM.items()})


# ----------------------------------------------------------------------------------------------------- meta.json


def meta(spelling: str, model: Any, dropped: list[str]) -> dict[str, Any]:
    """What meta.json records of a DINOv3 network (DESIGN 14): its spelling ("hub", "timm", "hf", "teacher"), heads,
    feed-forward, storage tokens, where its periods came from ("file" / "formula") and the normalisation used
    (ImageNet's, also for the SAT-493M release, whose `local_cls_norm.*` gives it away)."""
    record = {"spelling": spelling, "heads": model.geometry.heads, "ffn": model.ffn,
              "storage_tokens": model.geometry.registers, "rope_periods": model.periods_source,
              "normalisation": "imagenet"}
    if any(key.startswith(UNUSED_NORMS[0]) for key in dropped):
        record["release_normalisation_not_used"] = f"SAT-493M: {SAT_MEAN_STD}"
    return record

