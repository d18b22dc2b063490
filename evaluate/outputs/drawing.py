"""What every figure module shares (`figures`, `overlays`, `attention_figures`, `video_figures`, `saliency_figures`,
`attention_mask_figures`): the resolution, the run figure's size, the palette, a mask's tint and outline, the
error, file names and the one way a figure is saved.

It imports no other module of `evaluate.outputs`, so every figure module can import it (docs/design.md §8: no
import cycle).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from evaluate import EvaluationError
from evaluate.plumbing.atomic import atomic_path

DPI = 100
RUN_FIGSIZE = (6.4, 4.0)
PALETTE = np.array([
    [230, 25, 75], [60, 180, 75], [0, 130, 200], [245, 130, 48], [145, 30, 180], [70, 240, 240],
    [240, 50, 230], [210, 245, 60],
], dtype=np.float32)
ALPHA = 0.5  # a mask's tint over the image


class FigureError(EvaluationError):
    """An input a figure needs is missing or malformed; names the file."""


def tinted(rgb: np.ndarray, mask: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """rgb (H, W, 3) uint8 with `mask` (H, W) bool tinted by `colour` (3,) in float64: (H, W, 3) uint8."""
    out = rgb.astype(np.float64)
    out[mask] = (1 - ALPHA) * out[mask] + ALPHA * colour
    return np.rint(out).astype(np.uint8)


def outline(ax: Any, mask: np.ndarray, colour: Any, width: float) -> None:
    """`mask` (H, W) bool's edge drawn on `ax` in `colour` (a matplotlib colour), unless the mask is empty or full
    (no edge); the outline keeps a mask readable over a shape of its own colour."""
    if mask.any() and not mask.all():
        ax.contour(mask.astype(np.float64), levels=[0.5], colors=[colour], linewidths=width)


def save_png(fig: Figure, path: str | os.PathLike) -> Path:
    """Render `fig` with Agg at DPI and write it atomically as a PNG without a Software stamp, and the same figure
    as a PDF (vector, no CreationDate) beside it (`.pdf` for `.png`); return the PNG's path."""
    FigureCanvasAgg(fig)
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
    with atomic_path(path.with_suffix(".pdf")) as tmp:
        fig.savefig(tmp, format="pdf", dpi=DPI, metadata={"CreationDate": None})
    return path


def safe_name(name: str) -> str:
    """`name` as a part of a file name: letters, digits, '.', '_' and '-' kept, anything else '_'."""
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in str(name))
