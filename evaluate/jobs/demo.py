"""Jobs of workflow/rules/demo.smk: the embedded demo's data sets, video set and seeded checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def demo_dataset(smk: Any) -> None:
    """A procedurally drawn COCO data set with exact masks (evaluate.demo.scenes)."""
    out_dir = Path(smk.output.annotations).parent
    n_images, seed, first_image_id = (int(smk.params.demo[k]) for k in ("n_images", "seed", "first_image_id"))

    from evaluate.demo.scenes import make_demo_dataset

    make_demo_dataset(out_dir, n_images=n_images, seed=seed, first_image_id=first_image_id)


def demo_checkpoint(smk: Any) -> None:
    """A seeded random network written in one of the real checkpoint formats (evaluate.demo.scenes)."""
    out = Path(smk.output[0])
    fmt, seed, architecture = (str(smk.params.demo["format"]), int(smk.params.demo["seed"]),
                               str(smk.params.demo["architecture"]))

    from evaluate.demo.checkpoints import make_demo_checkpoint

    make_demo_checkpoint(out, fmt=fmt, seed=seed, architecture=architecture)


def demo_video(smk: Any) -> None:
    """The demo's DAVIS-layout video set of moving shapes with exact masks (evaluate.demo.videos)."""
    out = Path(smk.output[0])
    n_sequences, n_frames, seed = (int(smk.params.demo[k]) for k in ("n_sequences", "n_frames", "seed"))

    from evaluate.demo.videos import make_demo_videos

    make_demo_videos(out, n_sequences=n_sequences, n_frames=n_frames, seed=seed)


def demo_discovery(smk: Any) -> None:
    """The demo's VOC-layout object-discovery set (evaluate.demo.discovery)."""
    out = Path(smk.output[0])
    n_images, seed = (int(smk.params.demo[k]) for k in ("n_images", "seed"))

    from evaluate.demo.discovery import make_demo_voc

    make_demo_voc(out, n_images=n_images, seed=seed)


def demo_saliency(smk: Any) -> None:
    """The demo's saliency set in ECSSD's layout (evaluate.demo.saliency)."""
    out = Path(smk.output[0])
    n_images, seed = (int(smk.params.demo[k]) for k in ("n_images", "seed"))

    from evaluate.demo.saliency import make_demo_saliency

    make_demo_saliency(out, n_images=n_images, seed=seed)
