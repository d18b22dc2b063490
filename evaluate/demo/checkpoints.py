"""The embedded demo's checkpoints: seeded random networks of every architecture, written in the real file formats.

`make_demo_checkpoint(path, fmt, seed, architecture)` saves a network of one of the registry's architectures
(`evaluate.networks.registry`: ViT-S/16, with LayerScale, Aug-ViT-S circulant2, XCiT-S12/16) with its authors' *random*
initialisation (`torch.manual_seed(seed)`) in one of the checkpoint formats. Its features mean nothing: it only
exercises the pipeline (loading, feature extraction, decoding, scoring) end to end. Kept apart from the demo's data
sets (`evaluate.demo.scenes`), so drawing scenes does not depend on the networks' code.

Command line:
    python -m evaluate.demo.checkpoints OUT --format F --seed S --architecture A
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from evaluate.networks.registry import ARCHITECTURES
from evaluate.networks.checkpoints import FORMATS
from evaluate.demo.scenes import DemoError, print_made

CHECKPOINT_FORMATS = FORMATS  # "dino-backbone", "dino-train", "selfpatch-train", "deit3", "backbone"
DEMO_ARCHITECTURES = ARCHITECTURES  # "xcit-s12-16", "augvit-s16", "vit-s16-layerscale", "vit-s16"


def make_demo_checkpoint(path: str | os.PathLike, fmt: str, seed: int, architecture: str) -> Path:
    """Save a randomly initialised network of `architecture` (torch.manual_seed(seed), its authors' init; Aug-ViT
    in its main mode, circulant2) in format `fmt`.

    The weights are random: meaningless for science, they only exercise the pipeline. The global torch random
    state is left as it was.
    """
    import torch

    from evaluate.networks.registry import REGISTRY
    from evaluate.networks.checkpoints import save_backbone

    if fmt not in CHECKPOINT_FORMATS:
        raise DemoError(f"checkpoint format must be one of {', '.join(CHECKPOINT_FORMATS)}, got {fmt!r}")
    if architecture not in DEMO_ARCHITECTURES:
        raise DemoError(f"demo architecture must be one of {', '.join(DEMO_ARCHITECTURES)}, got {architecture!r}")
    arch = REGISTRY[architecture]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = arch.build(arch.variants[0])
    save_backbone(model, path, fmt)
    return Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.demo.checkpoints", description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--format", required=True, choices=CHECKPOINT_FORMATS)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--architecture", required=True, choices=DEMO_ARCHITECTURES)
    args = parser.parse_args(argv)
    return print_made(lambda: make_demo_checkpoint(args.out, args.format, args.seed, args.architecture))


if __name__ == "__main__":
    sys.exit(main())
