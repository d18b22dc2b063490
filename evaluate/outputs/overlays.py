"""Mask overlays: pictures of a data set's images with the decoder's masks on them (PNG and PDF, as every figure:
`evaluate.outputs.figures.save_png`), byte-identical on a re-run.

- `mask_overlays`: the first K image ids (sorted) of a COCO data set, one row per checkpoint: the prediction
  (union of the checkpoint's masks) as a filled region, the ground truth (non-crowd) as an outline, crowd
  (ignore) regions as a dashed outline; each tile titled with the image id and its Jaccard from the record; one
  legend (tile of TILE_INCHES at DPI per cell, plus LEGEND_INCHES on top).
- `gallery_figure`: the same tiles for one checkpoint's worst (top row) and best (bottom row) images by Jaccard.

The overlays read the data set's annotations to draw the ground truth: a drawing, not a score, so it opens no
labels in the ledger's sense (no openings row); every number shown comes from the records. For a sealed data set
(`truth=False`) no ground truth is drawn at all, so a figure never shows labels the budget protects; the legend
says so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from PIL import Image

from evaluate.outputs.drawing import ALPHA, DPI, PALETTE, FigureError, save_png

TILE_INCHES = 2.0
LEGEND_INCHES = 0.6
PREDICTION_COLOUR = (0.0, 0.51, 0.78)  # filled, ALPHA
TRUTH_COLOUR = (1.0, 0.84, 0.0)  # outline
CROWD_COLOUR = (0.85, 0.85, 0.85)  # dashed outline


def _load_json(path: Path, what: str):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FigureError(f"{path}: cannot read {what} ({exc})") from exc


def overlay_masks(image: np.ndarray, masks: Sequence[np.ndarray]) -> np.ndarray:
    """uint8 (H, W, 3) image with each bool (H, W) mask blended in its palette colour (ALPHA); masks in order."""
    out = image.astype(np.float32)
    for k, mask in enumerate(masks):
        colour = PALETTE[k % len(PALETTE)]
        out[mask] = (1 - ALPHA) * out[mask] + ALPHA * colour
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _decode(rle: dict, height: int, width: int) -> np.ndarray:
    from pycocotools import mask as mask_utils  # noqa: PLC0415

    rle = dict(rle)
    if isinstance(rle.get("counts"), str):
        rle["counts"] = rle["counts"].encode("ascii")
    mask = mask_utils.decode(rle).astype(bool)
    if mask.shape != (height, width):
        mask = np.asarray(Image.fromarray(mask).resize((width, height), Image.NEAREST), dtype=bool)
    return mask


def _results_by_image(path: str | os.PathLike) -> dict[int, list[dict]]:
    """A COCO results JSON grouped by image id, each image's masks highest score first."""
    entries = _load_json(Path(path), "COCO results")
    if not isinstance(entries, list):
        raise FigureError(f"{path}: COCO results must be a list of detections")
    out: dict[int, list[dict]] = {}
    for e in entries:
        out.setdefault(int(e.get("image_id", -1)), []).append(e)
    for v in out.values():
        v.sort(key=lambda e: -float(e.get("score", 0.0)))
    return out


def _open_picture(dataset, image_id: int) -> np.ndarray:
    """The image as the readings start from it (`evaluate.pixels.images.open_rgb`): (H, W, 3) uint8."""
    from evaluate.pixels.images import ImageError, open_rgb  # noqa: PLC0415

    try:
        return np.asarray(open_rgb(dataset.image_path(image_id)))
    except ImageError as exc:
        raise FigureError(f"image {image_id}: {exc}") from exc


def _draw_tile(ax, dataset, image_id: int, predictions: list[dict], where: str, title: str, truth: bool) -> None:
    """One overlay tile: the image, the union of `predictions` filled, and when `truth` the ground truth outlined,
    crowd dashed."""
    picture = _open_picture(dataset, image_id)
    h, w = picture.shape[:2]
    try:
        masks = [_decode(e["segmentation"], h, w) for e in predictions]
    except (KeyError, TypeError, ValueError) as exc:
        raise FigureError(f"{where}: image {image_id} has a malformed RLE segmentation ({exc})") from exc
    union = np.zeros((h, w), dtype=bool)
    for m in masks:
        union |= m
    shown = picture.astype(np.float32)
    shown[union] = (1 - ALPHA) * shown[union] + ALPHA * 255.0 * np.asarray(PREDICTION_COLOUR, dtype=np.float32)
    ax.imshow(np.clip(np.rint(shown), 0, 255).astype(np.uint8), interpolation="nearest")
    if truth:
        objects, crowd = dataset.ground_truth(image_id)
        for mask, colour, style in ((objects, TRUTH_COLOUR, "solid"), (crowd, CROWD_COLOUR, "dashed")):
            if mask.any() and not mask.all():
                ax.contour(mask.astype(np.float32), levels=[0.5], colors=[colour], linewidths=1.5, linestyles=style)
            elif mask.all():
                ax.add_patch(Rectangle((-0.5, -0.5), w, h, fill=False, edgecolor=colour, linewidth=3,
                                       linestyle=style))
    ax.set_xlim(-0.5, w - 0.5)
    ax.set_ylim(h - 0.5, -0.5)
    ax.set_title(title, fontsize="small")


SEALED_LEGEND = "ground truth not drawn: the data set is sealed"


def _legend(fig: Figure, truth: bool) -> None:
    handles = [Patch(facecolor=PREDICTION_COLOUR, alpha=ALPHA, label="prediction (filled)")]
    if truth:
        handles += [Line2D([], [], color=TRUTH_COLOUR, linewidth=1.5, label="ground truth (outline)"),
                    Line2D([], [], color=CROWD_COLOUR, linewidth=1.5, linestyle="dashed", label="crowd, ignored")]
    else:
        handles.append(Line2D([], [], linestyle="none", label=SEALED_LEGEND))
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize="small", frameon=False)


def _tile_title(image_id: int, jaccard: Mapping[int, float] | None) -> str:
    if jaccard is None:
        return f"image {image_id}"
    value = jaccard.get(int(image_id))
    return f"image {image_id}, J " + ("left out" if value is None else f"{value:.1f}")


def _grid_figure(n_rows: int, n_cols: int) -> Figure:
    fig = Figure(figsize=(n_cols * TILE_INCHES, n_rows * TILE_INCHES + LEGEND_INCHES), dpi=DPI)
    return fig


def _finish_grid(fig: Figure, truth: bool) -> None:
    height = fig.get_figheight()
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.01, top=1 - LEGEND_INCHES / height, wspace=0.05,
                        hspace=0.18)
    _legend(fig, truth)


def mask_overlays(
    images_dir: str | os.PathLike,
    annotations_path: str | os.PathLike,
    results: Mapping[str, str | os.PathLike],
    out_png: str | os.PathLike,
    k: int = 4,
    jaccard: Mapping[str, Mapping[int, float]] | None = None,
    truth: bool = True,
) -> Path:
    """A grid: one row per checkpoint (`results`: name -> COCO results JSON with RLE masks), one column per
    image among the first `k` sorted image ids of the data set (`annotations_path`, images in `images_dir`).

    jaccard: checkpoint -> image id -> per-image Jaccard in percent (from its decoder record) for the titles.
    truth: draw the ground truth (False for a sealed data set: its labels are not shown).
    PNG size: (k * TILE_INCHES * DPI) x ((len(results) * TILE_INCHES + LEGEND_INCHES) * DPI) pixels.
    """
    from evaluate.datasets.coco import CocoDataset  # noqa: PLC0415

    dataset = CocoDataset(images_dir, annotations_path)
    ids = dataset.image_ids[:k]
    if not ids or not results:
        raise FigureError(f"mask overlays need images and results: {len(ids)} images in {annotations_path}, "
                          f"{len(results)} results files")
    names = list(results)
    fig = _grid_figure(len(names), k)
    for row, name in enumerate(names):
        by_image = _results_by_image(results[name])
        for col in range(k):
            ax = fig.add_subplot(len(names), k, row * k + col + 1)
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                ax.set_ylabel(name, fontsize="small")
            if col < len(ids):
                _draw_tile(ax, dataset, ids[col], by_image.get(ids[col], []), str(results[name]),
                           _tile_title(ids[col], None if jaccard is None else jaccard.get(name, {})), truth)
    _finish_grid(fig, truth)
    return save_png(fig, out_png)


def gallery_figure(
    images_dir: str | os.PathLike,
    annotations_path: str | os.PathLike,
    results_json: str | os.PathLike,
    worst: Sequence[int],
    best: Sequence[int],
    jaccard: Mapping[int, float],
    out_png: str | os.PathLike,
    checkpoint: str,
    truth: bool = True,
) -> Path:
    """One checkpoint's worst images (top row, worst first) and best images (bottom row, best first) as overlay
    tiles; `jaccard`: image id -> per-image Jaccard in percent; `truth` as `mask_overlays`. PNG size as
    `mask_overlays` with 2 rows."""
    from evaluate.datasets.coco import CocoDataset  # noqa: PLC0415

    dataset = CocoDataset(images_dir, annotations_path)
    by_image = _results_by_image(results_json)
    n = max(len(worst), len(best), 1)
    fig = _grid_figure(2, n)
    for row, (label, ids) in enumerate(((f"{checkpoint}: worst", worst), (f"{checkpoint}: best", best))):
        for col in range(n):
            ax = fig.add_subplot(2, n, row * n + col + 1)
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                ax.set_ylabel(label, fontsize="small")
            if col < len(ids):
                _draw_tile(ax, dataset, ids[col], by_image.get(int(ids[col]), []), str(results_json),
                           _tile_title(ids[col], jaccard), truth)
    _finish_grid(fig, truth)
    return save_png(fig, out_png)
