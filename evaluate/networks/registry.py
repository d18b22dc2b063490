"""The backbone registry (docs/design.md §9), in the manner of timm's: architecture name -> how it is recognised from a
state dict's keys and shapes, its converters, its network.

| name                 | family module        | recognised by                                  | variants (what the file says)   | heads  |
|----------------------|----------------------|------------------------------------------------|---------------------------------|--------|
| "vit-s16"            | evaluate.networks.vit    | `patch_embed.proj.weight`, no marker below     | "plain"                         | 6 x 64 |
| "vit-s16-layerscale" | evaluate.networks.vit    | `blocks.0.gamma_1` or `blocks.0.ls1.gamma`     | "gamma_1" (DeiT III, iBOT),     | 6 x 64 |
|                      |                      |                                                | "ls1.gamma" (timm, DINOv2)      |        |
| "augvit-s16"         | evaluate.networks.vit    | `blocks.0.augs_attn*`                          | "linear", "circulant",          | 6 x 64 |
|                      |                      |                                                | "linear2", "circulant2"         |        |
| "xcit-s12-16"        | evaluate.networks.xcit        | `blocks.0.attn.temperature`, `local_mp`, or    | "official" (`pos_embeder.`),    | 8 x 48 |
|                      |                      | `patch_embed.proj.0.0.weight`                  | "timm" (`pos_embed.`)           |        |

A state dict here is the network's own flat dict, after the file format's wrapping is taken off
(`evaluate.networks.checkpoints`): it may still hold a class token, its position row, a final norm, XCiT's class-attention
blocks, Aug-ViT's stored index matrices and another naming. Each architecture has one small pure converter to our
backbone form (`to_backbone`, the names its network's `state_dict()` has) and one back to the full DINO-style form
(`full_form`, for writing seeded files in the real formats).

Refused, with one line naming what was found and what is supported (`ArchitectureError`): CaiT proper (talking-heads
`attn.proj_l` / `attn.proj_w`, class-attention blocks `blocks_token_only.*`), XCiT with patch 8 (a conv stem of three
stages), and any other width, patch or depth (ViT-B, ViT-S/8, ...); `describe` words what was found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
from torch import Tensor, nn

from evaluate import EvaluationError
from evaluate.networks.vit import AUG_BLOCKS, AUG_MODES, augvit_small, circulant_index_matrix, vit_small, vit_small_layerscale
from evaluate.networks import vit
from evaluate.networks import xcit

SUPPORTED = (
    "supported: ViT-S/16 (plain; LayerScale named gamma_1 or ls1.gamma; Aug-ViT linear, circulant, linear2 or "
    "circulant2) and XCiT-S12/16, each with 12 blocks, 384 wide, 16 x 16 patches"
)
CLASS_EXTRAS = ("cls_token", "norm.weight", "norm.bias")  # what the class-token-free backbone form leaves out
SHOW_KEYS = 5
_BLOCK = re.compile(r"^blocks\.(\d+)\.")
# LayerScale names: ours (DeiT III's) -> timm's
LAYERSCALE_TIMM = {"gamma_1": "ls1.gamma", "gamma_2": "ls2.gamma"}
AUG_SHORTCUTS = ("augs_attn", "augs_attn2", "augs", "augs2")
XCIT_TIMM_POS = ("pos_embed.", "pos_embeder.")  # timm's prefix of the token projection, the authors'


class ArchitectureError(EvaluationError):
    """A state dict of an architecture that is not supported, or whose keys contradict each other."""


@dataclass(frozen=True)
class Architecture:
    """One entry of the registry.

    name: the slug recorded in meta.json; title: for people; head_layout: "6x64" or "8x48"; variants: what
    `recognise` may return, the main one first (what a freshly built demo network is); recognise(state) -> variant or None; to_backbone(state, variant) -> (backbone state
    dict, dropped keys); full_form(backbone, variant, layout) -> the network's full state dict for writing a file
    (layout "dino": class token, a class row in a 197-row table where there is a table, final norm (XCiT: and its two
    class-attention blocks); "deit3": class token, the 196-row table unchanged, final norm and a 1000-class head;
    "backbone": nothing added), in the variant's naming (Aug-ViT: with its stored index matrices, as the authors'
    code saves them);
    build(variant) -> the network (random initialisation); ddp_teacher: DINO wraps this network's teacher in
    DistributedDataParallel (it holds BatchNorm), so training checkpoints read `module.backbone.*`.
    """

    name: str
    title: str
    head_layout: str
    variants: tuple[str, ...]
    recognise: Callable[[Mapping[str, Any]], str | None]
    to_backbone: Callable[[Mapping[str, Any], str], tuple[dict[str, Any], list[str]]]
    full_form: Callable[[Mapping[str, Tensor], str, str], dict[str, Tensor]]
    build: Callable[[str], nn.Module]
    ddp_teacher: bool = False


@dataclass(frozen=True)
class Identified:
    """What a state dict holds: its registry entry and variant."""

    architecture: Architecture
    variant: str

    @property
    def name(self) -> str:
        return self.architecture.name

    @property
    def head_layout(self) -> str:
        return self.architecture.head_layout

    def as_meta(self) -> dict[str, str]:
        """The architecture fields of meta.json."""
        return {"architecture": self.name, "architecture_variant": self.variant, "head_layout": self.head_layout}


# ----------------------------------------------------------------------------------------------------- helpers


def _describe_keys(keys) -> str:
    keys = sorted(keys)
    more = len(keys) - SHOW_KEYS
    return ", ".join(keys[:SHOW_KEYS]) + (f" and {more} more" if more > 0 else "")


def block_count(state: Mapping[str, Any], prefix: str = "blocks.") -> int:
    """1 + the largest i of the `{prefix}{i}.` keys (0 when there are none)."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)\.")
    found = [int(m.group(1)) for key in state if (m := pattern.match(key))]
    return max(found) + 1 if found else 0


def _shape(state: Mapping[str, Any], key: str) -> tuple[int, ...] | None:
    value = state.get(key)
    return tuple(value.shape) if isinstance(value, Tensor) else None


def _drop(state: Mapping[str, Any], drop: Callable[[str], bool]) -> tuple[dict[str, Any], list[str]]:
    kept = {key: value for key, value in state.items() if not drop(key)}
    return kept, sorted(key for key in state if drop(key))


def _is_class_row_table(rows: int) -> bool:
    """A position table of 1 + g^2 rows holds a class position in row 0 (DINO form); g^2 rows has none (DeiT III
    and backbone form)."""
    grid = round((rows - 1) ** 0.5)
    return rows > 1 and grid * grid == rows - 1 and round(rows**0.5) ** 2 != rows


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------------------------------- ViT family


def _vit_extras_dropped(state: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Class token, final norm and (iBOT's) masked_embed out; row 0 of a 1 + g^2-row table out."""
    taken, dropped = _drop(state, lambda key: key in CLASS_EXTRAS or key == "masked_embed")
    pos = taken.get("pos_embed")
    if isinstance(pos, Tensor) and pos.ndim == 3 and _is_class_row_table(pos.shape[1]):
        taken["pos_embed"] = pos[:, 1:]
        dropped.append("pos_embed[0]")
    return taken, dropped


def _vit_full_form(backbone: Mapping[str, Tensor], layout: str) -> dict[str, Tensor]:
    """A ViT backbone with a class token, final norm and (layout "dino") a class row in the table, or (layout
    "deit3") the table unchanged and a 1000-class head; the extra weights are seeded (1)."""
    out = dict(backbone)
    if layout == "backbone":
        return out
    dim = backbone["pos_embed"].shape[-1]
    gen = _gen(1)
    out["cls_token"] = torch.randn(1, 1, dim, generator=gen) * 0.02
    cls_pos = torch.randn(1, 1, dim, generator=gen) * 0.02
    if layout == "dino":
        out["pos_embed"] = torch.cat([cls_pos, backbone["pos_embed"]], dim=1)
    out["norm.weight"] = torch.ones(dim) + torch.randn(dim, generator=gen) * 0.01
    out["norm.bias"] = torch.randn(dim, generator=gen) * 0.01
    if layout == "deit3":
        out["head.weight"] = torch.randn(1000, dim, generator=gen) * 0.02
        out["head.bias"] = torch.zeros(1000)
    return out


def _recognise_plain(state: Mapping[str, Any]) -> str | None:
    return "plain" if "patch_embed.proj.weight" in state else None


def _plain_to_backbone(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    return _vit_extras_dropped(state)


def _recognise_layerscale(state: Mapping[str, Any]) -> str | None:
    ours = any(key.endswith((".gamma_1", ".gamma_2")) for key in state if key.startswith("blocks."))
    timm = any(key.endswith((".ls1.gamma", ".ls2.gamma")) for key in state if key.startswith("blocks."))
    if ours and timm:
        raise ArchitectureError("LayerScale weights under both names, gamma_1/gamma_2 and ls1.gamma/ls2.gamma")
    return "gamma_1" if ours else "ls1.gamma" if timm else None


def _layerscale_to_backbone(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    """LayerScale: timm's `blocks.{i}.ls1.gamma` / `ls2.gamma` renamed to `gamma_1` / `gamma_2`, then as plain."""
    renamed = dict(state)
    if variant == "ls1.gamma":
        renamed = {}
        for key, value in state.items():
            for ours, timm in LAYERSCALE_TIMM.items():
                if key.startswith("blocks.") and key.endswith("." + timm):
                    key = key[: -len(timm)] + ours
            renamed[key] = value
    return _vit_extras_dropped(renamed)


def _layerscale_full_form(backbone: Mapping[str, Tensor], variant: str, layout: str) -> dict[str, Tensor]:
    out = _vit_full_form(backbone, layout)
    if variant == "ls1.gamma":
        renamed = {}
        for key, value in out.items():
            for ours, timm in LAYERSCALE_TIMM.items():
                if key.startswith("blocks.") and key.endswith("." + ours):
                    key = key[: -len(ours)] + timm
            renamed[key] = value
        out = renamed
    return out


def _recognise_augvit(state: Mapping[str, Any]) -> str | None:
    keys = [key for key in state if key.startswith("blocks.0.augs")]
    if not keys:
        return None
    two = any(key.startswith("blocks.0.augs_attn2.") for key in keys)
    circulant = any(key.endswith(".weight_list") for key in keys)
    return ("circulant" if circulant else "linear") + ("2" if two else "")


def aug_index_keys(state: Mapping[str, Any]) -> list[str]:
    """The stored `index_matrix` buffers of an Aug-ViT state dict."""
    return sorted(key for key in state if key.startswith("blocks.") and key.endswith(".index_matrix")
                  and any(f".{name}." in key for name in AUG_SHORTCUTS))


def _augvit_to_backbone(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    """Aug-ViT: each stored `index_matrix` must equal the formula (`circulant_index_matrix`) and is then dropped
    (the network derives it); a file without them loads. Then as plain."""
    expected = circulant_index_matrix(vit.EMBED_DIM, AUG_BLOCKS)
    bad = []
    for key in aug_index_keys(state):
        value = state[key]
        if not isinstance(value, Tensor) or value.shape != expected.shape or not torch.equal(value.long(), expected):
            bad.append(key)
    if bad:
        raise ArchitectureError(
            f"Aug-ViT {variant}: {len(bad)} stored index matrices differ from the block-circulant formula "
            f"(W[96 I + r, 96 J + c] = weight_list[(4 I + J) 96 + (r - c) mod 96]): {_describe_keys(bad)}"
        )
    taken, dropped = _drop(state, lambda key: key in set(aug_index_keys(state)))
    taken, more = _vit_extras_dropped(taken)
    return taken, dropped + more


def _augvit_full_form(backbone: Mapping[str, Tensor], variant: str, layout: str) -> dict[str, Tensor]:
    """As the authors' code saves it: with every circulant projection's `index_matrix` (384, 384) int64."""
    out = _vit_full_form(backbone, layout)
    for key in list(out):
        if key.startswith("blocks.") and key.endswith(".weight_list"):
            out[key[: -len("weight_list")] + "index_matrix"] = circulant_index_matrix(vit.EMBED_DIM, AUG_BLOCKS)
    return out


# ----------------------------------------------------------------------------------------------------- XCiT


def _recognise_xcit(state: Mapping[str, Any]) -> str | None:
    markers = ("blocks.0.attn.temperature", "blocks.0.local_mp.conv1.weight", "patch_embed.proj.0.0.weight")
    if not any(marker in state for marker in markers):
        return None
    return "timm" if any(key.startswith(XCIT_TIMM_POS[0]) for key in state) else "official"


def _xcit_to_backbone(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    """XCiT: class token, the class-attention blocks and the final norm out (none of them reaches block 12); timm's
    `pos_embed.` renamed to `pos_embeder.`; a BatchNorm without `num_batches_tracked` gets 0 (unused in eval)."""
    taken, dropped = _drop(state, lambda key: key in CLASS_EXTRAS or key.startswith("cls_attn_blocks."))
    if variant == "timm":
        old, new = XCIT_TIMM_POS
        taken = {(new + key[len(old):] if key.startswith(old) else key): value for key, value in taken.items()}
    for key in [k for k in taken if k.endswith(".running_var")]:
        counter = key[: -len("running_var")] + "num_batches_tracked"
        taken.setdefault(counter, torch.tensor(0, dtype=torch.long))
    return taken, dropped


def _xcit_class_attention(dim: int, gen: torch.Generator, variant: str) -> dict[str, Tensor]:
    """Two seeded class-attention blocks as the authors' code names them (timm splits qkv into q, k, v)."""
    out: dict[str, Tensor] = {}
    for j in range(2):
        p = f"cls_attn_blocks.{j}."
        out[p + "gamma1"] = torch.ones(dim)
        out[p + "gamma2"] = torch.ones(dim)
        for norm in ("norm1", "norm2"):
            out[p + norm + ".weight"] = torch.ones(dim)
            out[p + norm + ".bias"] = torch.zeros(dim)
        qkv = torch.randn(3 * dim, dim, generator=gen) * 0.02
        if variant == "timm":
            for i, part in enumerate("qkv"):
                out[p + f"attn.{part}.weight"] = qkv[i * dim : (i + 1) * dim].clone()
                out[p + f"attn.{part}.bias"] = torch.zeros(dim)
        else:
            out[p + "attn.qkv.weight"] = qkv
            out[p + "attn.qkv.bias"] = torch.zeros(3 * dim)
        out[p + "attn.proj.weight"] = torch.randn(dim, dim, generator=gen) * 0.02
        out[p + "attn.proj.bias"] = torch.zeros(dim)
        out[p + "mlp.fc1.weight"] = torch.randn(4 * dim, dim, generator=gen) * 0.02
        out[p + "mlp.fc1.bias"] = torch.zeros(4 * dim)
        out[p + "mlp.fc2.weight"] = torch.randn(dim, 4 * dim, generator=gen) * 0.02
        out[p + "mlp.fc2.bias"] = torch.zeros(dim)
    return out


def _xcit_full_form(backbone: Mapping[str, Tensor], variant: str, layout: str) -> dict[str, Tensor]:
    """XCiT as DINO released it: class token, two class-attention blocks, final norm (seeded, 1); timm naming on
    request. There is no position table, so the layout does not change it."""
    dim = backbone["pos_embeder.token_projection.bias"].shape[0]
    gen = _gen(1)
    out = dict(backbone)
    if variant == "timm":
        old, new = XCIT_TIMM_POS
        out = {(old + key[len(new):] if key.startswith(new) else key): value for key, value in out.items()}
    if layout == "backbone":
        return out
    out["cls_token"] = torch.randn(1, 1, dim, generator=gen) * 0.02
    out.update(_xcit_class_attention(dim, gen, variant))
    out["norm.weight"] = torch.ones(dim)
    out["norm.bias"] = torch.zeros(dim)
    if layout == "deit3":
        out["head.weight"] = torch.randn(1000, dim, generator=gen) * 0.02
        out["head.bias"] = torch.zeros(1000)
    return out


# ----------------------------------------------------------------------------------------------------- registry


REGISTRY: dict[str, Architecture] = {
    arch.name: arch
    for arch in (
        Architecture(
            "xcit-s12-16", "XCiT-S12/16", "8x48", ("official", "timm"), _recognise_xcit, _xcit_to_backbone,
            _xcit_full_form, lambda variant: xcit.xcit_small_12_p16(), ddp_teacher=True,
        ),
        Architecture(
            "augvit-s16", "Aug-ViT-S/16", "6x64", ("circulant2", *[m for m in AUG_MODES if m != "circulant2"]),
            _recognise_augvit, _augvit_to_backbone,
            _augvit_full_form, augvit_small,
        ),
        Architecture(
            "vit-s16-layerscale", "ViT-S/16 with LayerScale", "6x64", ("gamma_1", "ls1.gamma"),
            _recognise_layerscale, _layerscale_to_backbone, _layerscale_full_form,
            lambda variant: vit_small_layerscale(),
        ),
        Architecture(
            "vit-s16", "ViT-S/16", "6x64", ("plain",), _recognise_plain, _plain_to_backbone,
            lambda backbone, variant, layout: _vit_full_form(backbone, layout), lambda variant: vit_small(),
        ),
    )
}
ARCHITECTURES = tuple(REGISTRY)


def _refuse_unsupported(state: Mapping[str, Any]) -> None:
    """Raise ArchitectureError for the refused architectures that markers alone give away (CaiT, XCiT patch 8)."""
    cait = sorted({m.group(0) for key in state for m in [re.search(r"attn\.proj_[lw]\.|blocks_token_only\.", key)] if m})
    if cait:
        raise ArchitectureError(
            f"found CaiT ({', '.join(m + '*' for m in cait)}: talking-heads attention and class-attention blocks; "
            f"{block_count(state)} blocks), which is not supported; {SUPPORTED}"
        )


def describe(state: Mapping[str, Any]) -> str:
    """What a network's state dict looks like, in words: family, width, patch size, depth (for refusals)."""
    depth = block_count(state)
    if "patch_embed.proj.weight" in state and _shape(state, "patch_embed.proj.weight") is not None:
        width, _, patch, _ = (_shape(state, "patch_embed.proj.weight") + (0, 0, 0, 0))[:4]
        size = {192: "ViT-Ti", 384: "ViT-S", 768: "ViT-B", 1024: "ViT-L", 1280: "ViT-H"}.get(width, "a ViT")
        return f"{size}/{patch} ({width} wide, {patch} x {patch} patches, {depth} blocks)"
    qkv = _shape(state, "blocks.0.attn.qkv.weight")
    width = qkv[1] if qkv and len(qkv) == 2 else "?"
    convs = len([key for key in state if re.match(r"^patch_embed\.proj\.\d+\.0\.weight$", key)])
    patch = 2**convs
    return f"XCiT with patch {patch} ({width} wide, a conv stem of {convs} stages, {depth} blocks)"


def identify(state: Mapping[str, Any]) -> Identified:
    """The registry entry and variant of a network's flat state dict, from its keys and shapes alone.

    Raises ArchitectureError for CaiT and for a dict none of the entries recognises. Width, patch and depth are
    checked later, against the built network (`check_supported`), so a refusal can list the offending tensors.
    """
    _refuse_unsupported(state)
    for arch in REGISTRY.values():
        variant = arch.recognise(state)
        if variant is not None:
            return Identified(arch, variant)
    raise ArchitectureError(
        f"no known architecture in these weights (keys: {_describe_keys([str(k) for k in state])}); {SUPPORTED}"
    )


def supported_shape(state: Mapping[str, Any], identified: Identified) -> bool:
    """Whether the state dict has the registry's width, patch size and depth (before the strict key check)."""
    if block_count(state) != vit.DEPTH:
        return False
    if identified.name == "xcit-s12-16":
        convs = len([key for key in state if re.match(r"^patch_embed\.proj\.\d+\.0\.weight$", key)])
        qkv = _shape(state, "blocks.0.attn.qkv.weight")
        return convs == len(xcit.STEM_WIDTHS) and qkv == (3 * xcit.EMBED_DIM, xcit.EMBED_DIM)
    return _shape(state, "patch_embed.proj.weight") == (vit.EMBED_DIM, 3, vit.PATCH, vit.PATCH)


def convert(state: Mapping[str, Any]) -> tuple[Identified, dict[str, Any], list[str]]:
    """(what it is, backbone state dict, dropped keys) of a network's flat state dict (pure)."""
    identified = identify(state)
    weights, dropped = identified.architecture.to_backbone(state, identified.variant)
    return identified, weights, dropped


def build(identified: Identified) -> nn.Module:
    """The network of an identified state dict, randomly initialised."""
    return identified.architecture.build(identified.variant)


LAYOUTS = ("dino", "deit3", "backbone")


def full_form(backbone: Mapping[str, Tensor], variant: str | None = None, layout: str = "dino") -> dict[str, Tensor]:
    """A backbone-form state dict in the network's full form (see `Architecture`), for writing files.

    variant: the naming to write ("ls1.gamma" for timm's LayerScale names, "timm" for timm's XCiT names); default
    the backbone's own (Aug-ViT's mode is fixed by its keys).
    """
    if layout not in LAYOUTS:
        raise ArchitectureError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    identified = identify(backbone)
    arch = identified.architecture
    variant = identified.variant if variant is None else variant
    if variant not in arch.variants:
        raise ArchitectureError(f"{arch.title} has no variant {variant!r}; known: {', '.join(arch.variants)}")
    if arch.name == "augvit-s16" and variant != identified.variant:
        raise ArchitectureError(f"an Aug-ViT's mode is its weights' ({identified.variant}), not {variant!r}")
    return arch.full_form(backbone, variant, layout)
