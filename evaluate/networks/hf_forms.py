"""Hugging Face's spellings of the family (DESIGN 17): transformers' `model.safetensors` / `pytorch_model.bin`, read
as one checkpoint format ("hf") whose small pure converters give back the authors' hub names, so the registry then
treats the file exactly as the hub file of the same network (grids, forms, position rules, refusals). config.json is
never read: every number the forward needs is in the shapes (and the DINO v1 conversions' config holds ViT's default
`layer_norm_eps` 1e-12, not DINO's 1e-6).

Per class (recognised by), transformers' names -> the authors':

- `ViTModel` (`encoder.layer.{i}.layernorm_before`; `facebook/dino-vit*`): `embeddings.{cls_token,
  position_embeddings -> pos_embed, patch_embeddings.projection -> patch_embed.proj}`; `encoder.layer.i.` ->
  `blocks.i.`: `layernorm_before -> norm1`, `attention.attention.{query, key, value} -> attn.qkv`,
  `attention.output.dense -> attn.proj`, `layernorm_after -> norm2`, `intermediate.dense -> mlp.fc1`,
  `output.dense -> mlp.fc2`; `layernorm -> norm`.
- `Dinov2Model`, `Dinov2WithRegistersModel` (`encoder.layer.{i}.layer_scale1.lambda1`; registers iff
  `embeddings.register_tokens`): as ViT's, and `embeddings.{mask_token, register_tokens}`, `norm1`, `norm2`,
  `layer_scale{1,2}.lambda1 -> ls{1,2}.gamma`, `mlp.fc1`, `mlp.fc2` (the giant's `mlp.weights_in / weights_out ->
  mlp.w12 / w3`, which §11 refuses).
- `DINOv3ViTModel` (`layer.{i}.attention.q_proj`): `embeddings.{cls_token, mask_token (1, 1, D) -> (1, D),
  register_tokens -> storage_tokens, patch_embeddings -> patch_embed.proj}`; `layer.i.` -> `blocks.i.`: `norm1`,
  `attention.{q, k, v}_proj -> attn.qkv` (no `k_proj.bias`: a zero key bias), `attention.o_proj -> attn.proj`,
  `layer_scale{1,2}.lambda1 -> ls{1,2}.gamma`, `norm2`, MLP `mlp.{up_proj, down_proj} -> mlp.{fc1, fc2}`, SwiGLU
  `mlp.{gate_proj, up_proj, down_proj} -> mlp.{w1, w2, w3}` (!); `norm`.

q, k and v are joined along the output axis in that order (weights and biases): transformers' converters slice
[0, D), [D, 2D), [2D, 3D) the same way. The task models written by `save_pretrained` prefix every backbone name with
`vit.` (`ViTForImageClassification`), `dinov2.` or `dinov2_with_registers.` and add `classifier.*`; a `ViTModel`
with its pooling layer adds `pooler.*`. The prefix is stripped only when every key but `classifier.*` carries it;
`classifier.*` and `pooler.*` are dropped (and said so). Keys no rule names pass through unchanged, so strict loading
names them.

`to_hf` is the way back (the demo's writer): the authors' names of a network one of the four base classes holds, in
transformers' spelling.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Mapping

from evaluate.networks import ArchitectureError, describe_keys, is_tensor
from evaluate.networks.dinov3_forms import PERIODS, STORAGE, refuse_key_bias, refuse_own_periods

if TYPE_CHECKING:  # torch is imported where a tensor is made (the registry's own note says why)
    from torch import Tensor

FORMAT = "hf"
TASK_PREFIXES = {"vit.": "ViTForImageClassification", "dinov2.": "Dinov2ForImageClassification",
                 "dinov2_with_registers.": "Dinov2WithRegistersForImageClassification"}
HEADS = ("classifier.", "pooler.")  # task heads and ViTModel's pooling layer: dropped
BASE_CLASSES = ("ViTModel", "Dinov2Model", "Dinov2WithRegistersModel", "DINOv3ViTModel")

# (transformers' pattern, the authors' replacement) per class kind; `{i}` is the layer number
_VIT = [
    (r"embeddings\.cls_token", "cls_token"),
    (r"embeddings\.position_embeddings", "pos_embed"),
    (r"embeddings\.patch_embeddings\.projection\.", "patch_embed.proj."),
    (r"encoder\.layer\.(\d+)\.layernorm_before\.", r"blocks.\1.norm1."),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"blocks.\1.attn.proj."),
    (r"encoder\.layer\.(\d+)\.layernorm_after\.", r"blocks.\1.norm2."),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.", r"blocks.\1.mlp.fc1."),
    (r"encoder\.layer\.(\d+)\.output\.dense\.", r"blocks.\1.mlp.fc2."),
    (r"layernorm\.", "norm."),
]
_DINOV2 = [
    (r"embeddings\.cls_token", "cls_token"),
    (r"embeddings\.mask_token", "mask_token"),
    (r"embeddings\.position_embeddings", "pos_embed"),
    (r"embeddings\.register_tokens", "register_tokens"),
    (r"embeddings\.patch_embeddings\.projection\.", "patch_embed.proj."),
    (r"encoder\.layer\.(\d+)\.norm1\.", r"blocks.\1.norm1."),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"blocks.\1.attn.proj."),
    (r"encoder\.layer\.(\d+)\.layer_scale1\.lambda1", r"blocks.\1.ls1.gamma"),
    (r"encoder\.layer\.(\d+)\.norm2\.", r"blocks.\1.norm2."),
    (r"encoder\.layer\.(\d+)\.mlp\.fc1\.", r"blocks.\1.mlp.fc1."),
    (r"encoder\.layer\.(\d+)\.mlp\.fc2\.", r"blocks.\1.mlp.fc2."),
    (r"encoder\.layer\.(\d+)\.mlp\.weights_in\.", r"blocks.\1.mlp.w12."),
    (r"encoder\.layer\.(\d+)\.mlp\.weights_out\.", r"blocks.\1.mlp.w3."),
    (r"encoder\.layer\.(\d+)\.layer_scale2\.lambda1", r"blocks.\1.ls2.gamma"),
    (r"layernorm\.", "norm."),
]
_DINOV3 = [
    (r"embeddings\.cls_token", "cls_token"),
    (r"embeddings\.mask_token", "mask_token"),
    (r"embeddings\.register_tokens", "storage_tokens"),
    (r"embeddings\.patch_embeddings\.", "patch_embed.proj."),
    (r"layer\.(\d+)\.norm1\.", r"blocks.\1.norm1."),
    (r"layer\.(\d+)\.attention\.o_proj\.", r"blocks.\1.attn.proj."),
    (r"layer\.(\d+)\.layer_scale1\.lambda1", r"blocks.\1.ls1.gamma"),
    (r"layer\.(\d+)\.norm2\.", r"blocks.\1.norm2."),
    (r"layer\.(\d+)\.layer_scale2\.lambda1", r"blocks.\1.ls2.gamma"),
    (r"norm\.", "norm."),
]
_DINOV3_MLP = {"up_proj": "fc1", "down_proj": "fc2"}
_DINOV3_SWIGLU = {"gate_proj": "w1", "up_proj": "w2", "down_proj": "w3"}
_VIT_QKV = re.compile(r"^encoder\.layer\.(\d+)\.attention\.attention\.(query|key|value)\.(weight|bias)$")
_DINOV3_QKV = re.compile(r"^layer\.(\d+)\.attention\.([qkv])_proj\.(weight|bias)$")
_DINOV3_FFN = re.compile(r"^layer\.(\d+)\.mlp\.(gate_proj|up_proj|down_proj)\.(weight|bias)$")


def _kind(state: Mapping[str, Any]) -> str | None:
    """"vit", "dinov2" or "dinov3" from the unprefixed keys (DESIGN 17's recognition), else None."""
    keys = [str(key) for key in state]
    if any(re.match(r"^encoder\.layer\.\d+\.layernorm_before\.", key) for key in keys):
        return "vit"
    if any(re.match(r"^encoder\.layer\.\d+\.layer_scale1\.lambda1$", key) for key in keys):
        return "dinov2"
    if any(re.match(r"^layer\.\d+\.attention\.q_proj\.", key) for key in keys):
        return "dinov3"
    return None


def task_prefix(state: Mapping[str, Any]) -> str:
    """The task model's prefix ("vit.", "dinov2.", "dinov2_with_registers.") when every key but `classifier.*`
    carries it, else ""."""
    keys = [str(key) for key in state if not str(key).startswith("classifier.")]
    for prefix in TASK_PREFIXES:
        if keys and all(key.startswith(prefix) for key in keys):
            return prefix
    return ""


def _unprefixed(state: Mapping[str, Any]) -> tuple[dict[str, Any], str, list[str]]:
    """(the backbone's keys with the task prefix stripped, the prefix, the dropped head and pooler keys)."""
    prefix = task_prefix(state)
    dropped = sorted(str(key) for key in state if str(key).startswith(HEADS)
                     or (prefix and str(key).startswith(prefix + "pooler.")))
    inner = {str(key)[len(prefix):]: value for key, value in state.items() if str(key) not in dropped}
    return inner, prefix, dropped


def model_class(state: Mapping[str, Any]) -> str | None:
    """The transformers class whose `save_pretrained` wrote this flat state dict (e.g. "Dinov2WithRegistersModel",
    "ViTForImageClassification"), or None when it is none of DESIGN 17's."""
    inner, prefix, _ = _unprefixed(state)
    kind = _kind(inner)
    if kind is None:
        return None
    if prefix:
        return TASK_PREFIXES[prefix]
    if kind == "dinov2":
        return "Dinov2WithRegistersModel" if "embeddings.register_tokens" in inner else "Dinov2Model"
    return {"vit": "ViTModel", "dinov3": "DINOv3ViTModel"}[kind]


def _renamed(state: Mapping[str, Any], rules: list[tuple[str, str]]) -> dict[str, Any]:
    """Each key renamed by the first rule whose pattern matches its start; others as they are."""
    compiled = [(re.compile("^" + pattern), repl) for pattern, repl in rules]
    out = {}
    for key, value in state.items():
        for pattern, repl in compiled:
            if pattern.match(key):
                key = pattern.sub(repl, key, count=1)
                break
        out[key] = value
    return out


def _joined_qkv(parts: Mapping[tuple[str, str], Any], where: str, zero_key_bias: bool) -> dict[str, Any]:
    """One layer's {(part q/k/v, weight/bias): tensor} as `qkv.weight` (3 D, D) and `qkv.bias` (3 D) in q, k, v
    order. zero_key_bias: a missing key bias is zero (DINOv3: no k_proj.bias) when the others have one."""
    import torch

    out = {}
    for kind in ("weight", "bias"):
        found = {part: parts.get((part, kind)) for part in "qkv"}
        if all(value is None for value in found.values()):
            continue
        if zero_key_bias and kind == "bias" and found["k"] is None and is_tensor(found["q"]):
            found["k"] = torch.zeros_like(found["q"])
        missing = [part for part, value in found.items() if not is_tensor(value)]
        if missing:
            raise ArchitectureError(f"{where}: the {', '.join(missing)} projection's {kind} is missing")
        shapes = {tuple(value.shape) for value in found.values()}
        if len(shapes) != 1:
            raise ArchitectureError(f"{where}: q, k and v {kind}s of different shapes {sorted(shapes)}")
        out[kind] = torch.cat([found["q"], found["k"], found["v"]])
    return out


def _family_to_authors(state: Mapping[str, Any], rules: list[tuple[str, str]]) -> dict[str, Any]:
    """ViT's and DINOv2's: renamed by `rules`, each layer's query / key / value joined into `attn.qkv`."""
    parts: dict[str, dict[tuple[str, str], Any]] = {}
    rest = {}
    for key, value in state.items():
        match = _VIT_QKV.match(key)
        if match:
            layer, part, kind = match.groups()
            parts.setdefault(layer, {})[(part[0], kind)] = value
        else:
            rest[key] = value
    out = _renamed(rest, rules)
    for layer, found in parts.items():
        for kind, value in _joined_qkv(found, f"encoder.layer.{layer}.attention.attention", False).items():
            out[f"blocks.{layer}.attn.qkv.{kind}"] = value
    return out


def _dinov3_to_authors(state: Mapping[str, Any]) -> dict[str, Any]:
    """DINOv3ViTModel's: renamed, q / k / v joined (a missing key bias is zero), MLP `up_proj, down_proj` ->
    `fc1, fc2` or SwiGLU `gate_proj, up_proj, down_proj` -> `w1, w2, w3` (by the layer's `gate_proj`), the mask
    token as the hub's (1, D)."""
    parts: dict[str, dict[tuple[str, str], Any]] = {}
    ffn: dict[str, dict[str, Any]] = {}
    rest = {}
    for key, value in state.items():
        if (match := _DINOV3_QKV.match(key)) is not None:
            layer, part, kind = match.groups()
            parts.setdefault(layer, {})[(part, kind)] = value
        elif (match := _DINOV3_FFN.match(key)) is not None:
            ffn.setdefault(match.group(1), {})[f"{match.group(2)}.{match.group(3)}"] = value
        else:
            rest[key] = value
    out = _renamed(rest, _DINOV3)
    mask = out.get("mask_token")
    if is_tensor(mask) and mask.ndim == 3:
        out["mask_token"] = mask.reshape(mask.shape[0], mask.shape[-1])
    for layer, found in parts.items():
        for kind, value in _joined_qkv(found, f"layer.{layer}.attention", True).items():
            out[f"blocks.{layer}.attn.qkv.{kind}"] = value
    for layer, found in ffn.items():
        names = _DINOV3_SWIGLU if any(name.startswith("gate_proj.") for name in found) else _DINOV3_MLP
        for name, value in found.items():
            proj, kind = name.split(".")
            out[f"blocks.{layer}.mlp.{names[proj]}.{kind}"] = value
    return out


_TO_AUTHORS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "vit": lambda state: _family_to_authors(state, _VIT),
    "dinov2": lambda state: _family_to_authors(state, _DINOV2),
    "dinov3": _dinov3_to_authors,
}


def hf_to_authors(state: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the authors' flat state dict, dropped keys) of a transformers state dict (pure): the task prefix stripped,
    `classifier.*` and `pooler.*` dropped, the names of the class's kind converted."""
    inner, _, dropped = _unprefixed(state)
    kind = _kind(inner)
    if kind is None:
        raise ArchitectureError(f"no Hugging Face class of the family in these keys: {describe_keys(list(inner))}")
    return _TO_AUTHORS[kind](inner), dropped


def meta(state: Mapping[str, Any], dropped: list[str]) -> dict[str, Any]:
    """What meta.json records of a Hugging Face file (DESIGN 17): the spelling, the class recognised, its task prefix
    and the keys the format dropped."""
    return {"spelling": FORMAT, "hf_class": model_class(state), "hf_prefix": task_prefix(state),
            "hf_dropped": sorted(dropped)}


# ----------------------------------------------------------------------------------------------------- the way back


def base_class_for(authors: Mapping[str, Any]) -> str:
    """The transformers base class that holds a network given in the authors' names: "DINOv3ViTModel" (storage
    tokens), "Dinov2WithRegistersModel" / "Dinov2Model" (LayerScale `ls1.gamma`), "ViTModel" (neither)."""
    if STORAGE in authors or PERIODS in authors:
        return "DINOv3ViTModel"
    if any(str(key).endswith(".ls1.gamma") for key in authors):
        return "Dinov2WithRegistersModel" if "register_tokens" in authors else "Dinov2Model"
    return "ViTModel"


def _inverse(rules: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The authors' names back to transformers': each (pattern, replacement) turned around (`\\1` <-> `(\\d+)`)."""
    back = []
    for pattern, repl in rules:
        hf = pattern.replace(r"\.", ".").replace(r"(\d+)", r"\1")
        ours = re.escape(repl).replace(r"\\1", r"(\d+)")
        back.append((ours, hf))
    return back


def to_hf(authors: Mapping[str, Tensor], hf_class: str) -> dict[str, Tensor]:
    """The authors' flat state dict (hub names) in transformers' spelling of `hf_class` (one of BASE_CLASSES).

    Refuses (ArchitectureError) any key the class has no name for (a ViT with augmented shortcuts, XCiT, a
    LayerScale ViT as "ViTModel"), and for DINOv3 a key bias its `bias_mask` does not cancel or periods other than
    the formula's (transformers holds neither: `dinov3_forms.refuse_own_periods`, `refuse_key_bias`)."""
    if hf_class not in BASE_CLASSES:
        raise ArchitectureError(f"unknown Hugging Face base class {hf_class!r}; known: {', '.join(BASE_CLASSES)}")
    dinov3 = hf_class == "DINOv3ViTModel"
    rules = _DINOV3 if dinov3 else _DINOV2 if hf_class.startswith("Dinov2") else _VIT
    qkv_prefix = "layer.{}.attention.{}_proj." if dinov3 else "encoder.layer.{}.attention.attention.{}."
    parts = {"q": "q", "k": "k", "v": "v"} if dinov3 else {"q": "query", "k": "key", "v": "value"}
    state = dict(authors)
    if dinov3:
        refuse_own_periods(state, hf_class)
        state.pop(PERIODS, None)
        mask = state.get("mask_token")
        if mask is not None:
            state["mask_token"] = mask.reshape(1, 1, mask.shape[-1])
    out: dict[str, Tensor] = {}
    back = [(re.compile("^" + ours), hf) for ours, hf in _inverse(rules)]
    for key, value in state.items():
        if (match := re.match(r"^blocks\.(\d+)\.attn\.qkv\.(weight|bias)$", key)) is not None:
            layer, kind = match.groups()
            dim = value.shape[0] // 3
            for n, part in enumerate("qkv"):
                if dinov3 and part == "k" and kind == "bias":  # none in transformers' names
                    refuse_key_bias(state, key, hf_class)
                    continue
                out[qkv_prefix.format(layer, parts[part]) + kind] = value[n * dim : (n + 1) * dim].clone()
            continue
        if dinov3 and key.endswith(".attn.qkv.bias_mask"):
            continue
        if dinov3 and (match := re.match(r"^blocks\.(\d+)\.mlp\.(fc1|fc2|w1|w2|w3)\.(weight|bias)$", key)):
            layer, name, kind = match.groups()
            names = {v: k for k, v in (_DINOV3_SWIGLU if name.startswith("w") else _DINOV3_MLP).items()}
            out[f"layer.{layer}.mlp.{names[name]}.{kind}"] = value
            continue
        for pattern, hf in back:
            if pattern.match(key):
                out[pattern.sub(hf, key, count=1)] = value
                break
        else:
            raise ArchitectureError(f"{hf_class} has no name for {key}")
    return out
