"""The embedded demo's checkpoints: seeded random networks of every architecture, written in the real file formats.

`make_demo_checkpoint(path, fmt, seed, architecture)` saves a network of one of the registry's architectures
(`evaluate.networks.registry`: ViT-S/16, with LayerScale, Aug-ViT-S circulant2, XCiT-S12/16) with its authors'
*random* initialisation (`torch.manual_seed(seed)`) in one of the checkpoint formats. Its features mean nothing: it
only exercises the pipeline (loading, feature extraction, decoding, scoring) end to end. Kept apart from the demo's
data sets (`evaluate.demo.scenes`), so drawing scenes does not depend on the networks' code.

`save_backbone` writes any backbone in any format of `evaluate.networks.checkpoints.FORMATS`, as the real programs
save them (the reader's counterpart; the tests write their files with it too). The network's full form (class
token, class row, final norm, heads, other namings) is its registry entry's knowledge (`full_form`); the wrapping
around it (training checkpoints' heads, optimizer, args; DeiT III's `model`; safetensors' flattening) is here.

Command line:
    python -m evaluate.demo.checkpoints OUT --format F --seed S --architecture A
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import safetensors.torch
import torch
from torch import Tensor, nn

from evaluate.demo import DemoError, print_made
from evaluate.networks import hf_forms, registry
from evaluate.networks.forms import block_count
from evaluate.networks.checkpoints import DEIT3_GROUP, FORMATS, NESTED_GROUPS, SAFETENSORS_SUFFIX
from evaluate.networks.registry import ARCHITECTURES, REGISTRY
from evaluate.plumbing.atomic import atomic_path

DINOV2_CHUNKS = 4  # DINOv2's `block_chunks`: its trainer splits the blocks four ways

# (backbone, layout) -> the backbone's full form in that layout (`evaluate.networks.forms.LAYOUTS`), in the naming asked
Full = Callable[[Mapping[str, Tensor], str], dict[str, Tensor]]


def _small_head(prefix: str, dim: int, seed: int, out_dim: int = 64) -> dict[str, Tensor]:
    """A small stand-in for a projection head (its shapes do not matter: heads are dropped)."""
    gen = torch.Generator().manual_seed(seed)
    return {
        f"{prefix}mlp.0.weight": torch.randn(32, dim, generator=gen) * 0.02,
        f"{prefix}mlp.0.bias": torch.zeros(32),
        f"{prefix}last_layer.weight_g": torch.ones(out_dim, 1),
        f"{prefix}last_layer.weight_v": torch.randn(out_dim, 32, generator=gen) * 0.02,
    }


def _training_state(teacher_backbone: dict[str, Tensor], student_backbone: dict[str, Tensor], heads: tuple[str, ...],
                    teacher_prefix: str) -> dict[str, Any]:
    """A DINO or SelfPatch training checkpoint as their `train_*.py` save it: the networks beside small `heads` (DINO:
    `head.`; SelfPatch: `ca_head.`, `c_head.`, `p_head.`), an optimizer, epoch, args (argparse.Namespace) and a
    dino_loss center; the student under DistributedDataParallel's `module.backbone.`, the teacher under
    `teacher_prefix`."""
    dim = teacher_backbone["blocks.0.norm1.weight"].shape[-1]
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


def _dino_train(backbone: dict[str, Tensor], student: dict[str, Tensor], full: Full) -> dict[str, Any]:
    ddp = registry.identify(backbone).architecture.ddp_teacher  # DINO wraps a BatchNorm teacher in DDP
    prefix = "module.backbone." if ddp else "backbone."
    return _training_state(full(backbone, "dino"), full(student, "dino"), ("head.",), prefix)


def _dinov2_train(backbone: dict[str, Tensor], student: dict[str, Tensor], full: Full) -> dict[str, Any]:
    """DINOv2's teacher checkpoint as its trainer saves it: `{"teacher": ...}` with `backbone.*` in blocks chunked
    four ways (`backbone.blocks.{c}.{i}.*`, each chunk holding its own blocks' numbers), `dino_head.*`, `ibot_head.*`."""
    released = full(backbone, "dino")
    depth = block_count(released)
    per_chunk = max(1, depth // DINOV2_CHUNKS)
    teacher = {}
    for key, value in released.items():
        match = re.match(r"^blocks\.(\d+)\.", key)
        if match:
            key = f"blocks.{int(match.group(1)) // per_chunk}.{key[len('blocks.'):]}"
        teacher[f"backbone.{key}"] = value
    dim = released["patch_embed.proj.weight"].shape[0]
    for seed, head in enumerate(("dino_head.", "ibot_head.")):
        teacher.update(_small_head(head, dim, seed))
    return {"teacher": teacher}


def _selfpatch_train(backbone: dict[str, Tensor], student: dict[str, Tensor], full: Full) -> dict[str, Any]:
    heads = ("ca_head.", "c_head.", "p_head.")
    return _training_state(full(backbone, "backbone"), full(student, "backbone"), heads, "backbone.")


def _hf(backbone: dict[str, Tensor], student: dict[str, Tensor], full: Full) -> dict[str, Tensor]:
    """The network in Hugging Face's spelling (`save_pretrained`'s `model.safetensors` / `pytorch_model.bin`): its
    released file (class token, registers, final norm) in the names of the base class that holds it."""
    authors = full(backbone, "dino")
    return hf_forms.to_hf(authors, hf_forms.base_class_for(authors))


# format -> (teacher backbone, student backbone, full form) -> the file's top-level dict
WRITERS: dict[str, Callable[[dict[str, Tensor], dict[str, Tensor], Full], dict[str, Any]]] = {
    "dinov2-train": _dinov2_train,
    "dino-train": _dino_train,
    "selfpatch-train": _selfpatch_train,
    "deit3": lambda backbone, student, full: {DEIT3_GROUP: full(backbone, "deit3")},
    hf_forms.FORMAT: _hf,
    "classifier": lambda backbone, student, full: full(backbone, "classifier"),
    "dino-backbone": lambda backbone, student, full: full(backbone, "dino"),
    "backbone": lambda backbone, student, full: full(backbone, "backbone"),
}


def flatten_training_groups(state: Mapping[str, Any]) -> dict[str, Tensor]:
    """The inverse of `evaluate.networks.checkpoints.unflatten_training_groups`: the tensors of the groups
    `student`, `teacher`, `dino_loss`, `model` under `<group>.<key>`, each cloned (safetensors refuses shared
    storage). Other entries are left out."""
    flat: dict[str, Tensor] = {}
    for group in NESTED_GROUPS:
        for key, value in (state.get(group) or {}).items():
            if isinstance(value, Tensor):
                flat[f"{group}.{key}"] = value.detach().clone().contiguous()
    return flat


def write_safetensors(path: Path, tensors: Mapping[str, Tensor], metadata: Mapping[str, str]) -> None:
    """Write a safetensors file whose header lists its string metadata in sorted key order.

    safetensors serialises the metadata from a Rust hash map, in an order that changes from run to run; the header
    is rewritten with the same entries sorted (the same length), so the same tensors always give the same bytes.
    """
    data = memoryview(safetensors.torch.save(dict(tensors), metadata=dict(metadata)))
    length = int.from_bytes(data[:8], "little")
    header = json.loads(bytes(data[8 : 8 + length]))
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    if len(text) > length:  # pragma: no cover - the same entries in another order cannot be longer
        raise ValueError(f"{path}: safetensors header grew when its metadata was sorted")
    with open(path, "wb") as handle:
        handle.write(data[:8])
        handle.write(text.ljust(length))
        handle.write(data[8 + length :])


def _as_state(model_or_state: nn.Module | Mapping[str, Tensor]) -> dict[str, Tensor]:
    state = model_or_state.state_dict() if isinstance(model_or_state, nn.Module) else model_or_state
    return {key: value.detach().clone() for key, value in state.items()}


def save_backbone(
    model_or_state: nn.Module | Mapping[str, Tensor],
    path: str | os.PathLike,
    fmt: str,
    *,
    student: nn.Module | Mapping[str, Tensor] | None = None,
    naming: str | None = None,
) -> Path:
    """Write a backbone (our names, docs/design.md §1, §9) as a checkpoint file in format `fmt` (one of FORMATS),
    atomically. Returns the path.

    The container follows the file name: `*.safetensors` writes safetensors (training formats and DeiT III's
    `model` flattened, `evaluate.networks.checkpoints`' docstring), anything else `torch.save`. The architecture is
    recognised from the backbone's keys and its full form comes from the registry (`registry.full_form`):
    "dino-backbone" a class token, a class row in a (1, 197, 384) pos_embed, a final norm (XCiT: two
    class-attention blocks); "classifier" the same plus a 1000-class head; "deit3" `{"model": ...}` with the 196-row
    table unchanged and a 1000-class head; the training formats wrap the backbone (DINO: in its full form) as the
    teacher (and as the student, or `student` when given) beside small heads, an optimizer, epoch, args and a
    dino_loss center, as DINO's and SelfPatch's `train_*.py` save them; an XCiT teacher under `module.backbone.`
    as DINO's DistributedDataParallel teacher; "hf" the released file in Hugging Face's names (`ViTModel`,
    `Dinov2Model`, `Dinov2WithRegistersModel`, `DINOv3ViTModel`; ArchitectureError for a network none of them
    holds, such as a LayerScale ViT-S/16 in our `gamma_1` names, Aug-ViT or XCiT).
    naming: write another naming of the architecture ("ls1.gamma": timm's LayerScale names; "timm": timm's XCiT
    names); default ours.
    """
    if fmt not in WRITERS:
        raise ValueError(f"unknown checkpoint format {fmt!r}; known: {', '.join(FORMATS)}")
    path = Path(path)
    backbone = _as_state(model_or_state)
    student_backbone = _as_state(student) if student is not None else backbone
    state = WRITERS[fmt](backbone, student_backbone, lambda s, layout: registry.full_form(s, naming, layout))
    with atomic_path(path) as tmp:
        if path.suffix == SAFETENSORS_SUFFIX:
            nested = any(isinstance(value, Mapping) for value in state.values())  # training groups, DeiT III's model
            tensors = flatten_training_groups(state) if nested else {k: v.contiguous() for k, v in state.items()}
            metadata = {"format": fmt} | ({"epoch": str(state["epoch"])} if "epoch" in state else {})
            if fmt == hf_forms.FORMAT:
                metadata = {"format": "pt"}  # what transformers' save_pretrained writes
            write_safetensors(tmp, tensors, metadata)
        else:
            torch.save(state, tmp)
    return path


def make_demo_checkpoint(path: str | os.PathLike, fmt: str, seed: int, architecture: str) -> Path:
    """Save a randomly initialised network of `architecture` (torch.manual_seed(seed), its authors' init; Aug-ViT
    in its main mode, circulant2) in format `fmt`.

    The weights are random: meaningless for science, they only exercise the pipeline. The global torch random
    state is left as it was.
    """
    if fmt not in FORMATS:
        raise DemoError(f"checkpoint format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if architecture not in ARCHITECTURES:
        raise DemoError(f"demo architecture must be one of {', '.join(ARCHITECTURES)}, got {architecture!r}")
    save_backbone(demo_network(architecture, seed), path, fmt, naming=REGISTRY[architecture].variants[0])
    return Path(path)


def demo_network(architecture: str, seed: int) -> nn.Module:
    """A network of `architecture` in its first variant (Aug-ViT: circulant2) initialised after
    torch.manual_seed(seed) by its authors' init, in the backbone form plus its registers (so its file says how many
    it has); the global torch random state is left as it was."""
    arch = REGISTRY[architecture]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return arch.build(arch.variants[0], registers=arch.geometry.registers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.demo.checkpoints", description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--architecture", required=True, choices=ARCHITECTURES)
    args = parser.parse_args(argv)
    return print_made(lambda: make_demo_checkpoint(args.out, args.format, args.seed, args.architecture))


if __name__ == "__main__":
    sys.exit(main())
