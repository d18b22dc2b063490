"""Checkpoint files: read them safely, recognise their format and architecture, take the backbone out (docs/design.md §2, §9).

Every checkpoint is an untrusted file. Pickled (`torch.save`) files are read with `torch.load(weights_only=True)`
and a short allow-list of harmless types that real training checkpoints hold (`SAFE_GLOBALS`): `argparse.Namespace`
(DINO's and SelfPatch's `args`) and numpy scalars with their dtype (DINO's optimizer `param_groups` keep the
learning rate and weight decay as numpy.float64, taken from its numpy schedules). A file that needs any other
global is refused with a `CheckpointError` naming the file and the refused type; its payload never runs.

Formats, recognised by their keys (`detect_format`), each converted by one small pure function:

| format            | what it holds                                                   | what we take                   |
|-------------------|-----------------------------------------------------------------|--------------------------------|
| "dino-backbone"   | `cls_token`, `pos_embed` (1, 197, 384), blocks, `norm.*`         | drop `cls_token`, row 0 of     |
|                   |                                                                 | `pos_embed`, `norm.*` (1,536)  |
| "dino-train"      | `student`, `teacher`, `optimizer`, `epoch`, `args`, `dino_loss`; | teacher `backbone.*` with the  |
|                   | teacher `backbone.*` (DINO form, with `backbone.cls_token`),     | prefix stripped, `head.*`      |
|                   | `head.*`                                                        | dropped, then as dino-backbone |
| "selfpatch-train" | like DINO's; teacher `backbone.*` in SelfPatch form (no class   | teacher `backbone.*`; the      |
|                   | token, no norm), `ca_head.*`, `c_head.*`, `p_head.*`             | heads are dropped              |
| "deit3"           | DeiT III's `{"model": ...}`: `cls_token`, a 196-row `pos_embed`   | `model` (`module.` stripped),  |
|                   | (no class row), blocks, `norm.*`, `head.*`                       | `head.*` dropped, then as      |
|                   |                                                                 | dino-backbone                  |
| "backbone"        | exactly the names of docs/design.md §1 (§9: of the architecture)         | as is                          |

The format says how the network's state dict is wrapped; the architecture inside it (ViT-S/16, with LayerScale or
augmented shortcuts, or XCiT-S12/16) is recognised from its keys and shapes by the registry
(`evaluate.networks.registry`), whose converter for that architecture takes out what the class-token-free backbone form
leaves out (class token, a class row of the position table, final norm, XCiT's class-attention blocks, Aug-ViT's
derived index matrices) and renames other namings (timm's `ls1.gamma`, XCiT's `pos_embed.`) to ours.

Student weights (`student`, keys `module.backbone.*` from DistributedDataParallel) are read only when asked for
with `which="student"`. A teacher may read `backbone.*` or, where DINO wrapped it in DistributedDataParallel (XCiT,
whose BatchNorm makes DINO convert and wrap it), `module.backbone.*`. Prefixes (`module.`, `backbone.`) are stripped
only where a key starts with them.

safetensors files hold any of these formats as tensors. A backbone format is stored flat, as its own state dict. A
training checkpoint is stored flattened one level: each tensor of its `student`, `teacher` and `dino_loss` state
dicts (and DeiT III's `model`) under `<group>.<key>` (e.g. `teacher.backbone.blocks.0.attn.qkv.weight`,
`student.module.backbone.pos_embed`); the non-tensor parts (`optimizer`, `args`) are not stored, `epoch` and the
format go in the string metadata. `read_checkpoint_file` nests such a flat file back by its first name component, so
the same conversions apply.

After conversion the backbone is loaded strictly (`load_backbone`): a missing or unexpected key, a wrong shape
(ViT-B's 768 wide tensors, patch 8), a non-float or non-finite tensor is a `CheckpointError` naming the file and the
keys; an unsupported architecture (CaiT, XCiT patch 8, another width, patch or depth) also says what was found and
what is supported. The file's sha256 and the architecture travel with the model in `LoadedCheckpoint`.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import safetensors
import safetensors.torch
import torch
from torch import Tensor, nn

from evaluate import EvaluationError
from evaluate.plumbing.atomic import atomic_path
from evaluate.networks import registry as architectures
from evaluate.networks.registry import ArchitectureError, Identified
from evaluate.networks.vit import CirculantLinear, circulant_index_matrix
from evaluate.plumbing.provenance import sha256_file

FORMATS = ("dino-backbone", "dino-train", "selfpatch-train", "deit3", "backbone")
TRAINING_FORMATS = ("dino-train", "selfpatch-train")
WHICH = ("teacher", "student")
# The groups of a training checkpoint that hold tensors; a flat safetensors file stores them as `<group>.<key>`.
TRAINING_GROUPS = ("student", "teacher", "dino_loss")
DEIT3_GROUP = "model"  # DeiT III's file: {"model": state dict}, stored flat as `model.<key>` in safetensors
NESTED_GROUPS = TRAINING_GROUPS + (DEIT3_GROUP,)
SAFETENSORS_SUFFIX = ".safetensors"
SHOW_KEYS = 5  # how many offending keys an error lists before counting the rest

_numpy_scalar = np.array(0.0)[()].__reduce__()[0]  # numpy._core.multiarray.scalar (numpy.core.* in numpy 1.x)

# Harmless types real DINO / SelfPatch training checkpoints hold. A (callable, name) pair also accepts files written
# under numpy 1.x, whose pickles name the scalar constructor `numpy.core.multiarray.scalar`.
SAFE_GLOBALS: list[Callable | tuple[Callable, str]] = [
    argparse.Namespace,
    _numpy_scalar,
    (_numpy_scalar, "numpy.core.multiarray.scalar"),
    np.dtype,
    # Unpickling a dtype instance sets its state, which torch allows only for listed classes: the dtypes of the
    # numeric scalars a training run keeps (learning rates, losses, counters).
    np.dtypes.Float64DType,
    np.dtypes.Float32DType,
    np.dtypes.Int64DType,
    np.dtypes.Int32DType,
    np.dtypes.BoolDType,
]


class CheckpointError(EvaluationError):
    """A checkpoint file that cannot be read or does not hold a supported backbone; the message names the file."""


@dataclass
class LoadedCheckpoint:
    """A backbone loaded from a checkpoint file.

    model: the network in eval mode, float32 on CPU (`evaluate.networks.vit.VisionTransformer` or
    `evaluate.networks.xcit.XCiT`: both have `last_keys` and `tokens`); format: one of FORMATS; sha256: of the file's bytes;
    path: the file; dropped: the keys of the selected state dict that were not taken (e.g. `cls_token`,
    `pos_embed[0]`, `norm.weight`, heads); architecture: a name of `evaluate.networks.registry.REGISTRY`; variant: its
    variant (LayerScale naming, Aug-ViT mode, XCiT naming, "plain"); head_layout: "6x64" or "8x48".
    """

    model: nn.Module
    format: str
    sha256: str
    path: Path
    dropped: list[str] = field(default_factory=list)
    architecture: str = "vit-s16"
    variant: str = "plain"
    head_layout: str = "6x64"

    def architecture_meta(self) -> dict[str, str]:
        """The architecture fields recorded in meta.json: architecture, architecture_variant, head_layout."""
        return {"architecture": self.architecture, "architecture_variant": self.variant, "head_layout": self.head_layout}


# ----------------------------------------------------------------------------------------------------- reading files


def _refused_global(message: str) -> str | None:
    """The type torch's weights-only unpickler refused, from its message (it words refusals in several ways)."""
    for pattern in (r"GLOBAL ([\w.]+)", r"but got <class '([\w.]+)'>", r"reduce for ([\w.]+)"):
        match = re.search(pattern, message)
        if match:
            return match.group(1)
    return None


def _read_safetensors(path: Path) -> dict[str, Any]:
    try:
        flat = safetensors.torch.load_file(str(path), device="cpu")
    except Exception as exc:  # safetensors raises its own error types for truncated or malformed files
        raise CheckpointError(f"{path}: not a readable safetensors file ({type(exc).__name__}: {exc})") from exc
    return unflatten_training_groups(flat)


def _read_torch(path: Path) -> Any:
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        refused = _refused_global(str(exc))
        if refused is not None:
            raise CheckpointError(
                f"{path}: refused to load: it needs the global {refused}, which is not on the allow-list of "
                f"harmless types ({', '.join(_safe_global_names())}); its payload was not run"
            ) from None
        reason = _unpickler_reason(str(exc)) or type(exc).__name__
        raise CheckpointError(
            f"{path}: not a readable checkpoint: the safe (weights-only) reader stopped at {reason}; nothing in the "
            "file was run (a bare pickle.dump file or an unusual pickle; re-save the weights with torch.save)"
        ) from None
    except Exception as exc:  # garbage makes torch.load fail in many ways (EOFError, RuntimeError, IndexError, ...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unexpected end of file"
        raise CheckpointError(f"{path}: not a readable checkpoint, truncated or corrupt ({type(exc).__name__}: {first})") from None


def _unpickler_reason(message: str) -> str:
    """The weights-only unpickler's own reason (e.g. "Unsupported operand 149"), without torch's advice around it."""
    text = message.split("WeightsUnpickler error:", 1)[-1]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(("Check the documentation", "Weights only load failed",
                                                            "Please file an issue", "In PyTorch"))]
    return lines[0] if lines else ""


def _safe_global_names() -> list[str]:
    names = []
    for item in SAFE_GLOBALS:
        if isinstance(item, tuple):
            names.append(item[1])
        else:
            names.append(f"{item.__module__}.{item.__qualname__}")
    return names


def _looks_like_safetensors(path: Path) -> bool:
    """safetensors: 8-byte little-endian header length, then a JSON header starting with '{'."""
    with open(path, "rb") as handle:
        head = handle.read(9)
    if len(head) < 9 or head[8:9] != b"{":
        return False
    return int.from_bytes(head[:8], "little") <= os.path.getsize(path) - 8


def read_checkpoint_file(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint's top-level dict, read without running any code it may carry.

    Pickled files (zip or legacy `torch.save`) go through `torch.load(weights_only=True)` with `SAFE_GLOBALS`;
    safetensors files (recognised by their header, whatever their name) are read as tensors and a flattened training
    checkpoint is nested back (see the module docstring). Raises CheckpointError naming the file when it is missing,
    a folder, empty, truncated, not a checkpoint, needs a refused global, or holds something other than a dict.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: checkpoint file not found")
    if path.is_dir():
        raise CheckpointError(f"{path}: is a folder, not a checkpoint file")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path}: checkpoint file is empty (0 bytes)")
    if path.suffix == SAFETENSORS_SUFFIX or _looks_like_safetensors(path):
        state = _read_safetensors(path)
    else:
        state = _read_torch(path)
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: holds a {type(state).__name__}, not a dict of weights")
    if not state:
        raise CheckpointError(f"{path}: holds an empty dict, no weights")
    return state


def unflatten_training_groups(flat: Mapping[str, Tensor]) -> dict[str, Any]:
    """Nest a flat `<group>.<key>` dict back into groups when every key starts with a training group name.

    {"teacher.backbone.pos_embed": t, "student.module.backbone.pos_embed": s}
    -> {"teacher": {"backbone.pos_embed": t}, "student": {"module.backbone.pos_embed": s}}.
    A backbone state dict (no key starting with a group name) comes back unchanged.
    """
    groups = tuple(f"{group}." for group in NESTED_GROUPS)
    if not flat or not all(key.startswith(groups) for key in flat):
        return dict(flat)
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        group, rest = key.split(".", 1)
        nested.setdefault(group, {})[rest] = value
    return nested


def flatten_training_groups(state: Mapping[str, Any]) -> dict[str, Tensor]:
    """The inverse of `unflatten_training_groups`: the tensors of the groups `student`, `teacher`, `dino_loss`,
    `model` under `<group>.<key>`, each cloned (safetensors refuses shared storage). Other entries are left out."""
    flat: dict[str, Tensor] = {}
    for group in NESTED_GROUPS:
        for key, value in (state.get(group) or {}).items():
            if isinstance(value, Tensor):
                flat[f"{group}.{key}"] = value.detach().clone().contiguous()
    return flat


# ----------------------------------------------------------------------------------------------------- formats


def _strip_prefix(state: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Keys that start with `prefix`, with it removed; a key holding `prefix` elsewhere is not touched (nor taken)."""
    return {key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)}


def _describe_keys(keys: list[str]) -> str:
    keys = sorted(keys)
    shown = ", ".join(keys[:SHOW_KEYS])
    more = len(keys) - SHOW_KEYS
    return shown + (f" and {more} more" if more > 0 else "")


def detect_format(state: Mapping[str, Any]) -> str:
    """One of FORMATS, decided by the keys of a checkpoint's top-level dict.

    A dict with a `teacher` or `student` dict is a training checkpoint: "dino-train" when its teacher backbone has
    DINO's class token (`backbone.cls_token`, or `module.backbone.cls_token`), else "selfpatch-train". A dict with
    a `model` dict is DeiT III's "deit3". Otherwise a flat state dict: "dino-backbone" when it has `cls_token`,
    "backbone" when it has a patch embedding (`patch_embed.*`) and blocks but no class token.
    Anything else raises CheckpointError listing some of its keys.
    """
    teacher, student = state.get("teacher"), state.get("student")
    if isinstance(teacher, Mapping) or isinstance(student, Mapping):
        chosen = teacher if isinstance(teacher, Mapping) else student
        keys = set(_without_ddp_prefix(chosen))
        if "backbone.cls_token" in keys:
            return "dino-train"
        return "selfpatch-train"
    if isinstance(state.get(DEIT3_GROUP), Mapping):
        return "deit3"
    if "cls_token" in state:
        return "dino-backbone"
    keys = [str(key) for key in state]
    if any(key.startswith("patch_embed.") for key in keys) and any(key.startswith("blocks.") for key in keys):
        return "backbone"
    raise CheckpointError(
        "not a recognised checkpoint format (expected a DINO or SelfPatch backbone or training checkpoint); "
        f"top-level keys: {_describe_keys([str(k) for k in state])}"
    )


def _without_ddp_prefix(state: Mapping[str, Any]) -> dict[str, Any]:
    """DistributedDataParallel's `module.` prefix removed where a key starts with it; other keys as they are."""
    unprefixed = {key: value for key, value in state.items() if not key.startswith("module.")}
    return {**unprefixed, **_strip_prefix(state, "module.")}


def _convert_backbone(state: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Our own backbone: taken as it is (the architecture's converter may still rename another naming)."""
    return dict(state), []


def _convert_dino_backbone(state: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """DINO's released backbone: the network's full state dict as it is; the architecture's converter drops
    `cls_token`, row 0 of `pos_embed` (the class position), `norm.*` (and XCiT's class-attention blocks)."""
    return dict(state), []


def _convert_deit3(state: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """DeiT III's `{"model": ...}`: the model's state dict (`module.` stripped as a prefix), `head.*` dropped."""
    model = _without_ddp_prefix(state[DEIT3_GROUP])
    taken = {key: value for key, value in model.items() if not key.startswith("head.")}
    return taken, sorted(key for key in model if key.startswith("head."))


def _select_training_state(state: Mapping[str, Any], which: str) -> dict[str, Any]:
    """The teacher's or the student's state dict, DistributedDataParallel's `module.` prefix removed (the student's
    always has it; an XCiT teacher has it too)."""
    if which not in WHICH:
        raise CheckpointError(f"which must be one of {WHICH}, got {which!r}")
    chosen = state.get(which)
    if not isinstance(chosen, Mapping):
        raise CheckpointError(f"training checkpoint has no {which!r} state dict (top-level keys: {_describe_keys(list(state))})")
    return _without_ddp_prefix(chosen)


def _take_backbone(weights: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    taken = _strip_prefix(weights, "backbone.")
    dropped = sorted(key for key in weights if not key.startswith("backbone."))
    if not taken:
        raise CheckpointError(f"no `backbone.*` weights (keys: {_describe_keys(list(weights))})")
    return taken, dropped


def _convert_dino_train(state: Mapping[str, Any], which: str) -> tuple[dict[str, Any], list[str]]:
    """DINO training checkpoint: teacher (or student), `backbone.` stripped, `head.*` dropped, then as released."""
    backbone, dropped_heads = _take_backbone(_select_training_state(state, which))
    converted, dropped = _convert_dino_backbone(backbone)
    return converted, dropped_heads + dropped


def _convert_selfpatch_train(state: Mapping[str, Any], which: str) -> tuple[dict[str, Any], list[str]]:
    """SelfPatch training checkpoint: teacher (or student) `backbone.*`; `ca_head.*`, `c_head.*`, `p_head.*` dropped."""
    return _take_backbone(_select_training_state(state, which))


def unwrap_checkpoint(state: Mapping[str, Any], fmt: str, which: str = "teacher") -> tuple[dict[str, Any], list[str]]:
    """(the network's flat state dict, dropped keys) for a checkpoint's top-level dict in format `fmt` (pure):
    the format's wrapping and heads taken off, the architecture's own extras still in."""
    if fmt in TRAINING_FORMATS:
        convert = _convert_dino_train if fmt == "dino-train" else _convert_selfpatch_train
        return convert(state, which)
    if which != "teacher":
        raise CheckpointError(f"a {fmt} checkpoint holds one set of weights, no {which!r}; ask for the teacher")
    if fmt == "dino-backbone":
        return _convert_dino_backbone(state)
    if fmt == "deit3":
        return _convert_deit3(state)
    if fmt == "backbone":
        return _convert_backbone(state)
    raise CheckpointError(f"unknown checkpoint format {fmt!r}; known: {', '.join(FORMATS)}")


def identify_checkpoint(
    state: Mapping[str, Any], fmt: str, which: str = "teacher"
) -> tuple[Identified, dict[str, Any], list[str]]:
    """(architecture and variant, backbone state dict, dropped keys) for a checkpoint's top-level dict (pure)."""
    network, dropped = unwrap_checkpoint(state, fmt, which)
    try:
        identified, weights, more = architectures.convert(network)
    except ArchitectureError as exc:
        raise CheckpointError(str(exc)) from None
    return identified, weights, dropped + more


def convert_checkpoint(state: Mapping[str, Any], fmt: str, which: str = "teacher") -> tuple[dict[str, Tensor], list[str]]:
    """(backbone state dict, dropped keys) for a checkpoint's top-level dict in format `fmt` (pure)."""
    _, weights, dropped = identify_checkpoint(state, fmt, which)
    return weights, dropped


# ----------------------------------------------------------------------------------------------------- strict loading


def check_backbone_state(state: Mapping[str, Any], model: nn.Module, title: str = "ViT-S/16") -> None:
    """Raise CheckpointError unless `state` has exactly `model`'s keys, shapes, float dtypes and finite values.

    Integer buffers (BatchNorm's `num_batches_tracked`) must be integers; `title` names the network in the message.
    """
    expected = model.state_dict()
    problems = []
    missing = [key for key in expected if key not in state]
    unexpected = [key for key in state if key not in expected]
    if missing:
        problems.append(f"{len(missing)} missing backbone keys: {_describe_keys(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected keys: {_describe_keys(unexpected)}")
    not_tensor = [key for key in expected if key in state and not isinstance(state[key], Tensor)]
    if not_tensor:
        problems.append(f"not tensors: {_describe_keys(not_tensor)}")
    shapes = [
        f"{key} {tuple(state[key].shape)} (expected {tuple(value.shape)})"
        for key, value in expected.items()
        if isinstance(state.get(key), Tensor) and state[key].shape != value.shape
    ]
    if shapes:
        problems.append(
            f"{len(shapes)} wrong shapes, not a {title} (384 wide, 16 x 16 patches): {_describe_keys(shapes)}"
        )
    if problems:
        raise CheckpointError("; ".join(problems))
    floats = [key for key, value in expected.items() if value.is_floating_point()]
    not_float = [key for key in floats if not state[key].is_floating_point()]
    not_int = [key for key in expected if key not in floats and state[key].is_floating_point()]
    if not_float:
        problems.append(f"non-float tensors: {_describe_keys([f'{k} ({state[k].dtype})' for k in not_float])}")
    if not_int:
        problems.append(f"non-integer counters: {_describe_keys([f'{k} ({state[k].dtype})' for k in not_int])}")
    if not problems:
        # a float64 sum is finite exactly when every element is (finite float32/16 values cannot overflow it)
        bad = [key for key in floats if not math.isfinite(state[key].sum(dtype=torch.float64).item())]
        if bad:
            problems.append(f"NaN or infinite weights in {len(bad)} tensors: {_describe_keys(bad)}")
    if problems:
        raise CheckpointError("; ".join(problems))


def load_backbone(path: str | os.PathLike, which: str = "teacher") -> LoadedCheckpoint:
    """Read `path`, detect its format and architecture, convert and strictly load the backbone (eval mode, CPU,
    float32; BatchNorm with the file's running statistics).

    which: "teacher" (default) or "student" (training checkpoints only). Every error is a CheckpointError whose
    message starts with the file; an unsupported architecture's says what was found and what is supported.
    """
    path = Path(path)
    state = read_checkpoint_file(path)
    try:
        fmt = detect_format(state)
        identified, weights, dropped = identify_checkpoint(state, fmt, which)
        with torch.device("meta"):  # shapes only: the random initialisation would be thrown away
            model = architectures.build(identified)
        try:
            check_backbone_state(weights, model, identified.architecture.title)
        except CheckpointError as exc:
            if architectures.supported_shape(weights, identified):
                raise
            found = architectures.describe(weights)
            raise CheckpointError(f"found {found}, which is not supported ({architectures.SUPPORTED}); {exc}") from None
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    weights = {
        key: value.to(torch.float32).contiguous() if value.is_floating_point() else value.contiguous()
        for key, value in weights.items()
    }
    model.load_state_dict(weights, strict=True, assign=True)
    _derive_buffers(model)
    model.eval()
    return LoadedCheckpoint(model=model, format=fmt, sha256=sha256_file(path), path=path, dropped=dropped,
                            architecture=identified.name, variant=identified.variant,
                            head_layout=identified.head_layout)


def _derive_buffers(model: nn.Module) -> None:
    """Rebuild the non-persistent buffers a meta-device model left empty (Aug-ViT's circulant index matrices)."""
    for module in model.modules():
        if isinstance(module, CirculantLinear):
            dim = module.bias.shape[0]
            module.index_matrix = circulant_index_matrix(dim, module.weight_list.shape[0] // dim)


# ----------------------------------------------------------------------------------------------------- writing files


def _small_head(prefix: str, dim: int, seed: int, out_dim: int = 64) -> dict[str, Tensor]:
    """A small stand-in for a projection head (its shapes do not matter: heads are dropped)."""
    gen = torch.Generator().manual_seed(seed)
    return {
        f"{prefix}mlp.0.weight": torch.randn(32, dim, generator=gen) * 0.02,
        f"{prefix}mlp.0.bias": torch.zeros(32),
        f"{prefix}last_layer.weight_g": torch.ones(out_dim, 1),
        f"{prefix}last_layer.weight_v": torch.randn(out_dim, 32, generator=gen) * 0.02,
    }


def _as_state(model_or_state: nn.Module | Mapping[str, Tensor]) -> dict[str, Tensor]:
    state = model_or_state.state_dict() if isinstance(model_or_state, nn.Module) else model_or_state
    return {key: value.detach().clone() for key, value in state.items()}


def _training_state(teacher_backbone: dict[str, Tensor], student_backbone: dict[str, Tensor], fmt: str,
                    teacher_prefix: str = "backbone.") -> dict[str, Any]:
    dim = teacher_backbone["blocks.0.norm1.weight"].shape[-1]
    heads = ("head.",) if fmt == "dino-train" else ("ca_head.", "c_head.", "p_head.")
    ddp = teacher_prefix.startswith("module.")
    teacher = {f"{teacher_prefix}{k}": v for k, v in teacher_backbone.items()}
    student = {f"module.backbone.{k}": v.clone() for k, v in student_backbone.items()}
    for seed, head in enumerate(heads):
        teacher.update({f"module.{k}" if ddp else k: v for k, v in _small_head(head, dim, seed).items()})
        student.update({f"module.{k}": v for k, v in _small_head(head, dim, seed + 10).items()})
    n_params = len(student)
    return {
        "student": student,
        "teacher": teacher,
        # DINO's param_groups carry numpy.float64 values from its numpy schedules (hence numpy on the allow-list).
        "optimizer": {
            "state": {},
            "param_groups": [
                {"lr": np.float64(5e-4), "weight_decay": np.float64(0.04), "params": list(range(n_params))}
            ],
        },
        "epoch": 100,
        "args": argparse.Namespace(arch="vit_small", patch_size=16, out_dim=64, lr=0.0005, epochs=100, seed=0),
        "dino_loss": {"center": torch.zeros(1, 64)},
    }


def save_backbone(
    model_or_state: nn.Module | Mapping[str, Tensor],
    path: str | os.PathLike,
    fmt: str,
    *,
    student: nn.Module | Mapping[str, Tensor] | None = None,
    naming: str | None = None,
) -> Path:
    """Write a backbone (our names, docs/design.md §1, §9) as a checkpoint file in format `fmt` (one of FORMATS), atomically.

    The container follows the file name: `*.safetensors` writes safetensors (training formats and DeiT III's
    `model` flattened as in the module docstring), anything else `torch.save`. The architecture is recognised from
    the backbone's keys. "dino-backbone" writes the network's full form (`evaluate.networks.registry.full_form`: a class
    token, a class row in a (1, 197, 384) pos_embed, a final norm; XCiT's two class-attention blocks); "deit3"
    writes `{"model": ...}` with the 196-row table unchanged and a 1000-class head; the training formats wrap the
    backbone (DINO: in its full form) as the teacher (and as the student, or `student` when given) beside small
    heads, an optimizer, epoch, args (argparse.Namespace) and a dino_loss center, as DINO's and SelfPatch's
    `train_*.py` save them; an XCiT teacher under `module.backbone.` as DINO's DistributedDataParallel teacher.
    naming: write another naming of the architecture ("ls1.gamma": timm's LayerScale names; "timm": timm's XCiT
    names); default ours. Returns the path.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown checkpoint format {fmt!r}; known: {', '.join(FORMATS)}")
    path = Path(path)
    backbone = _as_state(model_or_state)
    student_backbone = _as_state(student) if student is not None else backbone
    arch = architectures.identify(backbone).architecture

    def full(state: dict[str, Tensor], layout: str = "dino") -> dict[str, Tensor]:
        return architectures.full_form(state, naming, layout)

    if fmt == "backbone":
        state: dict[str, Any] = full(backbone, "backbone")
    elif fmt == "dino-backbone":
        state = full(backbone)
    elif fmt == "deit3":
        state = {DEIT3_GROUP: full(backbone, "deit3")}
    elif fmt == "dino-train":
        prefix = "module.backbone." if arch.ddp_teacher else "backbone."
        state = _training_state(full(backbone), full(student_backbone), fmt, prefix)
    else:
        state = _training_state(full(backbone, "backbone"), full(student_backbone, "backbone"), fmt)
    with atomic_path(path) as tmp:
        if path.suffix == SAFETENSORS_SUFFIX:
            if fmt in TRAINING_FORMATS or fmt == "deit3":
                tensors = flatten_training_groups(state)
                metadata = {"format": fmt} | ({"epoch": str(state["epoch"])} if "epoch" in state else {})
            else:
                tensors = {key: value.contiguous() for key, value in state.items()}
                metadata = {"format": fmt}
            safetensors.torch.save_file(tensors, str(tmp), metadata=metadata)
        else:
            torch.save(state, tmp)
    return path
