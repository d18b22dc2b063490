"""The demo's saliency set: the demo scenes (`evaluate.demo.scenes.make_scene`) in ECSSD's layout (docs/design.md
§16): `images/<name>.jpg` and `ground_truth_mask/<name>.png`, the mask 8-bit grey, 255 on every pixel a shape
painted (the crowd dots and the background 0). Same arguments, same bytes."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image

from evaluate.demo import DemoError
from evaluate.demo.scenes import make_scene
from evaluate.plumbing.atomic import write_bytes
from evaluate.datasets.saliency import SET_LAYOUTS

IMAGES, MASKS = SET_LAYOUTS["ecssd"]


def _encoded(array: np.ndarray, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format=fmt, **options)
    return buffer.getvalue()


def make_demo_saliency(out_dir: str | os.PathLike, *, n_images: int, seed: int) -> Path:
    """Write `n_images` scenes (ids 1..n of `seed`) and their salient masks in ECSSD's layout at `out_dir`; return
    it."""
    if int(n_images) < 1 or int(seed) < 0:
        raise DemoError(f"n_images must be at least 1 and seed non-negative, got {n_images!r} and {seed!r}")
    out = Path(out_dir)
    for image_id in range(1, int(n_images) + 1):
        pixels, _, painted = make_scene(int(seed), image_id)
        name = f"demo_{image_id:04d}"
        mask = np.where(painted > 0, 255, 0).astype(np.uint8)
        write_bytes(out / IMAGES / f"{name}.jpg", _encoded(pixels, "JPEG", quality=95))
        write_bytes(out / MASKS / f"{name}.png", _encoded(mask, "PNG"))
    return out
