"""Checkpoint files: read them safely, recognise their format, take the backbone out (docs/design.md §2, §9).

Every checkpoint is an untrusted file. Pickled (`torch.save`) files are read with `torch.load(weights_only=True)`
and a short allow-list of harmless types that real training checkpoints hold (`SAFE_GLOBALS`): `argparse.Namespace`
(DINO's and SelfPatch's `args`) and numpy scalars with their dtype (DINO's optimizer `param_groups` keep the
learning rate and weight decay as numpy.float64, taken from its numpy schedules). A file that needs any other
global is refused with a `CheckpointError` naming the file and the refused type; its payload never runs.

Formats (`FORMAT_TABLE`), recognised by their keys in the table's order (the first that matches), each unwrapped by
one small pure function to the network's flat state dict:

| format            | what it holds                                                      | what we take               |
|-------------------|--------------------------------------------------------------------|----------------------------|
| "dinov2-train"    | DINOv2's and DINOv3's `{"teacher": ...}`: `backbone.*` (blocks may | the teacher's `backbone.*` |
|                   | be chunked, `backbone.blocks.{c}.{i}.*`), `dino_head.*`,           | (prefix stripped)          |
|                   | `ibot_head.*`                                                      |                            |
| "dino-train"      | `student`, `teacher`, `optimizer`, `epoch`, `args`, `dino_loss`;   | the teacher's `backbone.*` |
|                   | teacher `backbone.*` (DINO form: `backbone.cls_token`), `head.*`   | (prefix stripped); the     |
| "selfpatch-train" | the same; `backbone.*` in SelfPatch form, `ca_head.*`, `c_head.*`, | heads and the rest dropped |
|                   | `p_head.*`                                                         |                            |
| "deit3"           | DeiT III's `{"model": ...}`: `cls_token`, a 196-row `pos_embed`,   | `model` (`module.`         |
|                   | blocks, `norm.*`, `head.*`                                         | stripped), `head.*` out    |
| "hf"              | flat, Hugging Face's names (`ViTModel`, `Dinov2Model`, `Dinov2With | the authors' names back    |
|                   | RegistersModel`, `DINOv3ViTModel`; task models' `vit.`, `dinov2.`, | (`evaluate.networks.       |
|                   | `dinov2_with_registers.` prefixes, `classifier.*`, `pooler.*`)     | hf_forms`), heads dropped  |
| "classifier"      | flat, as "dino-backbone" plus `head.weight`, `head.bias` (the      | `head.*` dropped (logged)  |
|                   | Aug-ViT authors' and timm's supervised releases)                   |                            |
| "dino-backbone"   | flat: `cls_token`, `pos_embed` (1, 197, 384), blocks, `norm.*`     | as it is                   |
| "backbone"        | flat: our names (docs/design.md §1, §9), no class token            | as it is                   |

The format says how the network's state dict is wrapped; the registry (`evaluate.networks.registry`) recognises the
architecture inside it from its keys and shapes, and that architecture's converter takes out what the
class-token-free backbone form leaves out (class token, a class row of the position table, final norm, XCiT's
class-attention blocks, Aug-ViT's derived index matrices) and renames other namings (timm's `ls1.gamma`, XCiT's
`pos_embed.`) to ours.

A torch distributed checkpoint (DCP: a folder of `.metadata` and `*.distcp` shards, as DINOv3's trainer writes
`ckpt/<it>/` and `sharded_teacher_checkpoint/`) is refused before anything is read: torch reads `.metadata` with
plain pickle. The message names `torch.distributed.checkpoint.format_utils.dcp_to_torch_save`.

Student weights (`student`, keys `module.backbone.*` from DistributedDataParallel) are read only when asked for
with `which="student"`. A teacher may read `backbone.*` or, where DINO wrapped it in DistributedDataParallel (XCiT,
whose BatchNorm makes DINO convert and wrap it), `module.backbone.*`. Prefixes (`module.`, `backbone.`) are stripped
only where a key starts with them.

safetensors files hold any of these formats as tensors: a flat format as its own state dict; a training checkpoint
(and DeiT III's `model`) flattened one level, each tensor of its `student`, `teacher` and `dino_loss` state dicts under
`<group>.<key>` (e.g. `teacher.backbone.pos_embed`), `epoch` and the format in the string metadata, the non-tensor
parts not stored. `read_checkpoint_file` nests such a file back by its first name component. (Writing any of these
files is the demo's: `evaluate.demo.checkpoints.save_backbone`.)

After conversion the backbone is loaded strictly (`evaluate.networks.registry.materialise`): a missing or unexpected
key, a wrong shape (a tensor that contradicts the recognised entry's width or patch), a non-float or non-finite tensor is a `CheckpointError`
naming the file and the keys; an unsupported architecture (CaiT, XCiT patch 8, another width, patch or depth) also
says what was found and what is supported. The file's sha256 and the architecture travel with the model in
`LoadedCheckpoint`.
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from evaluate import EvaluationError
from evaluate.networks import ArchitectureError, describe_keys, dinov3_forms, hf_forms
from evaluate.networks import registry as architectures
from evaluate.networks.containers import container_of, verify_torch_zip
from evaluate.networks.forms import unchunked
from evaluate.networks.registry import Identified
from evaluate.plumbing.provenance import sha256_file

if TYPE_CHECKING:  # torch is imported where a file is read (the registry's own note says why)
    from torch import Tensor, nn

log = logging.getLogger("evaluate.networks.checkpoints")

WHICH = ("teacher", "student")
# The groups of a training checkpoint that hold tensors; a flat safetensors file stores them as `<group>.<key>`.
TRAINING_GROUPS = ("student", "teacher", "dino_loss")
DEIT3_GROUP = "model"  # DeiT III's file: {"model": state dict}, stored flat as `model.<key>` in safetensors
NESTED_GROUPS = TRAINING_GROUPS + (DEIT3_GROUP,)
SAFETENSORS_SUFFIX = ".safetensors"
DCP_METADATA, DCP_SHARD = ".metadata", ".distcp"  # a torch distributed checkpoint's parts
DCP_CONVERTER = "torch.distributed.checkpoint.format_utils.dcp_to_torch_save"

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


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A backbone loaded from a checkpoint file.

    model: the network in eval mode, float32 on CPU (`evaluate.networks.vit.VisionTransformer` or
    `evaluate.networks.xcit.XCiT`: both have `last_keys` and `tokens`); format: one of FORMATS; which: the network
    taken ("teacher" or "student"); sha256: of the file's bytes; path: the file; dropped: the keys of the selected
    state dict that were not taken (e.g. `cls_token`, `pos_embed[0]`, `norm.weight`, heads); identified: its
    registry entry and variant (LayerScale naming, Aug-ViT mode, XCiT naming, "plain"); spelling: what meta.json
    records of a DINOv3 network's or a Hugging Face file's spelling (`dinov3_forms.meta`, `hf_forms.meta`), else
    nothing.
    """

    model: nn.Module
    format: str
    which: str
    sha256: str
    path: Path
    dropped: list[str]
    identified: Identified
    form: str = "backbone"
    position_rule: str = "dino"
    spelling: dict[str, Any] = field(default_factory=dict)

    @property
    def architecture(self) -> str:
        """A name of `evaluate.networks.registry.REGISTRY`."""
        return self.identified.name

    @property
    def variant(self) -> str:
        return self.identified.variant

    @property
    def head_layout(self) -> str:
        """The attention heads: "6x64" or "8x48"."""
        return self.identified.head_layout

    def architecture_meta(self) -> dict[str, str]:
        """The architecture fields recorded in meta.json (`evaluate.networks.ARCHITECTURE_FIELDS`)."""
        return self.identified.as_meta()

    def file_meta(self) -> dict[str, Any]:
        """What a reading records of the file it ran (meta.json, a video run file): its path, sha256 and format,
        the architecture fields, the network taken, its form, position rule and geometry (patch, width, depth,
        registers, both grids), and for a DINOv3 network or a Hugging Face file its spelling's fields."""
        return {"checkpoint_path": str(self.path), "checkpoint_sha256": self.sha256, "checkpoint_format": self.format,
                **self.architecture_meta(), "which": self.which, "form": self.form,
                "position_rule": self.position_rule, **self.model.geometry.as_meta(), **self.spelling}


# ----------------------------------------------------------------------------------------------------- reading files


def _refused_global(message: str) -> str | None:
    """The type torch's weights-only unpickler refused, from its message (it words refusals in several ways)."""
    for pattern in (r"GLOBAL ([\w.]+)", r"but got <class '([\w.]+)'>", r"reduce for ([\w.]+)"):
        match = re.search(pattern, message)
        if match:
            return match.group(1)
    return None


def _read_safetensors(path: Path) -> dict[str, Any]:
    import safetensors.torch

    try:
        flat = safetensors.torch.load_file(str(path), device="cpu")
    except Exception as exc:  # safetensors raises its own error types for truncated or malformed files
        raise CheckpointError(f"{path}: not a readable safetensors file ({type(exc).__name__}: {exc})") from exc
    return unflatten_training_groups(flat)


def _read_torch(path: Path) -> Any:
    import torch

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
        raise CheckpointError(
            f"{path}: not a readable checkpoint, truncated or corrupt ({type(exc).__name__}: {first})"
        ) from None


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


def _refuse_distributed_checkpoint(path: Path) -> None:
    """CheckpointError for a torch distributed checkpoint (a folder holding `.metadata` and `*.distcp` shards, or
    one of its parts): torch reads `.metadata` with plain pickle, which section 2 forbids; nothing is opened."""
    part = path.name == DCP_METADATA or path.suffix == DCP_SHARD
    folder = path.parent if part else path
    if not part and not (path.is_dir() and (path / DCP_METADATA).is_file() and any(path.glob(f"*{DCP_SHARD}"))):
        return
    shards = len(list(folder.glob(f"*{DCP_SHARD}")))
    raise CheckpointError(
        f"{path}: found a torch distributed checkpoint (DCP) {'part' if part else 'folder'} ({DCP_METADATA} and "
        f"{shards} *{DCP_SHARD} shards), which is not read: torch reads its {DCP_METADATA} with plain pickle, which "
        f"can run code; where you trust it, convert it once with {DCP_CONVERTER}('{folder}', 'checkpoint.pth') and "
        "name that file"
    )


def read_checkpoint_file(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint's top-level dict, read without running any code it may carry.

    What the file is goes by its first bytes (`evaluate.networks.containers`): a file of another kind is refused
    naming what it is. Pickled files (zip or legacy `torch.save`) go through `torch.load(weights_only=True)` with
    `SAFE_GLOBALS`, a zip archive once every member passed its CRC-32 check; safetensors files (recognised by their
    header, whatever their name) are read as tensors and a flattened training checkpoint is nested back (see the
    module docstring). Raises CheckpointError naming the file when it is missing, a folder (a distributed
    checkpoint's too), empty, truncated, corrupt, not a checkpoint, needs a refused global, or holds something other
    than a dict.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: checkpoint file not found")
    _refuse_distributed_checkpoint(path)
    if path.is_dir():
        raise CheckpointError(f"{path}: is a folder, not a checkpoint file")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path}: checkpoint file is empty (0 bytes)")
    container = "safetensors" if path.suffix == SAFETENSORS_SUFFIX else container_of(path, CheckpointError)
    if container == "safetensors":
        state = _read_safetensors(path)
    else:
        if container == "torch-zip":
            verify_torch_zip(path, CheckpointError)
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


# ----------------------------------------------------------------------------------------------------- formats


def _strip_prefix(state: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Keys that start with `prefix`, with it removed; a key holding `prefix` elsewhere is not touched (nor taken)."""
    return {key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)}


def _without_ddp_prefix(state: Mapping[str, Any]) -> dict[str, Any]:
    """DistributedDataParallel's `module.` prefix removed where a key starts with it; other keys as they are."""
    unprefixed = {key: value for key, value in state.items() if not key.startswith("module.")}
    return {**unprefixed, **_strip_prefix(state, "module.")}


def _without_head(state: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A classifier's network: every `head.*` key dropped, whatever its shape."""
    taken = {key: value for key, value in state.items() if not key.startswith("head.")}
    return taken, sorted(key for key in state if key.startswith("head."))


def _training_keys(state: Mapping[str, Any]) -> set[str] | None:
    """The teacher's keys (without a teacher, the student's), `module.` removed; None when `state` holds neither."""
    teacher, student = state.get("teacher"), state.get("student")
    if not isinstance(teacher, Mapping) and not isinstance(student, Mapping):
        return None
    return set(_without_ddp_prefix(teacher if isinstance(teacher, Mapping) else student))


def _is_dinov2_train(state: Mapping[str, Any]) -> bool:
    keys = _training_keys(state)
    return keys is not None and "backbone.cls_token" in keys and any(k.startswith("dino_head.") for k in keys)


def _is_dino_train(state: Mapping[str, Any]) -> bool:
    keys = _training_keys(state)
    return keys is not None and "backbone.cls_token" in keys


def _is_selfpatch_train(state: Mapping[str, Any]) -> bool:
    keys = _training_keys(state)
    return keys is not None and "backbone.cls_token" not in keys


def _is_deit3(state: Mapping[str, Any]) -> bool:
    return _training_keys(state) is None and isinstance(state.get(DEIT3_GROUP), Mapping)


def _is_flat(state: Mapping[str, Any]) -> bool:
    """A network's own state dict: neither a training checkpoint nor DeiT III's `{"model": ...}`."""
    return _training_keys(state) is None and not _is_deit3(state)


def _is_hf(state: Mapping[str, Any]) -> bool:
    return _is_flat(state) and hf_forms.model_class(state) is not None


def _unwrap_hf(state: Mapping[str, Any], which: str) -> tuple[dict[str, Any], list[str]]:
    """Hugging Face's names back to the authors' (`hf_forms.hf_to_authors`): task prefix, `classifier.*` and
    `pooler.*` off."""
    return hf_forms.hf_to_authors(state)


def _is_classifier(state: Mapping[str, Any]) -> bool:
    return _is_flat(state) and "cls_token" in state and any(str(key).startswith("head.") for key in state)


def _is_dino_backbone(state: Mapping[str, Any]) -> bool:
    return _is_flat(state) and "cls_token" in state


def _is_backbone(state: Mapping[str, Any]) -> bool:
    keys = [str(key) for key in state]
    return (_is_flat(state) and any(key.startswith("patch_embed.") for key in keys)
            and any(key.startswith("blocks.") for key in keys))


def _select_training_state(state: Mapping[str, Any], which: str) -> dict[str, Any]:
    """The teacher's or the student's state dict, DistributedDataParallel's `module.` prefix removed (the student's
    always has it; an XCiT teacher has it too)."""
    if which not in WHICH:
        raise CheckpointError(f"which must be one of {WHICH}, got {which!r}")
    chosen = state.get(which)
    if not isinstance(chosen, Mapping):
        raise CheckpointError(
            f"training checkpoint has no {which!r} state dict (top-level keys: {describe_keys(list(state))})"
        )
    return _without_ddp_prefix(chosen)


def _unwrap_training(state: Mapping[str, Any], which: str) -> tuple[dict[str, Any], list[str]]:
    """DINO, DINOv2 and SelfPatch training checkpoints: the teacher's (or student's) `backbone.*`, prefix stripped,
    DINOv2's chunked blocks (`blocks.{c}.{i}.*`) un-chunked (`evaluate.networks.forms.unchunked`);
    the heads (DINO's `head.*`, DINOv2's `dino_head.*` and `ibot_head.*`, SelfPatch's `ca_head.*`, `c_head.*`,
    `p_head.*`) and anything else dropped."""
    weights = _select_training_state(state, which)
    taken = unchunked(_strip_prefix(weights, "backbone."))
    if not taken:
        raise CheckpointError(f"no `backbone.*` weights (keys: {describe_keys(list(weights))})")
    return taken, sorted(key for key in weights if not key.startswith("backbone."))


def _unwrap_deit3(state: Mapping[str, Any], which: str) -> tuple[dict[str, Any], list[str]]:
    """DeiT III's `{"model": ...}`: the model's state dict (`module.` stripped as a prefix), `head.*` dropped."""
    return _without_head(_without_ddp_prefix(state[DEIT3_GROUP]))


def _unwrap_classifier(state: Mapping[str, Any], which: str) -> tuple[dict[str, Any], list[str]]:
    """A released classifier: the flat state dict with its `head.*` dropped."""
    return _without_head(state)


def _unwrap_flat(state: Mapping[str, Any], which: str) -> tuple[dict[str, Any], list[str]]:
    """DINO's released backbone and ours: the network's state dict as it is (its architecture's converter takes
    out what the backbone form leaves out)."""
    return dict(state), []


@dataclass(frozen=True)
class Format:
    """One checkpoint format: recognise(top-level dict) -> bool; unwrap(top-level dict, which) -> (the network's
    flat state dict, dropped keys), pure; training: holds a teacher and a student (else one set of weights)."""

    name: str
    recognise: Callable[[Mapping[str, Any]], bool]
    unwrap: Callable[[Mapping[str, Any], str], tuple[dict[str, Any], list[str]]]
    training: bool = False


# Tried in this order; the first format whose keys match is the file's.
FORMAT_TABLE: dict[str, Format] = {
    fmt.name: fmt
    for fmt in (
        Format("dinov2-train", _is_dinov2_train, _unwrap_training, training=True),
        Format("dino-train", _is_dino_train, _unwrap_training, training=True),
        Format("selfpatch-train", _is_selfpatch_train, _unwrap_training, training=True),
        Format("deit3", _is_deit3, _unwrap_deit3),
        Format(hf_forms.FORMAT, _is_hf, _unwrap_hf),
        Format("classifier", _is_classifier, _unwrap_classifier),
        Format("dino-backbone", _is_dino_backbone, _unwrap_flat),
        Format("backbone", _is_backbone, _unwrap_flat),
    )
}
FORMATS = tuple(FORMAT_TABLE)


def detect_format(state: Mapping[str, Any]) -> str:
    """The first format of FORMAT_TABLE whose keys `state` (a checkpoint's top-level dict) has.

    A dict with a `teacher` or `student` dict is a training checkpoint: "dino-train" when its teacher backbone has
    DINO's class token (`backbone.cls_token`, or `module.backbone.cls_token`), else "selfpatch-train". A dict with
    a `model` dict is DeiT III's "deit3". Otherwise a flat state dict: "hf" in Hugging Face's names, "classifier"
    when it has `cls_token` and a `head.*`, "dino-backbone" when it has `cls_token`, "backbone" when it has a patch
    embedding (`patch_embed.*`) and blocks. Anything else raises CheckpointError: a DINOv3 ConvNeXt by name, others
    listing some of their keys.
    """
    for fmt in FORMAT_TABLE.values():
        if fmt.recognise(state):
            return fmt.name
    refused = dinov3_forms.refusal(state)  # a ConvNeXt holds no ViT keys at all
    if refused:
        raise CheckpointError(f"{refused}; {architectures.SUPPORTED}")
    raise CheckpointError(
        "not a recognised checkpoint format (expected a DINO or SelfPatch backbone or training checkpoint); "
        f"top-level keys: {describe_keys([str(k) for k in state])}"
    )


def unwrap_checkpoint(state: Mapping[str, Any], fmt: str, which: str) -> tuple[dict[str, Any], list[str]]:
    """(the network's flat state dict, dropped keys) for a checkpoint's top-level dict in format `fmt` (pure):
    the format's wrapping and heads taken off, the architecture's own extras still in. which: "teacher" or
    "student" (training formats only)."""
    if fmt not in FORMAT_TABLE:
        raise CheckpointError(f"unknown checkpoint format {fmt!r}; known: {', '.join(FORMATS)}")
    if not FORMAT_TABLE[fmt].training and which != "teacher":
        raise CheckpointError(f"a {fmt} checkpoint holds one set of weights, no {which!r}; ask for the teacher")
    return FORMAT_TABLE[fmt].unwrap(state, which)


def _converted(
    state: Mapping[str, Any], fmt: str, which: str, form: str
) -> tuple[Identified, dict[str, Any], list[str], list[str]]:
    """(architecture and variant, state dict of `form`, keys the format dropped, keys the form left out)."""
    network, unwrapped = unwrap_checkpoint(state, fmt, which)
    identified, weights, left_out = architectures.convert(network, form)
    return identified, weights, unwrapped, left_out


def convert_checkpoint(state: Mapping[str, Any], fmt: str, which: str,
                       form: str = "backbone") -> tuple[dict[str, Tensor], list[str]]:
    """(state dict of `form`, dropped keys) for a checkpoint's top-level dict in format `fmt` (pure): the format's
    unwrapping (`unwrap_checkpoint`), then the architecture's converter (`evaluate.networks.registry.convert`).
    Raises CheckpointError (an unknown or unsupported architecture too)."""
    try:
        _, weights, unwrapped, left_out = _converted(state, fmt, which, form)
    except ArchitectureError as exc:
        raise CheckpointError(str(exc)) from None
    return weights, unwrapped + left_out


# ----------------------------------------------------------------------------------------------------- loading


def load_backbone(path: str | os.PathLike, which: str, form: str,
                  position_rule: str | None = None) -> LoadedCheckpoint:
    """Read `path`, detect its format and architecture, convert and strictly load the network in `form` (eval mode,
    CPU, float32; BatchNorm with the file's running statistics). What was left out is logged.

    which: "teacher" or "student" (training checkpoints only; the config's `checkpoints.*.which`). form: "backbone"
    (the seed's protocol: class token, registers and final norm out) or "released" (as its authors run it;
    docs/design.md §11). position_rule: how the position table is resampled ("dino" or "antialias"; the
    checkpoint entry's `position_rule`); None takes the architecture's default for the file's format. Every error
    is a CheckpointError whose message starts with the file; an unsupported architecture's says what was found and
    what is supported.
    """
    path = Path(path)
    state = read_checkpoint_file(path)
    try:
        fmt = detect_format(state)
        identified, weights, unwrapped, left_out = _converted(state, fmt, which, form)
        rule = position_rule or identified.architecture.default_position_rule(FORMAT_TABLE[fmt].training)
        model = architectures.materialise(identified, weights, rule, form)
    except (CheckpointError, ArchitectureError) as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    spelling = spelling_meta(state, fmt, identified, model, unwrapped, unwrapped + left_out)
    log.info("%s: a %s checkpoint, its %s: %s (%s), %s form, position rule %s; dropped by the format: %s; left out "
             "of the form: %s", path, fmt, which, identified.architecture.title, identified.variant, form, rule,
             describe_keys(unwrapped) or "nothing", describe_keys(left_out) or "nothing")
    return LoadedCheckpoint(model=model, format=fmt, which=which, sha256=sha256_file(path), path=path,
                            dropped=unwrapped + left_out, identified=identified, form=form, position_rule=rule,
                            spelling=spelling)


def spelling_meta(state: Mapping[str, Any], fmt: str, identified: Identified, model: nn.Module,
                  unwrapped: list[str], dropped: list[str]) -> dict[str, Any]:
    """meta.json's spelling fields: a Hugging Face file's (`hf_forms.meta`: class, prefix, keys the format dropped)
    and a DINOv3 network's (`dinov3_forms.meta`: spelling "hub", "timm", "hf" or "teacher", FFN, storage tokens,
    the periods' source); nothing for other files."""
    meta = hf_forms.meta(state, unwrapped) if fmt == hf_forms.FORMAT else {}
    if isinstance(identified.architecture, architectures.RopeArchitecture):
        spelling = (hf_forms.FORMAT if fmt == hf_forms.FORMAT else
                    dinov3_forms.TEACHER if FORMAT_TABLE[fmt].training else identified.variant)
        meta |= dinov3_forms.meta(spelling, model, dropped)
    return meta
