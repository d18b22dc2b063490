"""Video test data: the real DAVIS-2016 sequences beside the checkout, and small DAVIS-layout folders drawn here.

`moving_shapes` draws frames of coloured shapes moving over a textured background with their exact object ids; the
product's `evaluate.demo.videos.write_sequence` writes them in DAVIS's layout (JPEG frames, PNG masks: palette with
DAVIS's colours, or grayscale 0/255 as DAVIS-2016).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluate.datasets.davis import write_mask
from evaluate.demo.videos import write_sequence

from sources import DAVIS_MINI


def davis_mini() -> Path:
    """../shared/data/davis2016-mini (3 real DAVIS-2016 sequences, every frame annotated), or a skip with a reason."""
    if not (DAVIS_MINI / "Annotations" / "480p").is_dir():
        pytest.skip(f"real data absent: {DAVIS_MINI} not found (it lies in ../shared beside the checkout)")
    return DAVIS_MINI


def moving_shapes(n_frames: int, size: tuple[int, int], n_objects: int, seed: int = 0):
    """n_frames of (rgb (H, W, 3) uint8, ids (H, W) uint8): object k a coloured rectangle (k odd) or disc (k even)
    moving on a straight line over a smooth textured background; later objects are drawn over earlier ones."""
    rng = np.random.default_rng(seed)
    h, w = size
    yy, xx = np.mgrid[:h, :w]
    background = np.stack([(xx * 255 // max(1, w - 1)), (yy * 255 // max(1, h - 1)), ((xx + yy) * 7) % 256], -1)
    starts = rng.uniform((0.2 * h, 0.2 * w), (0.6 * h, 0.6 * w), size=(n_objects, 2))
    steps = rng.uniform(-0.02, 0.02, size=(n_objects, 2)) * (h, w)
    radii = rng.uniform(0.12, 0.2, size=n_objects) * min(h, w)
    colours = rng.integers(0, 256, size=(n_objects, 3))
    out = []
    for t in range(n_frames):
        rgb = background.astype(np.uint8).copy()
        ids = np.zeros((h, w), np.uint8)
        for k in range(n_objects):
            cy, cx = starts[k] + t * steps[k]
            if k % 2 == 0:
                inside = (np.abs(yy - cy) <= radii[k]) & (np.abs(xx - cx) <= 1.3 * radii[k])
            else:
                inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= radii[k] ** 2
            rgb[inside] = colours[k]
            ids[inside] = k + 1
        out.append((rgb, ids))
    return out


def small_davis(root: Path) -> Path:
    """A DAVIS-layout folder of two short sequences: `shapes2` (two objects, palette masks, 6 frames of 200 x 96 px)
    and `shape1` (one object, grayscale 0/255 masks, 5 frames of 96 x 112 px)."""
    write_sequence(root, "shapes2", moving_shapes(6, (96, 200), 2, seed=1))
    write_sequence(root, "shape1", moving_shapes(5, (112, 96), 1, seed=2), grayscale=True)
    return root


def truth_as_results(davis, out: Path) -> Path:
    """Every mask of a `DavisDataset` written as a result (its ids, palette PNG) under `out/<sequence>/`."""
    from evaluate.datasets.davis import read_mask

    for sequence in davis.sequences:
        for mask in sequence.masks:
            write_mask(out / sequence.name / mask.name, read_mask(mask))
    return out
