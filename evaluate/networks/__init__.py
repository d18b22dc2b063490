"""The networks and their files: the ViT-S/16 family (`vit`), XCiT-S12/16 (`xcit`), DINOv3's ViTs (`dinov3`), what
each architecture's files hold and the converters to our backbone form (`forms`; DINOv3's spellings:
`dinov3_forms`; Hugging Face's: `hf_forms`), the architecture registry (`registry`) and reading checkpoint files
into a backbone (`checkpoints`).

This module holds what the whole package shares and what other packages may name without importing torch: the
error of an unsupported architecture, the architecture and network fields every record carries, the reference
precision, the forms and Aug-ViT's modes, how a message lists keys, and a tensor test that needs no torch. The registry,
the converters and the checkpoint reader import torch only inside the functions that build a network or read a
weight, so the workflow's own process checks a config's architectures and formats without it.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

from evaluate import EvaluationError

# What a loaded checkpoint says about its network (docs/design.md §9): recorded in each feature shard's meta.json,
# copied into every ledger record and scores.csv row.
ARCHITECTURE_FIELDS = ("architecture", "architecture_variant", "head_layout")
# How the network ran (docs/design.md §11): its form and the geometry of its readings, recorded beside the
# architecture fields in meta.json, every ledger record and scores.csv. Records older than them lack them: the seed's
# ViT-S/16 in the backbone form (`SEED_NETWORK`).
NETWORK_FIELDS = ("form", "patch", "width", "registers")
SEED_NETWORK = {"form": "backbone", "patch": 16, "width": 384, "registers": 0}
IDENTITY_FIELDS = ARCHITECTURE_FIELDS + NETWORK_FIELDS
# The network's arithmetic without autocast: the reference every other `features.precision` is measured against, the
# one the video and attention readings always use, and what a record older than the field ran in.
REFERENCE_PRECISION = "float32"
SHOW_KEYS = 5  # how many offending keys a message lists before counting the rest
FORMS = ("backbone", "released")  # the network's form (docs/design.md §11): `features.form`
AUG_MODES = ("linear", "circulant", "linear2", "circulant2")  # the authors' `augvit_small_<mode>` (docs/design.md §9.3)


class ArchitectureError(EvaluationError):
    """A state dict of an architecture that is not supported, or whose keys contradict each other."""


def is_tensor(value: Any) -> bool:
    """Whether `value` is a torch tensor, without importing torch: where torch was never imported, nothing is one."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def describe_keys(keys: Iterable[str]) -> str:
    """The first `SHOW_KEYS` of `keys` in sorted order, then how many more: "a, b, c, d, e and 3 more"."""
    keys = sorted(keys)
    more = len(keys) - SHOW_KEYS
    return ", ".join(keys[:SHOW_KEYS]) + (f" and {more} more" if more > 0 else "")
