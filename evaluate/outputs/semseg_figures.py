"""Unsupervised semantic segmentation figures from the records alone (docs/design.md §18).

Per checkpoint and semseg set (records of kind `semseg`):
- `semseg_{checkpoint}_{dataset}.png`: the set's first images (the record keeps
  `evaluate.semseg.protocol.FIGURE_IMAGES` of them, at most `overlay_images` drawn), one column each: the scored square
  of the image, each pixel coloured by the class its cluster was matched to, and the truth coloured the same way
  (an unsealed set only: a sealed set's record holds no truth; ignored pixels grey);
- `semseg-confusion_{checkpoint}_{dataset}.png`: the set's cluster-by-class confusion M, each cluster's row as the
  share of its pixels per class, the clusters ordered by their matched class, the matched cell of each row outlined.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from evaluate.outputs.drawing import DPI, PALETTE, safe_name, save_png

IGNORED = np.array([128, 128, 128], dtype=np.uint8)  # a pixel labelled 255 (neither class)


def class_colours(n_classes: int) -> np.ndarray:
    """(n_classes, 3) uint8: the palette's colours in turn, darker each round past its length."""
    rounds = np.arange(n_classes) // len(PALETTE)
    return (PALETTE[np.arange(n_classes) % len(PALETTE)] * (0.6 ** rounds)[:, None]).astype(np.uint8)


def coloured(classes: np.ndarray, colours: np.ndarray) -> np.ndarray:
    """(H, W) class indices (255: ignored) -> (H, W, 3) uint8."""
    out = np.empty((*classes.shape, 3), dtype=np.uint8)
    known = classes < len(colours)
    out[known] = colours[classes[known]]
    out[~known] = IGNORED
    return out


def semseg_figures(records: Sequence[dict], out_dir: str | os.PathLike, *, overlay_images: int) -> list[Path]:
    """Write the figures of the module docstring into `out_dir`; return their paths."""
    from evaluate.semseg.protocol import text_png
    from evaluate.pixels.tokens320 import tokens320_pixels
    from evaluate.pixels.images import to_rgb

    from PIL import Image

    out = Path(out_dir)
    files = []
    for rec in sorted((r for r in records if r["kind"] == "semseg" and r["measures"]),
                      key=lambda r: (r["checkpoint"], r["dataset"])):
        name = f"{safe_name(rec['checkpoint'])}_{safe_name(rec['dataset'])}"
        names, to_class = rec["class_names"], np.asarray(rec["cluster_to_class"], dtype=np.int64)
        colours = class_colours(len(names))
        entries = rec.get("figure_images", [])[:overlay_images]
        if entries:
            truth = all("truth" in e for e in entries)
            rows = 3 if truth else 2
            fig = Figure(figsize=(2.4 * len(entries), 2.5 * rows), dpi=DPI)
            for c, entry in enumerate(entries):
                with Image.open(entry["image"]) as img:
                    square = tokens320_pixels(to_rgb(img), int(entry["side"]))
                panels = [(square, f"image {entry['id']}"),
                          (coloured(to_class[text_png(entry["clusters"])], colours), "matched clusters")]
                if truth:
                    panels.append((coloured(text_png(entry["truth"]), colours), "truth"))
                for r, (pixels, title) in enumerate(panels):
                    ax = fig.add_subplot(rows, len(entries), r * len(entries) + c + 1)
                    ax.imshow(pixels, interpolation="nearest")
                    ax.set_title(title, fontsize=7)
                    ax.axis("off")
            legend = ", ".join(f"{i} {n}" for i, n in enumerate(names[:12])) + (" ..." if len(names) > 12 else "")
            fig.suptitle(f"{rec['checkpoint']} on {rec['dataset']}: clusters coloured by their matched class "
                         f"({legend}){'' if truth else '; sealed: no truth drawn'}", fontsize=7)
            files.append(save_png(fig, out / f"semseg_{name}.png"))
        confusion = np.asarray(rec["confusion"], dtype=np.float64)
        order = np.argsort(to_class, kind="stable")
        shares = confusion[order] / np.maximum(confusion[order].sum(axis=1, keepdims=True), 1)
        fig = Figure(figsize=(1.5 + 0.25 * len(names), 1.5 + 0.2 * len(order)), dpi=DPI)
        ax = fig.add_subplot(1, 1, 1)
        ax.imshow(shares, cmap="viridis", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        for row, cluster in enumerate(order):
            ax.add_patch(_cell(ax, row, int(to_class[cluster])))
        ax.set_xticks(range(len(names)), names, rotation=90, fontsize=6)
        ax.set_yticks(range(len(order)), [f"{int(k)}" for k in order], fontsize=6)
        ax.set_xlabel("class", fontsize=7)
        ax.set_ylabel("cluster (ordered by its matched class)", fontsize=7)
        ax.set_title(f"{rec['checkpoint']} on {rec['dataset']}: share of each cluster's pixels per class", fontsize=7)
        fig.tight_layout()
        files.append(save_png(fig, out / f"semseg-confusion_{name}.png"))
    return files


def _cell(ax, row: int, column: int):
    """The outline of one cell of the confusion image."""
    from matplotlib.patches import Rectangle

    return Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="white", linewidth=1.0)
