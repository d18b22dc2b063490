"""The backbone registry (docs/design.md §9, §11), in the manner of timm's: architecture name -> everything about its kind.

| name                 | network | recognised by (keys and shapes)                      | variants (what the file says)  |
|----------------------|---------|------------------------------------------------------|--------------------------------|
| "vit-s16", "vit-s8", | `vit`   | `patch_embed.proj.weight` (D, 3, p, p), no marker    | "plain"                        |
| "vit-b16", "vit-b8"  |         | below: DINO v1, 12 blocks, D 384 (S) or 768 (B)      |                                |
| "vit-s16-layerscale" | `vit`   | `blocks.0.gamma_1` or `blocks.0.ls1.gamma`, patch 16 | "gamma_1" (DeiT III, iBOT),    |
|                      |         |                                                      | "ls1.gamma" (timm)             |
| "augvit-s16"         | `vit`   | `blocks.0.augs_attn*`                                | "circulant2", "linear",        |
|                      |         |                                                      | "circulant", "linear2"         |
| "xcit-s12-16"        | `xcit`  | `blocks.0.attn.temperature`, `local_mp`, or          | "official" (`pos_embeder.`),   |
|                      |         | `patch_embed.proj.0.0.weight`                        | "timm" (`pos_embed.`)          |
| "dinov2-{s,b,l}14",  | `vit`   | patch 14 with `ls1.gamma` (blocks chunked or not);   | "dinov2" (hub, training),      |
| "dinov2-{s,b,l}14-   |         | D 384 / 768 / 1024 (12 / 12 / 24 blocks); 0 or 4     | "timm" (`reg_token`, class row |
| reg4"                |         | registers (`register_tokens`, timm's `reg_token`)    | folded into `cls_token`)       |
| "dinov3-{s16,        | `dinov3`| no position table, LayerScale, a DINOv3 marker       | "hub" (hub, training teacher,  |
| s16plus, b16, l16,   |         | (`storage_tokens`, `rope_embed.periods`, `bias_mask`;| Hugging Face's once read),     |
| h16plus}"            |         | timm's `reg_token`, `q_bias`, `fc1_g`); D and FFN    | "timm" (`reg_token`, `gamma_1`)|

Heads are D / 64 (XCiT: 8 x 48). A state dict here is the network's own flat dict, after the file format's wrapping is
taken off (`evaluate.networks.checkpoints`). An entry (`Architecture`) holds how its kind is recognised, its pure
converters both ways (`evaluate.networks.forms`: to the released form in our layout, and back to the full form a
released file has), its geometry (patch, width, depth, registers), the grid its position table is stored for, its
position rule, its network, and the words for what was found instead. `convert` gives the state dict of either form
(docs/design.md §11; `forms.backbone_of` takes the class token, registers and final norm out), and `materialise`
loads it strictly into a network built for it.

DINOv3's entries (`RopeArchitecture`, docs/design.md §14) read the depth from the file (recorded, not checked), build
`evaluate.networks.dinov3.DinoV3ViT` for what the weights hold (class token, storage tokens, final norm, periods from
the file or the formula) and have no position table to resample (their position rule is "rope").

Refused, with one line naming what was found and what is supported (`ArchitectureError`): CaiT proper (talking-heads
`attn.proj_l` / `attn.proj_w`, class-attention blocks `blocks_token_only.*`), the DINOv2 giant (SwiGLU `mlp.w12` /
`mlp.w3`), XCiT with patch 8 (a conv stem of three stages), DINOv3's ViT-7B and ConvNeXts
(`evaluate.networks.dinov3_forms.refusal`), and any other width, patch or depth.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from evaluate.networks import (ARCHITECTURE_FIELDS, AUG_MODES, FORMS, ArchitectureError, describe_keys, dinov3_forms,
                               forms, is_tensor)
from evaluate.networks.forms import block_count
from evaluate.pixels.geometry import SEED, Geometry

if TYPE_CHECKING:  # torch and the networks are imported where a network is built or a weight read: the workflow's
    from torch import Tensor, nn  # own process names the architectures (config checks) without paying for them


def _nothing_derived(model: nn.Module) -> None:
    """For networks whose buffers are all in their state dict."""


@dataclass(frozen=True)
class Architecture:
    """One entry of the registry: everything about one kind of network.

    name: the slug recorded in meta.json; title: for people; head_layout: "6x64", "12x64", "16x64" or "8x48";
    variants: what `recognise` may return, the main one first (what a freshly built demo network is);
    geometry: patch, width, depth and registers (`evaluate.pixels.geometry.Geometry`);
    pos_grid: the grid the position table of a freshly built network is for (a loaded one's is read from its rows);
    recognise(state) -> variant or None;
    to_released(state, variant) -> (the released form in our layout, dropped keys) (`forms`);
    full_form(backbone, variant, layout) -> the network's state dict as a released file holds it (`forms.LAYOUTS`);
    block: the block kind of `vit.vision_transformer` ("plain", "layerscale", "aug"), or "" for XCiT;
    supported_shape(state) -> whether a converted state dict has the supported width, patch size and depth;
    describe(state) -> what an unsupported one is, in words ("ViT-L/16 (1024 wide, 16 x 16 patches, 24 blocks)");
    derive_buffers(model) -> None: rebuild the buffers the network derives instead of loading (after a meta-device
    build they are empty);
    fixed_variant: what a variant is when the weights fix it (Aug-ViT's "mode"), or "" when the variants are namings
    of the same weights, so a file may be written in any of them;
    ddp_teacher: DINO wraps this network's teacher in DistributedDataParallel (it holds BatchNorm), so training
    checkpoints read `module.backbone.*`;
    released_rule: the position rule of its released files (DINOv2's hub register models: "antialias"); training
    files always use DINO's ("dino", DINOv2's training defaults too).
    """

    name: str
    title: str
    head_layout: str
    variants: tuple[str, ...]
    geometry: Geometry
    pos_grid: int
    recognise: Callable[[Mapping[str, Any]], str | None]
    to_released: Callable[[Mapping[str, Any], str], tuple[dict[str, Any], list[str]]]
    full_form: Callable[[Mapping[str, Tensor], str, str], dict[str, Tensor]]
    block: str
    describe: Callable[[Mapping[str, Any]], str]
    derive_buffers: Callable[[nn.Module], None] = _nothing_derived
    fixed_variant: str = ""
    ddp_teacher: bool = False
    released_rule: str = "dino"

    def supported_shape(self, state: Mapping[str, Any]) -> bool:
        """Whether a converted state dict has this entry's width, patch size and depth."""
        if not self.block:
            return _xcit_supported_shape(state)
        g = self.geometry
        return block_count(state) == g.depth and _shape(state, "patch_embed.proj.weight") == (g.width, 3, g.patch, g.patch)

    def default_position_rule(self, training: bool) -> str:
        """The position rule a file of this kind was built with, when its checkpoint entry does not say."""
        return "dino" if training else self.released_rule

    def build(self, variant: str, *, pos_grid: int | None = None, class_token: bool = False, registers: int = 0,
              final_norm: bool = False, position_rule: str = "dino") -> nn.Module:
        """The network (random initialisation), in the backbone form unless the released form's parts are asked for."""
        from evaluate.networks import vit, xcit

        if not self.block:
            return xcit.xcit_small_12_p16()
        model = vit.vision_transformer(
            self.geometry, self.block, aug_mode=variant, pos_grid=self.pos_grid if pos_grid is None else pos_grid,
            class_token=class_token, registers=registers, final_norm=final_norm, position_rule=position_rule)
        model.geometry = self.geometry  # the checkpoint's registers, whichever form runs
        return model

    def network_for(self, variant: str, weights: Mapping[str, Any], position_rule: str = "dino") -> nn.Module:
        """The network that holds exactly `weights` (either form, in our layout): its class token, registers and
        final norm where `weights` has them, its position table for the grid the stored rows say."""
        class_token = "cls_token" in weights
        pos = weights.get("pos_embed")
        rows = pos.shape[1] - int(class_token) if is_tensor(pos) and pos.ndim == 3 else 0
        grid = math.isqrt(max(rows, 0))
        registers = weights.get("register_tokens")
        return self.build(
            variant, pos_grid=grid if grid * grid == rows and grid else None, class_token=class_token,
            registers=int(registers.shape[1]) if is_tensor(registers) and registers.ndim == 3 else 0,
            final_norm="norm.weight" in weights, position_rule=position_rule)


ROPE_RULE = "rope"  # DINOv3's position rule: rotary positions, no table to resample


@dataclass(frozen=True)
class RopeArchitecture(Architecture):
    """A DINOv3 ViT (docs/design.md §14): `ffn` "mlp" or "swiglu"; the depth is read from the file and recorded
    (`geometry.depth` is the release's, for freshly built networks); no position table (rule "rope")."""

    ffn: str = "mlp"

    def supported_shape(self, state: Mapping[str, Any]) -> bool:
        from evaluate.networks import dinov3

        g = self.geometry
        return (_shape(state, "patch_embed.proj.weight") == (g.width, 3, g.patch, g.patch)
                and dinov3_forms.ffn_of(state) == self.ffn
                and dinov3_forms.hidden_of(state) == dinov3.ffn_hidden(g.width, self.ffn))

    def default_position_rule(self, training: bool) -> str:
        return ROPE_RULE

    def build(self, variant: str, *, pos_grid: int | None = None, class_token: bool = False, registers: int = 0,
              final_norm: bool = False, position_rule: str = ROPE_RULE, depth: int | None = None,
              periods_from_file: bool = True) -> nn.Module:
        """The network (their random initialisation), in the backbone form unless the released form's parts are
        asked for; `registers` storage tokens in front; depth the release's unless given."""
        from evaluate.networks import dinov3

        if position_rule != ROPE_RULE:
            raise ArchitectureError(f"{self.title} has rotary positions and no position table: position_rule "
                                    f"{position_rule!r} does not apply (leave it out of the checkpoint's entry)")
        return dinov3.DinoV3ViT(self.geometry.width, self.geometry.depth if depth is None else depth, self.ffn,
                                class_token=class_token, storage_tokens=registers, final_norm=final_norm,
                                periods_from_file=periods_from_file, registers=self.geometry.registers)

    def network_for(self, variant: str, weights: Mapping[str, Any], position_rule: str = ROPE_RULE) -> nn.Module:
        """The DINOv3 network holding exactly `weights`: depth from the block numbers, class token, storage tokens
        and final norm where they are, the periods a loaded buffer where the weights have them."""
        storage = weights.get(dinov3_forms.STORAGE)
        return self.build(variant, class_token="cls_token" in weights,
                          registers=int(storage.shape[1]) if is_tensor(storage) and storage.ndim == 3 else 0,
                          final_norm="norm.weight" in weights, position_rule=position_rule,
                          depth=block_count(weights), periods_from_file=dinov3_forms.PERIODS in weights)


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
    return tuple(value.shape) if is_tensor(value) else None


def _stem_stages(state: Mapping[str, Any]) -> int:
    """The convolutions of XCiT's conv stem (`patch_embed.proj.{2 n}.0.weight`)."""
    return len([key for key in state if re.match(r"^patch_embed\.proj\.\d+\.0\.weight$", key)])


def _describe_vit(state: Mapping[str, Any]) -> str:
    width, _, patch, _ = ((_shape(state, "patch_embed.proj.weight") or ()) + (0, 0, 0, 0))[:4]
    size = {192: "ViT-Ti", 384: "ViT-S", 768: "ViT-B", 1024: "ViT-L", 1280: "ViT-H", 1536: "ViT-g"}.get(width, "a ViT")
    return f"{size}/{patch} ({width} wide, {patch} x {patch} patches, {block_count(state)} blocks)"


def _xcit_supported_shape(state: Mapping[str, Any]) -> bool:
    from evaluate.networks import xcit

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
    from evaluate.networks import vit

    for module in model.modules():
        if isinstance(module, vit.CirculantLinear):
            dim = module.bias.shape[0]
            module.index_matrix = vit.circulant_index_matrix(dim, module.weight_list.shape[0] // dim)


# ----------------------------------------------------------------------------------------------------- registry


def _plain_recogniser(geometry: Geometry) -> Callable[[Mapping[str, Any]], str | None]:
    """A plain DINO ViT of this patch and width: recognised by its patch embedding's shape."""
    def recognise(state: Mapping[str, Any]) -> str | None:
        patch = _shape(state, "patch_embed.proj.weight")
        fits = patch == (geometry.width, 3, geometry.patch, geometry.patch)
        return forms.recognise_plain(state) if fits else None
    return recognise


def _dinov2_recogniser(geometry: Geometry) -> Callable[[Mapping[str, Any]], str | None]:
    """A DINOv2 of this width and register count."""
    def recognise(state: Mapping[str, Any]) -> str | None:
        variant = forms.recognise_dinov2(state)
        patch = _shape(state, "patch_embed.proj.weight")
        if variant is None or patch is None or patch[0] != geometry.width:
            return None
        return variant if forms.registers_of(state) == geometry.registers else None
    return recognise


_SIZES = {384: "S", 768: "B", 1024: "L"}


def _dino_vit(width: int, patch: int) -> Architecture:
    geometry = Geometry(patch, width, 12, 0)
    size = _SIZES[width]
    return Architecture(
        f"vit-{size.lower()}{patch}", f"ViT-{size}/{patch}", f"{geometry.heads}x64", ("plain",), geometry,
        pos_grid=geometry.tokens224_grid, recognise=_plain_recogniser(geometry), to_released=forms.plain_to_released,
        full_form=forms.plain_full_form, block="plain", describe=_describe_vit,
    )


def _dinov2(width: int, depth: int, registers: int) -> Architecture:
    geometry = Geometry(forms.DINOV2_PATCH, width, depth, registers)
    size = _SIZES[width]
    reg = f"-reg{registers}" if registers else ""
    return Architecture(
        f"dinov2-{size.lower()}14{reg}", f"DINOv2 ViT-{size}/14" + (f" with {registers} registers" if registers else ""),
        f"{geometry.heads}x64", ("dinov2", "timm"), geometry, pos_grid=DINOV2_HUB_GRID,
        recognise=_dinov2_recogniser(geometry), to_released=forms.dinov2_to_released,
        full_form=lambda backbone, variant, layout: forms.dinov2_full_form(backbone, variant, layout, registers),
        block="layerscale", describe=_describe_vit, released_rule="antialias" if registers else "dino",
    )


def _dinov3_recogniser(width: int, ffn: str) -> Callable[[Mapping[str, Any]], str | None]:
    """A DINOv3 ViT of this width and feed-forward, in either naming."""
    def recognise(state: Mapping[str, Any]) -> str | None:
        variant = dinov3_forms.recognise_dinov3(state)
        patch = _shape(state, "patch_embed.proj.weight")
        if variant is None or patch is None or patch[0] != width or dinov3_forms.ffn_of(state) != ffn:
            return None
        return variant
    return recognise


def _derive_rope_periods(model: nn.Module) -> None:
    """DINOv3: periods the file did not hold, from the formula (after a meta-device build they are empty)."""
    model.rope_embed.derive()


def _dinov3(name: str) -> RopeArchitecture:
    title, width, ffn, depth = dinov3_forms.MEMBERS[name]
    geometry = Geometry(dinov3_forms.PATCH, width, depth, 4)
    return RopeArchitecture(
        name, title, f"{geometry.heads}x64", dinov3_forms.SPELLINGS, geometry, pos_grid=0,
        recognise=_dinov3_recogniser(width, ffn), to_released=dinov3_forms.dinov3_to_released,
        full_form=dinov3_forms.dinov3_full_form, block="rope",
        describe=dinov3_forms.describe, derive_buffers=_derive_rope_periods, released_rule=ROPE_RULE, ffn=ffn,
    )


DINOV2_HUB_GRID = 37  # the DINOv2 hub files' tables are for 518-px inputs: 37 x 37 patches of 14

REGISTRY: dict[str, Architecture] = {  # `identify` tries them in this order; the first that recognises the keys wins
    arch.name: arch
    for arch in (
        Architecture(
            "xcit-s12-16", "XCiT-S12/16", "8x48", ("official", "timm"), SEED, pos_grid=0,
            recognise=forms.recognise_xcit, to_released=forms.xcit_to_released, full_form=forms.xcit_full_form,
            block="", describe=_describe_xcit, ddp_teacher=True,
        ),
        Architecture(
            "augvit-s16", "Aug-ViT-S/16", "6x64", ("circulant2", *[m for m in AUG_MODES if m != "circulant2"]),
            SEED, pos_grid=SEED.tokens224_grid, recognise=forms.recognise_augvit, to_released=forms.augvit_to_released,
            full_form=forms.augvit_full_form, block="aug", describe=_describe_vit,
            derive_buffers=_derive_circulant_indices, fixed_variant="mode",
        ),
        *(_dinov3(name) for name in dinov3_forms.MEMBERS),
        *(_dinov2(width, depth, registers) for registers in (0, 4)
          for width, depth in ((384, 12), (768, 12), (1024, 24))),
        Architecture(
            "vit-s16-layerscale", "ViT-S/16 with LayerScale", "6x64", ("gamma_1", "ls1.gamma"), SEED,
            pos_grid=SEED.tokens224_grid, recognise=forms.recognise_layerscale,
            to_released=forms.layerscale_to_released, full_form=forms.layerscale_full_form, block="layerscale",
            describe=_describe_vit,
        ),
        *(_dino_vit(width, patch) for width in (384, 768) for patch in (16, 8)),
    )
}
ARCHITECTURES = tuple(REGISTRY)
SEED_ARCHITECTURES = ("xcit-s12-16", "augvit-s16", "vit-s16-layerscale", "vit-s16")  # docs/design.md §9's
DINOV3 = tuple(dinov3_forms.MEMBERS)  # §14's
FAMILY = tuple(name for name in ARCHITECTURES if name not in SEED_ARCHITECTURES + DINOV3)  # §11's beside ViT-S/16
_TITLES = [arch.title for arch in reversed(REGISTRY.values())]
SUPPORTED = f"supported: {', '.join(_TITLES[:-1])} and {_TITLES[-1]}"  # what every refusal ends with


def _refuse_unsupported(state: Mapping[str, Any]) -> None:
    """Raise ArchitectureError for the refused architectures that markers alone give away (DINOv3's ViT-7B and
    ConvNeXts, the DINOv2 giant, CaiT)."""
    refused = dinov3_forms.refusal(state)
    if refused:
        raise ArchitectureError(f"{refused}; {SUPPORTED}")
    giant = any(re.search(r"mlp\.w12\.", key) for key in state)  # DINOv3's SwiGLU (w1, w2, w3) loads
    swiglu = sorted({m.group(0) for key in state if (m := re.search(r"mlp\.w(12|3)\.", key))}) if giant else []
    if swiglu:
        width = (_shape(state, "patch_embed.proj.weight") or ("?",))[0]
        depth = block_count(forms.unchunked(state))
        raise ArchitectureError(
            f"found the DINOv2 giant ({', '.join(m + '*' for m in swiglu)}: a SwiGLU MLP; {depth} blocks, {width} "
            f"wide), which is not supported; {SUPPORTED}"
        )
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
    if _shape(state, "patch_embed.proj.weight") is not None:
        known = ("blocks.", "patch_embed.", "pos_embed", "norm.", "cls_token", "register_tokens", "reg_token",
                 "mask_token", "head.")
        extra = sorted(key for key in state if not key.startswith(known))
        raise ArchitectureError(
            f"found {_describe_vit(forms.unchunked(state))}" + (f" with {describe_keys(extra)}" if extra else "")
            + f", which is not supported; {SUPPORTED}"
        )
    raise ArchitectureError(
        f"no known architecture in these weights (keys: {describe_keys([str(k) for k in state])}); {SUPPORTED}"
    )


def convert(state: Mapping[str, Any], form: str = "backbone") -> tuple[Identified, dict[str, Any], list[str]]:
    """(what it is, the state dict of `form` in our layout, dropped keys) of a network's flat state dict (pure).

    form: "backbone" (class token, its position row, registers and final norm out) or "released" (the network as
    its authors run it; docs/design.md §11)."""
    if form not in FORMS:
        raise ArchitectureError(f"unknown form {form!r}; known: {', '.join(FORMS)}")
    identified = identify(state)
    weights, dropped = identified.architecture.to_released(state, identified.variant)
    if form == "backbone":
        weights, more = forms.backbone_of(weights)
        if not forms.has_class_row(state):  # the zero class row was ours, not the file's (DeiT III, timm's DINOv2)
            more = [key for key in more if key != "pos_embed[0]"]
        dropped = dropped + more
    return identified, weights, dropped


def build(identified: Identified) -> nn.Module:
    """The network of an identified state dict in the backbone form, randomly initialised."""
    return identified.architecture.build(identified.variant)


def build_for(identified: Identified, weights: Mapping[str, Any], position_rule: str = "dino") -> nn.Module:
    """The network that holds exactly `weights` (either form, in our layout): `Architecture.network_for`."""
    return identified.architecture.network_for(identified.variant, weights, position_rule)


# ----------------------------------------------------------------------------------------------------- strict loading


def check_state(state: Mapping[str, Any], model: nn.Module, title: str, shape: str = "") -> None:
    """Raise ArchitectureError unless `state` has exactly `model`'s keys, shapes, dtypes and finite values.

    Integer buffers (BatchNorm's `num_batches_tracked`) must be integers, every other tensor a float; `title` names
    the network in the message, `shape` its width and patch in words. Up to `evaluate.networks.SHOW_KEYS` offending keys are named, the rest counted.
    """
    expected = model.state_dict()
    problems = []
    missing = [key for key in expected if key not in state]
    unexpected = [key for key in state if key not in expected]
    if missing:
        problems.append(f"{len(missing)} missing backbone keys: {describe_keys(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected keys: {describe_keys(unexpected)}")
    not_tensor = [key for key in expected if key in state and not is_tensor(state[key])]
    if not_tensor:
        problems.append(f"not tensors: {describe_keys(not_tensor)}")
    shapes = [
        f"{key} {tuple(state[key].shape)} (expected {tuple(value.shape)})"
        for key, value in expected.items()
        if is_tensor(state.get(key)) and state[key].shape != value.shape
    ]
    if shapes:
        problems.append(
            f"{len(shapes)} wrong shapes, not a {title}{f' ({shape})' if shape else ''}: "
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
        import torch

        bad = [key for key in floats if not math.isfinite(state[key].sum(dtype=torch.float64).item())]
        if bad:
            problems.append(f"NaN or infinite weights in {len(bad)} tensors: {describe_keys(bad)}")
    if problems:
        raise ArchitectureError("; ".join(problems))


def materialise(identified: Identified, weights: Mapping[str, Any], position_rule: str = "dino",
                form: str = "backbone") -> nn.Module:
    """The identified network holding exactly `weights` (a state dict of `form`, in our layout): eval mode, float32,
    CPU, its `form` recorded.

    The network is built on PyTorch's `meta` device (shapes only: no random initialisation computed and thrown
    away) for what `weights` holds (`build_for`), checked strictly (`check_state`), loaded by assignment, and its
    derived buffers rebuilt. Raises ArchitectureError; when the width, patch size or depth is not the registry's,
    the message starts with what was found ("found ViT-L/16 (...), which is not supported (supported: ...); ...").
    """
    import torch

    arch = identified.architecture
    with torch.device("meta"):
        model = build_for(identified, weights, position_rule)
    g = arch.geometry
    try:
        check_state(weights, model, arch.title, f"{g.width} wide, {g.patch} x {g.patch} patches")
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
    model.form = form
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
