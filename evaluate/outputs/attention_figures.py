"""Figures of the attention-spread reading (docs/design.md §13), from the `attention` records and the per-patch rows.

- `attention_heatmap`: one checkpoint on one data set, blocks as rows and heads as columns, the spread (percent of
  the patches) and the entropy (nats) side by side, each cell printed (HEATMAP_FIGSIZE at DPI: 900 x 500 pixels).
- `head_spread_figure`: one run on one data set, the last block's spread of each head against epoch, one line per
  head (RUN_FIGSIZE).
- `patch_rows_figure`: one image (224 x 224, as tokens224 sees it) with its query patch outlined, then what each head
  of the last block looks at from that patch: its attention row over the network's g x g grid (g = sqrt(N), p =
  224 / g pixels a patch), drawn over the image.
`attention_figures` makes every one of them for the figures job. A network without patch attention (XCiT) gets no
attention figure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from evaluate.attention.summary import ENTROPY, SPREAD
from evaluate.outputs.drawing import DPI, PALETTE, RUN_FIGSIZE, FigureError, safe_name, save_png
from evaluate.scores import catalogue
from evaluate.outputs.views import attention_records

HEATMAP_FIGSIZE = (9.0, 5.0)
ROWS_PANEL = 2.0  # inches per panel of the per-patch figure


def attention_heatmap(tables: Mapping, title: str, out_png: str | os.PathLike) -> Path:
    """tables: a record's `attention_tables` ({"blocks", "heads", "attention_spread": blocks lists of heads
    floats in percent, "attention_entropy": the same in nats})."""
    fig = Figure(figsize=HEATMAP_FIGSIZE, dpi=DPI)
    for k, (name, unit) in enumerate(((SPREAD, "% of patches"), (ENTROPY, "nats"))):
        digits = catalogue.measure(name).digits
        values = np.asarray(tables[name], dtype=np.float64)
        ax = fig.add_subplot(1, 2, k + 1)
        image = ax.imshow(values, cmap="viridis", aspect="auto")
        blocks, heads = values.shape
        ax.set_xticks(range(heads), [str(h + 1) for h in range(heads)])
        ax.set_yticks(range(blocks), [str(b + 1) for b in range(blocks)])
        ax.set_xlabel("head")
        ax.set_ylabel("block")
        ax.set_title(f"{name.replace('_', ' ')} ({unit})", fontsize="medium")
        middle = (values.max() + values.min()) / 2
        for b in range(blocks):
            for h in range(heads):
                ax.text(h, b, f"{values[b, h]:.{digits}f}", ha="center", va="center", fontsize=6,
                        color="black" if values[b, h] > middle else "white")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.suptitle(title)
    fig.tight_layout()
    return save_png(fig, out_png)


def head_spread_figure(points: Sequence[tuple[int, Sequence[float]]], title: str, out_png: str | os.PathLike) -> Path:
    """points: (epoch, the last block's spread of each head in percent) per checkpoint of a run."""
    points = sorted(points)
    heads = len(points[0][1])
    fig = Figure(figsize=RUN_FIGSIZE, dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    epochs = [p[0] for p in points]
    for h in range(heads):
        ax.plot(epochs, [p[1][h] for p in points], marker="o", color=PALETTE[h % len(PALETTE)] / 255.0,
                label=f"head {h + 1}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("attention spread, last block (% of patches)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return save_png(fig, out_png)


def patch_rows_figure(pixels224: np.ndarray, rows: np.ndarray, patch: int, title: str,
                      out_png: str | os.PathLike) -> Path:
    """pixels224: (224, 224, 3) uint8; rows: (heads, N) float, each head's weights over the patches from `patch`
    (row by row in the g x g grid, g = sqrt(N); a patch is 224 / g pixels: 16, 8 or 14)."""
    heads, n = rows.shape
    side = int(round(n**0.5))
    px = pixels224.shape[0] // side if side else 0  # p: pixels per patch side
    if side * side != n or px == 0 or pixels224.shape[:2] != (side * px, side * px):
        raise FigureError(f"attention rows {rows.shape} do not fit an image of {pixels224.shape}")
    fig = Figure(figsize=(ROWS_PANEL * (heads + 1), ROWS_PANEL + 0.6), dpi=DPI)
    row, col = divmod(int(patch), side)
    for k in range(heads + 1):
        ax = fig.add_subplot(1, heads + 1, k + 1)
        ax.imshow(pixels224)
        if k:
            weights = rows[k - 1].reshape(side, side)
            ax.imshow(weights, cmap="inferno", alpha=0.7, extent=(0, side * px, side * px, 0),
                      interpolation="nearest")
            ax.set_title(f"head {k}, max {100 * weights.max():.1f}%", fontsize="small")
        else:
            ax.set_title("query patch", fontsize="small")
        ax.add_patch(Rectangle((col * px - 0.5, row * px - 0.5), px, px, fill=False, edgecolor="cyan",
                               linewidth=1.5))
        ax.set_axis_off()
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return save_png(fig, out_png)


def attention_figures(records: Sequence[dict], out_dir: str | os.PathLike,
                      rows_files: Mapping[str, str | os.PathLike] | None = None) -> list[Path]:
    """Every attention figure: a heatmap per checkpoint and eval data set (`attention-heatmap_{dataset}_{ckpt}`),
    a per-head spread against epoch per run with an epoch (`attention-heads_{dataset}_{run}`), and the per-patch
    figure of each checkpoint in `rows_files` (checkpoint -> the `attention_rows` job's .npz;
    `attention-patch_{dataset}_{ckpt}`). Returns the PNG paths."""
    out = Path(out_dir)
    files: list[Path] = []
    for dataset, recs in sorted(attention_records(records).items()):
        runs: dict[str, list[tuple[int, list[float]]]] = {}
        for rec in recs:
            tables = rec.get("attention_tables")
            if tables is None:
                continue
            name = f"attention-heatmap_{safe_name(dataset)}_{safe_name(rec['checkpoint'])}.png"
            files.append(attention_heatmap(tables, f"{rec['checkpoint']} on {dataset}: attention per block and head",
                                           out / name))
            if rec["epoch"] is not None:
                runs.setdefault(rec["run"] or rec["checkpoint"], []).append(
                    (int(rec["epoch"]), tables["attention_spread"][-1]))
        for run, points in sorted(runs.items()):
            files.append(head_spread_figure(points, f"run {run} on {dataset}: last block's spread per head",
                                            out / f"attention-heads_{safe_name(dataset)}_{safe_name(run)}.png"))
    for checkpoint, path in sorted((rows_files or {}).items()):
        try:
            with np.load(path, allow_pickle=False) as saved:
                if "rows" not in saved:
                    continue  # no attention over patches (XCiT)
                image_id, patch = int(saved["image_id"]), int(saved["patch"])
                rows, pixels = saved["rows"], saved["pixels224"]
        except (OSError, KeyError, ValueError) as exc:
            raise FigureError(f"{path}: not a readable attention rows file ({exc}); delete it and re-run") from None
        dataset = Path(path).stem
        files.append(patch_rows_figure(
            pixels, rows, patch, f"{checkpoint}, image {image_id}: last block's attention from patch {patch}",
            out / f"attention-patch_{safe_name(dataset)}_{safe_name(checkpoint)}.png"))
    return files
