"""What each architecture's files hold beyond our backbone form, and the small pure converters both ways
(docs/design.md §9). The registry (`evaluate.networks.registry`) makes one entry of each architecture's three.

Per architecture:
- `recognise_*(state) -> variant or None`: the architecture and its naming (or Aug-ViT's mode) from the keys alone;
- `*_to_released(state, variant) -> (released state dict in our layout, dropped keys)`: what no forward uses is
  taken out (iBOT's `masked_embed`, DINOv2's `mask_token`; XCiT's class-attention blocks, which never reach block
  12; Aug-ViT's derived index matrices, checked against the formula first), other namings are renamed to ours
  (timm's `ls1.gamma` and `reg_token`, XCiT's `pos_embed.`), and DINOv2's chunked blocks un-chunked;
  `backbone_of` then gives the class-token-free backbone form (class token, class row, registers, final norm out);
- `*_full_form(backbone, variant, layout) -> state dict`: the way back, for writing seeded files in the real forms
  (`LAYOUTS`), the extras seeded (generator seed 1) so the same backbone always gives the same file.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Mapping

from evaluate.networks import ArchitectureError, describe_keys, is_tensor

if TYPE_CHECKING:  # torch is imported where a tensor is made (the registry's own note says why)
    import torch
    from torch import Tensor

# A full form's layout: "dino" (class token, a class row in a 1 + g^2-row position table, final norm; XCiT: its two
# class-attention blocks), "deit3" (as dino, but the g^2-row table unchanged, and a 1000-class head), "classifier"
# (as dino, plus a 1000-class head: the Aug-ViT authors' and timm's supervised releases), "backbone" (nothing added).
LAYOUTS = ("dino", "deit3", "classifier", "backbone")
CLASS_ROW_LAYOUTS = ("dino", "classifier")
HEAD_LAYOUTS = ("deit3", "classifier")
HEAD_CLASSES = 1000
CLASS_EXTRAS = ("cls_token", "norm.weight", "norm.bias")  # what the class-token-free backbone form leaves out
REGISTER_NAMES = ("register_tokens", "storage_tokens")  # DINOv2's registers, DINOv3's storage tokens: out of it too
UNUSED_EXTRAS = ("masked_embed", "mask_token")  # iBOT's and DINOv2's masking tokens: no forward uses them
LAYERSCALE_TIMM = {"gamma_1": "ls1.gamma", "gamma_2": "ls2.gamma"}  # LayerScale names: ours (DeiT III's) -> timm's
AUG_SHORTCUTS = ("augs_attn", "augs_attn2", "augs", "augs2")
XCIT_TIMM_POS = ("pos_embed.", "pos_embeder.")  # timm's prefix of the token projection, the authors'


def block_count(state: Mapping[str, Any], prefix: str = "blocks.") -> int:
    """1 + the largest i of the `{prefix}{i}.` keys (0 when there are none)."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)\.")
    found = [int(m.group(1)) for key in state if (m := pattern.match(key))]
    return max(found) + 1 if found else 0


def _drop(state: Mapping[str, Any], drop: Callable[[str], bool]) -> tuple[dict[str, Any], list[str]]:
    kept = {key: value for key, value in state.items() if not drop(key)}
    return kept, sorted(key for key in state if drop(key))


def _is_class_row_table(rows: int) -> bool:
    """A position table of 1 + g^2 rows holds a class position in row 0 (DINO form); g^2 rows has none (DeiT III
    and backbone form)."""
    grid = round((rows - 1) ** 0.5)
    return rows > 1 and grid * grid == rows - 1 and round(rows**0.5) ** 2 != rows


def renamed(state: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """`blocks.*` keys ending in `.<old>` renamed to end in `.<new>` for each old -> new of `names`."""
    out = {}
    for key, value in state.items():
        for old, new in names.items():
            if key.startswith("blocks.") and key.endswith("." + old):
                key = key[: -len(old)] + new
        out[key] = value
    return out


def classifier_head(dim: int, gen: torch.Generator) -> dict[str, Tensor]:
    """A seeded 1000-class head (`head.weight` (1000, dim), `head.bias`): the classifier layouts' (`HEAD_LAYOUTS`)."""
    import torch

    return {"head.weight": torch.randn(HEAD_CLASSES, dim, generator=gen) * 0.02, "head.bias": torch.zeros(HEAD_CLASSES)}


# ----------------------------------------------------------------------------------------------------- ViT family


def _vit_released(state: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The released form in our layout: iBOT's masked_embed and DINOv2's mask_token out (unused by the forward);
    where the file has a class token but its table no class row (DeiT III's 196 rows, timm's DINOv2 with the class
    row folded into `cls_token`: g^2 rows), a zero class row is put in, so the class token's input is unchanged. A
    table of neither 1 + g^2 nor g^2 rows is left as the file holds it, for the strict check to report its rows."""
    taken, dropped = _drop(state, lambda key: key in UNUSED_EXTRAS)
    pos = taken.get("pos_embed")
    if ("cls_token" in taken and is_tensor(pos) and pos.ndim == 3 and not _is_class_row_table(pos.shape[1])
            and round(pos.shape[1] ** 0.5) ** 2 == pos.shape[1]):
        import torch

        taken["pos_embed"] = torch.cat([torch.zeros_like(pos[:, :1]), pos], dim=1)
    return taken, dropped


def has_class_row(state: Mapping[str, Any]) -> bool:
    """Whether a file's own position table holds a class row (1 + g^2 rows), before `_vit_released` adds one."""
    pos = state.get("pos_embed")
    return is_tensor(pos) and pos.ndim == 3 and _is_class_row_table(pos.shape[1])


def backbone_of(released: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The backbone form of a released-form state dict in our layout (docs/design.md §11, §14): class token,
    registers (DINOv3's storage tokens) and final norm out, and row 0 of a 1 + g^2-row table (the class position)
    out."""
    taken, dropped = _drop(released, lambda key: key in CLASS_EXTRAS or key in REGISTER_NAMES)
    pos = taken.get("pos_embed")
    if "cls_token" in released and is_tensor(pos) and pos.ndim == 3 and _is_class_row_table(pos.shape[1]):
        taken["pos_embed"] = pos[:, 1:]
        dropped.append("pos_embed[0]")
    return taken, dropped


def _vit_full_form(backbone: Mapping[str, Tensor], layout: str) -> dict[str, Tensor]:
    """A ViT backbone with a class token and final norm, a class row in the table (layouts "dino", "classifier";
    "deit3" keeps the table unchanged) and a 1000-class head (layouts "deit3", "classifier"); seeded (1)."""
    out = dict(backbone)
    if layout == "backbone":
        return out
    import torch

    dim = backbone["pos_embed"].shape[-1]
    gen = torch.Generator().manual_seed(1)
    out["cls_token"] = torch.randn(1, 1, dim, generator=gen) * 0.02
    cls_pos = torch.randn(1, 1, dim, generator=gen) * 0.02
    if layout in CLASS_ROW_LAYOUTS:
        out["pos_embed"] = torch.cat([cls_pos, backbone["pos_embed"]], dim=1)
    out["norm.weight"] = torch.ones(dim) + torch.randn(dim, generator=gen) * 0.01
    out["norm.bias"] = torch.randn(dim, generator=gen) * 0.01
    if layout in HEAD_LAYOUTS:
        out.update(classifier_head(dim, gen))
    return out


def recognise_plain(state: Mapping[str, Any]) -> str | None:
    return "plain" if "patch_embed.proj.weight" in state else None


def plain_to_released(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    return _vit_released(state)


def plain_full_form(backbone: Mapping[str, Tensor], variant: str, layout: str) -> dict[str, Tensor]:
    return _vit_full_form(backbone, layout)


def recognise_layerscale(state: Mapping[str, Any]) -> str | None:
    ours = any(key.endswith((".gamma_1", ".gamma_2")) for key in state if key.startswith("blocks."))
    timm = any(key.endswith((".ls1.gamma", ".ls2.gamma")) for key in state if key.startswith("blocks."))
    if ours and timm:
        raise ArchitectureError("LayerScale weights under both names, gamma_1/gamma_2 and ls1.gamma/ls2.gamma")
    return "gamma_1" if ours else "ls1.gamma" if timm else None


def layerscale_to_released(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    """LayerScale: timm's `blocks.{i}.ls1.gamma` / `ls2.gamma` renamed to `gamma_1` / `gamma_2`, then as plain."""
    if variant == "ls1.gamma":
        state = renamed(state, {timm: ours for ours, timm in LAYERSCALE_TIMM.items()})
    return _vit_released(state)


def layerscale_full_form(backbone: Mapping[str, Tensor], variant: str, layout: str) -> dict[str, Tensor]:
    out = _vit_full_form(backbone, layout)
    return renamed(out, LAYERSCALE_TIMM) if variant == "ls1.gamma" else out


def recognise_augvit(state: Mapping[str, Any]) -> str | None:
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


def augvit_to_released(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    """Aug-ViT: each stored `index_matrix` must equal the formula (`vit.circulant_index_matrix`) and is then dropped
    (the network derives it); a file without them loads. Then as plain."""
    import torch

    from evaluate.networks import vit

    expected = vit.circulant_index_matrix(vit.EMBED_DIM, vit.AUG_BLOCKS)
    stored = aug_index_keys(state)
    bad = [key for key in stored if not is_tensor(state[key]) or state[key].shape != expected.shape
           or not torch.equal(state[key].long(), expected)]
    if bad:
        raise ArchitectureError(
            f"Aug-ViT {variant}: {len(bad)} stored index matrices differ from the block-circulant formula "
            f"(W[96 I + r, 96 J + c] = weight_list[(4 I + J) 96 + (r - c) mod 96]): {describe_keys(bad)}"
        )
    taken, dropped = _drop(state, set(stored).__contains__)
    taken, more = _vit_released(taken)
    return taken, dropped + more


def augvit_full_form(backbone: Mapping[str, Tensor], variant: str, layout: str) -> dict[str, Tensor]:
    """As the authors' code saves it: with every circulant projection's `index_matrix` (384, 384) int64."""
    from evaluate.networks import vit

    out = _vit_full_form(backbone, layout)
    for key in list(out):
        if key.startswith("blocks.") and key.endswith(".weight_list"):
            out[key[: -len("weight_list")] + "index_matrix"] = vit.circulant_index_matrix(vit.EMBED_DIM, vit.AUG_BLOCKS)
    return out


# ----------------------------------------------------------------------------------------------------- XCiT


def recognise_xcit(state: Mapping[str, Any]) -> str | None:
    markers = ("blocks.0.attn.temperature", "blocks.0.local_mp.conv1.weight", "patch_embed.proj.0.0.weight")
    if not any(marker in state for marker in markers):
        return None
    return "timm" if any(key.startswith(XCIT_TIMM_POS[0]) for key in state) else "official"


def xcit_to_released(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    """XCiT, in both forms: class token, the class-attention blocks and the final norm out (none of them reaches
    block 12, docs/design.md §11); timm's
    `pos_embed.` renamed to `pos_embeder.`; a BatchNorm without `num_batches_tracked` gets 0 (unused in eval)."""
    taken, dropped = _drop(state, lambda key: key in CLASS_EXTRAS or key.startswith("cls_attn_blocks."))
    if variant == "timm":
        old, new = XCIT_TIMM_POS
        taken = {(new + key[len(old):] if key.startswith(old) else key): value for key, value in taken.items()}
    import torch

    for key in [k for k in taken if k.endswith(".running_var")]:
        counter = key[: -len("running_var")] + "num_batches_tracked"
        taken.setdefault(counter, torch.tensor(0, dtype=torch.long))
    return taken, dropped


def _xcit_class_attention(dim: int, gen: torch.Generator, variant: str) -> dict[str, Tensor]:
    """Two seeded class-attention blocks as the authors' code names them (timm splits qkv into q, k, v)."""
    import torch

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


def xcit_full_form(backbone: Mapping[str, Tensor], variant: str, layout: str) -> dict[str, Tensor]:
    """XCiT as DINO released it: class token, two class-attention blocks, final norm (seeded, 1), and a 1000-class
    head in the layouts that have one; timm naming on request. There is no position table to give a class row."""
    import torch

    dim = backbone["pos_embeder.token_projection.bias"].shape[0]
    gen = torch.Generator().manual_seed(1)
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
    if layout in HEAD_LAYOUTS:
        out.update(classifier_head(dim, gen))
    return out


# ----------------------------------------------------------------------------------------------------- DINOv2

DINOV2_PATCH = 14
DINOV2_CHUNK = re.compile(r"^blocks\.(\d+)\.(\d+)\.")  # a chunked teacher's `blocks.{chunk}.{block}.`
DINOV2_TIMM_REGISTERS = "reg_token"  # timm's name of `register_tokens`


def unchunked(state: Mapping[str, Any]) -> dict[str, Any]:
    """DINOv2's chunked blocks (`blocks.{c}.{i}.*`, the teacher of a run with `block_chunks`) as `blocks.{i}.*`;
    the chunks are padded with empty places and the block numbers are kept. Other keys as they are."""
    return {DINOV2_CHUNK.sub(r"blocks.\2.", key): value for key, value in state.items()}


def recognise_dinov2(state: Mapping[str, Any]) -> str | None:
    """DINOv2 (patch 14 with LayerScale, `ls1.gamma` or ours, chunked or not): "dinov2" (the hub's and the training code's
    names: `register_tokens`, a class row in the table, `mask_token`) or "timm" (`reg_token`, or no `mask_token`:
    timm folds the class row into `cls_token` in its register models)."""
    patch = state.get("patch_embed.proj.weight")
    if not is_tensor(patch) or patch.ndim != 4 or patch.shape[-1] != DINOV2_PATCH:
        return None
    if not any(key.endswith((".ls1.gamma", ".gamma_1")) for key in state if key.startswith("blocks.")):
        return None
    return "timm" if DINOV2_TIMM_REGISTERS in state or "mask_token" not in state else "dinov2"


def registers_of(state: Mapping[str, Any]) -> int:
    """How many register tokens a DINOv2 state dict holds (`register_tokens` or timm's `reg_token`, (1, R, D))."""
    for key in ("register_tokens", DINOV2_TIMM_REGISTERS):
        value = state.get(key)
        if is_tensor(value) and value.ndim == 3:
            return int(value.shape[1])
    return 0


def dinov2_to_released(state: Mapping[str, Any], variant: str) -> tuple[dict[str, Any], list[str]]:
    """DINOv2: chunked blocks un-chunked (a flat file may hold them too), `ls1.gamma` / `ls2.gamma` renamed to ours, timm's `reg_token` to
    `register_tokens`, `mask_token` out; then as plain (a table without class row gets a zero one: timm's register
    models fold it into `cls_token`)."""
    state = renamed(unchunked(state), {timm: ours for ours, timm in LAYERSCALE_TIMM.items()})
    if DINOV2_TIMM_REGISTERS in state:
        state = {("register_tokens" if key == DINOV2_TIMM_REGISTERS else key): value for key, value in state.items()}
    return _vit_released(state)


def dinov2_full_form(backbone: Mapping[str, Tensor], variant: str, layout: str, registers: int) -> dict[str, Tensor]:
    """DINOv2 as its files hold it (layouts "dino": the hub's; "backbone": nothing added): class token, class row,
    final norm, `registers` register tokens and `mask_token` (seeded, 1), LayerScale as `ls1.gamma`; variant "timm":
    `reg_token`, no `mask_token`, and with registers the class row folded into `cls_token` (a g^2-row table)."""
    out = renamed(_vit_full_form(backbone, layout), LAYERSCALE_TIMM)
    if layout == "backbone":
        return out
    if "register_tokens" in out:  # a backbone built with its registers: they go after the class token
        out["register_tokens"] = out.pop("register_tokens")
    import torch

    dim = backbone["pos_embed"].shape[-1]
    gen = torch.Generator().manual_seed(2)
    if registers and "register_tokens" not in out:
        out["register_tokens"] = torch.randn(1, registers, dim, generator=gen) * 0.02
    if variant == "timm":
        if registers:
            out[DINOV2_TIMM_REGISTERS] = out.pop("register_tokens")
            out["cls_token"] = out["cls_token"] + out["pos_embed"][:, :1]
            out["pos_embed"] = out["pos_embed"][:, 1:].clone()
    else:
        out["mask_token"] = torch.zeros(1, dim)
    return out
