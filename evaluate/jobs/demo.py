"""Jobs of workflow/rules/demo.smk: the embedded demo's data sets and seeded checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def demo_dataset(smk: Any) -> None:
    """A procedurally drawn data set with exact masks, in its kind's layout (the kind names its drawing:
    `evaluate.datasets.kinds.KINDS`)."""
    writer: str = smk.params.writer  # "module:callable"
    demo: dict = dict(smk.params.demo)
    out = Path(smk.output[0])

    from evaluate.datasets import resolved

    resolved(writer)(out, **demo)


def demo_checkpoint(smk: Any) -> None:
    """A seeded random network written in one of the real checkpoint formats (evaluate.demo.scenes)."""
    out = Path(smk.output[0])
    fmt, seed, architecture = (str(smk.params.demo["format"]), int(smk.params.demo["seed"]),
                               str(smk.params.demo["architecture"]))

    from evaluate.demo.checkpoints import make_demo_checkpoint

    make_demo_checkpoint(out, fmt=fmt, seed=seed, architecture=architecture)
