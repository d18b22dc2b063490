"""The backbone registry (docs/design.md §9), in the manner of timm's: architecture name -> everything about its kind.

| name                 | network | recognised by                               | variants (what the file says) | heads |
|----------------------|---------|---------------------------------------------|-------------------------------|-------|
| "vit-s16"            | `vit`   | `patch_embed.proj.weight`, no marker below  | "plain"                       | 6x64  |
| "vit-s16-layerscale" | `vit`   | `blocks.0.gamma_1` or `blocks.0.ls1.gamma`  | "gamma_1" (DeiT III, iBOT),   | 6x64  |
|                      |         |                                             | "ls1.gamma" (timm, DINOv2)    |       |
| "augvit-s16"         | `vit`   | `blocks.0.augs_attn*`                       | "circulant2", "linear",       | 6x64  |
|                      |         |                                             | "circulant", "linear2"        |       |
| "xcit-s12-16"        | `xcit`  | `blocks.0.attn.temperature`, `local_mp`, or | "official" (`pos_embeder.`),  | 8x48  |
|                      |         | `patch_embed.proj.0.0.weight`               | "timm" (`pos_embed.`)         |       |

A state dict here is the network's own flat dict, after the file format's wrapping is taken off
(`evaluate.networks.checkpoints`): it may still hold a class token, its position row, a final norm, XCiT's
class-attention blocks, Aug-ViT's stored index matrices and another naming. An entry (`Architecture`) holds how its
kind is recognised, its pure converters both ways (`evaluate.networks.forms`: to our backbone form, and back to the
full form a released file has), its network, the shapes it supports and the words for what was found instead, and the
buffers its network derives rather than loads. `materialise` loads a converted state dict strictly into the network.

Refused, with one line naming what was found and what is supported (`ArchitectureError`): CaiT proper (talking-heads
`attn.proj_l` / `attn.proj_w`, class-attention blocks `blocks_token_only.*`), XCiT with patch 8 (a conv stem of three
stages), and any other width, patch or depth (ViT-B, ViT-S/8, ...).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
from torch import Tensor, nn

from evaluate.networks import ARCHITECTURE_FIELDS, ArchitectureError, describe_keys, forms, vit, xcit
from evaluate.networks.forms import block_count

def _nothing_derived(model: nn.Module) -> None:
    """For networks whose buffers are all in their state dict."""


@dataclass(frozen=True)
class Architecture:
    """One entry of the registry: everything about one kind of network.

    name: the slug recorded in meta.json; title: for people; head_layout: "6x64" or "8x48"; variants: what
    `recognise` may return, the main one first (what a freshly built demo network is);
    recognise(state) -> variant or None;
    to_backbone(state, variant) -> (backbone state dict, dropped keys);
    full_form(backbone, variant, layout) -> the network's state dict as a released file holds it (`forms.LAYOUTS`);
    build(variant) -> the network (random initialisation);
    supported_shape(state) -> whether a converted state dict has the supported width, patch size and depth;
    describe(state) -> what an unsupported one is, in words ("ViT-B/16 (768 wide, 16 x 16 patches, 12 blocks)");
    derive_buffers(model) -> None: rebuild the buffers the network derives instead of loading (after a meta-device
    build they are empty);
    fixed_variant: what a variant is when the weights fix it (Aug-ViT's "mode"), or "" when the variants are namings
    of the same weights, so a file may be written in any of them;
    ddp_teacher: DINO wraps this network's teacher in DistributedDataParallel (it holds BatchNorm), so training
    checkpoints read `module.backbone.*`.
    """

    name: str
    title: str
    head_layout: str
    variants: tuple[str, ...]
    recognise: Callable[[Mapping[str, Any]], str | None]
    to_backbone: Callable[[Mapping[str, Any], str], tuple[dict[str, Any], list[str]]]
    full_form: Callable[[Mapping[str, Tensor], str, str], dict[str, Tensor]]
    build: Callable[[str], nn.Module]
    supported_shape: Callable[[Mapping[str, Any]], bool]
    describe: Callable[[Mapping[str, Any]], str]
    derive_buffers: Callable[[nn.Module], None] = _nothing_derived
    fixed_variant: str = ""
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
        """The architecture fields of meta.json (`ARCHITECTURE_FIELDS`)."""
        return dict(zip(ARCHITECTURE_FIELDS, (self.name, self.variant, self.head_layout), strict=True))


# ----------------------------------------------------------------------------------------------------- shapes


def _shape(state: Mapping[str, Any], key: str) -> tuple[int, ...] | None:
    value = state.get(key)
    return tuple(value.shape) if isinstance(value, Tensor) else None


def _stem_stages(state: Mapping[str, Any]) -> int:
    """The convolutions of XCiT's conv stem (`patch_embed.proj.{2 n}.0.weight`)."""
    return len([key for key in state if re.match(r"^patch_embed\.proj\.\d+\.0\.weight$", key)])


def _vit_supported_shape(state: Mapping[str, Any]) -> bool:
    patch = _shape(state, "patch_embed.proj.weight")
    return block_count(state) == vit.DEPTH and patch == (vit.EMBED_DIM, 3, vit.PATCH, vit.PATCH)


def _describe_vit(state: Mapping[str, Any]) -> str:
    width, _, patch, _ = ((_shape(state, "patch_embed.proj.weight") or ()) + (0, 0, 0, 0))[:4]
    size = {192: "ViT-Ti", 384: "ViT-S", 768: "ViT-B", 1024: "ViT-L", 1280: "ViT-H"}.get(width, "a ViT")
    return f"{size}/{patch} ({width} wide, {patch} x {patch} patches, {block_count(state)} blocks)"


def _xcit_supported_shape(state: Mapping[str, Any]) -> bool:
    qkv = _shape(state, "blocks.0.attn.qkv.weight")
    return (block_count(state) == xcit.DEPTH and _stem_stages(state) == len(xcit.STEM_WIDTHS)
            and qkv == (3 * xcit.EMBED_DIM, xcit.EMBED_DIM))


def _describe_xcit(state: Mapping[str, Any]) -> str:
    qkv = _shape(state, "blocks.0.attn.qkv.weight")
    width = qkv[1] if qkv and len(qkv) == 2 else "?"
    convs = _stem_stages(state)
    return f"XCiT with patch {2**convs} ({width} wide, a conv stem of {convs} stages, {block_count(state)} blocks)"


def _derive_circulant_indices(model: nn.Module) -> None:
    """Aug-ViT: every circulant projection's index matrix, from the formula (`vit.circulant_index_matrix`)."""
    for module in model.modules():
        if isinstance(module, vit.CirculantLinear):
            dim = module.bias.shape[0]
            module.index_matrix = vit.circulant_index_matrix(dim, module.weight_list.shape[0] // dim)


# ----------------------------------------------------------------------------------------------------- registry


REGISTRY: dict[str, Architecture] = {  # `identify` tries them in this order; the first that recognises the keys wins
    arch.name: arch
    for arch in (
        Architecture(
            "xcit-s12-16", "XCiT-S12/16", "8x48", ("official", "timm"),
            recognise=forms.recognise_xcit, to_backbone=forms.xcit_to_backbone, full_form=forms.xcit_full_form,
            build=lambda variant: xcit.xcit_small_12_p16(),
            supported_shape=_xcit_supported_shape, describe=_describe_xcit, ddp_teacher=True,
        ),
        Architecture(
            "augvit-s16", "Aug-ViT-S/16", "6x64", ("circulant2", *[m for m in vit.AUG_MODES if m != "circulant2"]),
            recognise=forms.recognise_augvit, to_backbone=forms.augvit_to_backbone, full_form=forms.augvit_full_form,
            build=vit.augvit_small,
            supported_shape=_vit_supported_shape, describe=_describe_vit, derive_buffers=_derive_circulant_indices,
            fixed_variant="mode",
        ),
        Architecture(
            "vit-s16-layerscale", "ViT-S/16 with LayerScale", "6x64", ("gamma_1", "ls1.gamma"),
            recognise=forms.recognise_layerscale, to_backbone=forms.layerscale_to_backbone,
            full_form=forms.layerscale_full_form, build=lambda variant: vit.vit_small_layerscale(),
            supported_shape=_vit_supported_shape, describe=_describe_vit,
        ),
        Architecture(
            "vit-s16", "ViT-S/16", "6x64", ("plain",),
            recognise=forms.recognise_plain, to_backbone=forms.plain_to_backbone, full_form=forms.plain_full_form,
            build=lambda variant: vit.vit_small(),
            supported_shape=_vit_supported_shape, describe=_describe_vit,
        ),
    )
}
ARCHITECTURES = tuple(REGISTRY)
_TITLES = [f"{arch.title} ({', '.join(arch.variants)})" for arch in reversed(REGISTRY.values())]
SUPPORTED = (  # what every refusal ends with
    f"supported: {', '.join(_TITLES[:-1])} and {_TITLES[-1]}, each with {vit.DEPTH} blocks, {vit.EMBED_DIM} wide, "
    f"{vit.PATCH} x {vit.PATCH} patches"
)


def _refuse_unsupported(state: Mapping[str, Any]) -> None:
    """Raise ArchitectureError for the refused architectures that markers alone give away (CaiT)."""
    markers = re.compile(r"attn\.proj_[lw]\.|blocks_token_only\.")
    cait = sorted({m.group(0) for key in state if (m := markers.search(key))})
    if cait:
        raise ArchitectureError(
            f"found CaiT ({', '.join(m + '*' for m in cait)}: talking-heads attention and class-attention blocks; "
            f"{block_count(state)} blocks), which is not supported; {SUPPORTED}"
        )


def identify(state: Mapping[str, Any]) -> Identified:
    """The registry entry and variant of a network's flat state dict, from its keys and shapes alone.

    Raises ArchitectureError for CaiT and for a dict none of the entries recognises. Width, patch and depth are
    checked later, against the built network (`materialise`), so a refusal can list the offending tensors.
    """
    _refuse_unsupported(state)
    for arch in REGISTRY.values():
        variant = arch.recognise(state)
        if variant is not None:
            return Identified(arch, variant)
    raise ArchitectureError(
        f"no known architecture in these weights (keys: {describe_keys([str(k) for k in state])}); {SUPPORTED}"
    )


def convert(state: Mapping[str, Any]) -> tuple[Identified, dict[str, Any], list[str]]:
    """(what it is, backbone state dict, dropped keys) of a network's flat state dict (pure)."""
    identified = identify(state)
    weights, dropped = identified.architecture.to_backbone(state, identified.variant)
    return identified, weights, dropped


def build(identified: Identified) -> nn.Module:
    """The network of an identified state dict, randomly initialised."""
    return identified.architecture.build(identified.variant)


# ----------------------------------------------------------------------------------------------------- strict loading


def check_state(state: Mapping[str, Any], model: nn.Module, title: str) -> None:
    """Raise ArchitectureError unless `state` has exactly `model`'s keys, shapes, dtypes and finite values.

    Integer buffers (BatchNorm's `num_batches_tracked`) must be integers, every other tensor a float; `title` names
    the network in the message. Up to `evaluate.networks.SHOW_KEYS` offending keys are named, the rest counted.
    """
    expected = model.state_dict()
    problems = []
    missing = [key for key in expected if key not in state]
    unexpected = [key for key in state if key not in expected]
    if missing:
        problems.append(f"{len(missing)} missing backbone keys: {describe_keys(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected keys: {describe_keys(unexpected)}")
    not_tensor = [key for key in expected if key in state and not isinstance(state[key], Tensor)]
    if not_tensor:
        problems.append(f"not tensors: {describe_keys(not_tensor)}")
    shapes = [
        f"{key} {tuple(state[key].shape)} (expected {tuple(value.shape)})"
        for key, value in expected.items()
        if isinstance(state.get(key), Tensor) and state[key].shape != value.shape
    ]
    if shapes:
        problems.append(
            f"{len(shapes)} wrong shapes, not a {title} ({vit.EMBED_DIM} wide, {vit.PATCH} x {vit.PATCH} patches): "
            f"{describe_keys(shapes)}"
        )
    if problems:
        raise ArchitectureError("; ".join(problems))
    floats = [key for key, value in expected.items() if value.is_floating_point()]
    not_float = [key for key in floats if not state[key].is_floating_point()]
    not_int = [key for key in expected if key not in floats and state[key].is_floating_point()]
    if not_float:
        problems.append(f"non-float tensors: {describe_keys([f'{k} ({state[k].dtype})' for k in not_float])}")
    if not_int:
        problems.append(f"non-integer counters: {describe_keys([f'{k} ({state[k].dtype})' for k in not_int])}")
    if not problems:
        # a float64 sum is finite exactly when every element is (finite float32/16 values cannot overflow it)
        bad = [key for key in floats if not math.isfinite(state[key].sum(dtype=torch.float64).item())]
        if bad:
            problems.append(f"NaN or infinite weights in {len(bad)} tensors: {describe_keys(bad)}")
    if problems:
        raise ArchitectureError("; ".join(problems))


def materialise(identified: Identified, weights: Mapping[str, Any]) -> nn.Module:
    """The identified network holding exactly `weights` (a backbone-form state dict): eval mode, float32, CPU.

    The network is built on PyTorch's `meta` device (shapes only: no random initialisation computed and thrown
    away), checked strictly (`check_state`), loaded by assignment, and its derived buffers rebuilt. Raises
    ArchitectureError; when the width, patch size or depth is not the registry's, the message starts with what was
    found ("found ViT-B/16 (...), which is not supported (supported: ...); ...").
    """
    arch = identified.architecture
    with torch.device("meta"):
        model = build(identified)
    try:
        check_state(weights, model, arch.title)
    except ArchitectureError as exc:
        if arch.supported_shape(weights):
            raise
        found = arch.describe(weights)
        raise ArchitectureError(f"found {found}, which is not supported ({SUPPORTED}); {exc}") from None
    model.load_state_dict(
        {key: value.to(torch.float32).contiguous() if value.is_floating_point() else value.contiguous()
         for key, value in weights.items()},
        strict=True, assign=True,
    )
    arch.derive_buffers(model)
    return model.eval()


# ----------------------------------------------------------------------------------------------------- writing


def full_form(backbone: Mapping[str, Tensor], variant: str | None = None, layout: str = "dino") -> dict[str, Tensor]:
    """A backbone-form state dict in the network's full form (`forms.LAYOUTS`), for writing files.

    variant: the naming to write ("ls1.gamma" for timm's LayerScale names, "timm" for timm's XCiT names); default
    the backbone's own. A variant the weights fix (Aug-ViT's mode) cannot be changed.
    """
    if layout not in forms.LAYOUTS:
        raise ArchitectureError(f"unknown layout {layout!r}; known: {', '.join(forms.LAYOUTS)}")
    identified = identify(backbone)
    arch = identified.architecture
    variant = identified.variant if variant is None else variant
    if variant not in arch.variants:
        raise ArchitectureError(f"{arch.title} has no variant {variant!r}; known: {', '.join(arch.variants)}")
    if arch.fixed_variant and variant != identified.variant:
        raise ArchitectureError(
            f"{arch.title}: the {arch.fixed_variant} is fixed by the weights ({identified.variant}), not {variant!r}"
        )
    return arch.full_form(backbone, variant, layout)
