"""Figures (`results/figures/`, PNG), regenerated from the ledger and decoder outputs; byte-identical on a re-run.

Determinism: matplotlib's Agg canvas through `matplotlib.figure.Figure` (no pyplot global state), fixed figure
size and dpi, and no `Software` entry in the PNG metadata (the only varying chunk matplotlib writes).

- `measure_figures`: for each eval data set and measure, value against epoch with one line and a 95% interval
  band per run (RUN_FIGSIZE at DPI: 640 x 400 pixels).
- `mask_overlays`: the first K image ids (sorted) of a COCO data set, one row per checkpoint, predicted masks
  from each checkpoint's COCO results file painted over the image (tile of TILE_INCHES at DPI per cell).
- `eigenvector_figure`: one image (resized to 480 x 480, as keys480 sees it) beside its (30, 30) second
  eigenvector (EIGEN_FIGSIZE at DPI: 800 x 400 pixels).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image, ImageOps

from evaluate import EvaluationError
from evaluate.atomic import atomic_path
from evaluate.ledger.records import read_records

DPI = 100
RUN_FIGSIZE = (6.4, 4.0)
EIGEN_FIGSIZE = (8.0, 4.0)
TILE_INCHES = 2.0
PALETTE = np.array([
    [230, 25, 75], [60, 180, 75], [0, 130, 200], [245, 130, 48], [145, 30, 180], [70, 240, 240],
    [240, 50, 230], [210, 245, 60],
], dtype=np.float32)
ALPHA = 0.5


class FigureError(EvaluationError):
    """An input a figure needs is missing or malformed; names the file."""


def save_png(fig: Figure, path: str | os.PathLike) -> Path:
    """Render `fig` with Agg at DPI and write it atomically as a PNG without a Software/time stamp."""
    FigureCanvasAgg(fig)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
    return Path(path)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in str(name))


# ----------------------------------------------------------------------------------- measures against epoch


def measure_figures(ledger_dir: str | os.PathLike, out_dir: str | os.PathLike) -> list[Path]:
    """One PNG per (eval data set, measure): `{dataset}_{measure}.png`, a line and interval band per run.

    Only records with an epoch are drawn; a measure without an interval gets no band.
    """
    records = [r for r in read_records(Path(ledger_dir) / "records") if r["role"] == "eval" and r["epoch"] is not None]
    series: dict[tuple[str, str], dict[str, list[tuple[int, float, float | None, float | None]]]] = {}
    for rec in records:
        run = rec["run"] or rec["checkpoint"]
        for m in rec["measures"]:
            if m["value"] is None:
                continue
            series.setdefault((rec["dataset"], m["measure"]), {}).setdefault(run, []).append(
                (int(rec["epoch"]), float(m["value"]), m["ci_low"], m["ci_high"]))
    files = []
    for (dataset, measure), runs in sorted(series.items()):
        fig = Figure(figsize=RUN_FIGSIZE, dpi=DPI)
        ax = fig.add_subplot(1, 1, 1)
        for k, run in enumerate(sorted(runs)):
            points = sorted(runs[run])
            epochs = [p[0] for p in points]
            colour = PALETTE[k % len(PALETTE)] / 255.0
            ax.plot(epochs, [p[1] for p in points], marker="o", color=colour, label=run)
            if all(p[2] is not None and p[3] is not None for p in points):
                ax.fill_between(epochs, [p[2] for p in points], [p[3] for p in points], color=colour, alpha=0.2,
                                linewidth=0)
        ax.set_xlabel("epoch")
        ax.set_ylabel(measure)
        ax.set_title(f"{measure} on {dataset} (95% interval)")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        files.append(save_png(fig, Path(out_dir) / f"{_safe(dataset)}_{_safe(measure)}.png"))
    return files


# --------------------------------------------------------------------------------------------- mask overlays


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


def mask_overlays(
    images_dir: str | os.PathLike,
    annotations_path: str | os.PathLike,
    results: Mapping[str, str | os.PathLike],
    out_png: str | os.PathLike,
    k: int = 4,
) -> Path:
    """A grid: one row per checkpoint (`results`: name -> COCO results JSON with RLE masks), one column per
    image among the first `k` sorted image ids of the data set (`annotations_path`, images in `images_dir`).

    Masks of an image are drawn highest score first. PNG size: (k * TILE_INCHES * DPI) x
    (len(results) * TILE_INCHES * DPI) pixels.
    """
    annotations = _load_json(Path(annotations_path), "COCO annotations")
    try:
        images = {int(im["id"]): im for im in annotations["images"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise FigureError(f"{annotations_path}: 'images' entries need an 'id' and 'file_name' ({exc})") from exc
    ids = sorted(images)[:k]
    if not ids or not results:
        raise FigureError(f"mask overlays need images and results: {len(ids)} images in {annotations_path}, "
                          f"{len(results)} results files")
    pictures = {}
    for image_id in ids:
        path = Path(images_dir) / images[image_id]["file_name"]
        try:
            with Image.open(path) as im:
                pictures[image_id] = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
        except OSError as exc:
            raise FigureError(f"{path}: cannot open image {image_id} ({exc})") from exc
    names = list(results)
    fig = Figure(figsize=(k * TILE_INCHES, len(names) * TILE_INCHES), dpi=DPI)
    for row, name in enumerate(names):
        entries = _load_json(Path(results[name]), "COCO results")
        if not isinstance(entries, list):
            raise FigureError(f"{results[name]}: COCO results must be a list of detections")
        for col in range(k):
            ax = fig.add_subplot(len(names), k, row * k + col + 1)
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                ax.set_ylabel(name, fontsize="small")
            if col >= len(ids):
                continue
            image_id = ids[col]
            picture = pictures[image_id]
            h, w = picture.shape[:2]
            mine = sorted((e for e in entries if int(e.get("image_id", -1)) == image_id),
                          key=lambda e: -float(e.get("score", 0.0)))
            try:
                masks = [_decode(e["segmentation"], h, w) for e in mine]
            except (KeyError, TypeError, ValueError) as exc:
                raise FigureError(f"{results[name]}: image {image_id} has a malformed RLE segmentation "
                                  f"({exc})") from exc
            ax.imshow(overlay_masks(picture, masks), interpolation="nearest")
            if row == 0:
                ax.set_title(f"image {image_id}", fontsize="small")
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.01, top=0.93, wspace=0.05, hspace=0.05)
    return save_png(fig, out_png)


# ------------------------------------------------------------------------------------------- eigenvector map


def eigenvector_figure(image_path: str | os.PathLike, eigenvector: np.ndarray, out_png: str | os.PathLike,
                       title: str | None = None) -> Path:
    """The image (resized to 480 x 480 as keys480 sees it) beside its second eigenvector, a float (30, 30) map."""
    eigenvector = np.asarray(eigenvector, dtype=np.float64)
    if eigenvector.ndim != 2:
        raise FigureError(f"eigenvector map for {image_path} must be 2-D (30, 30), got shape {eigenvector.shape}")
    try:
        with Image.open(image_path) as im:
            picture = np.asarray(ImageOps.exif_transpose(im).convert("RGB").resize((480, 480), Image.LANCZOS))
    except OSError as exc:
        raise FigureError(f"{image_path}: cannot open image ({exc})") from exc
    fig = Figure(figsize=EIGEN_FIGSIZE, dpi=DPI)
    left = fig.add_subplot(1, 2, 1)
    left.imshow(picture, interpolation="nearest")
    left.set_title(title or Path(image_path).name, fontsize="small")
    right = fig.add_subplot(1, 2, 2)
    shown = right.imshow(eigenvector, cmap="coolwarm", interpolation="nearest")
    right.set_title("second eigenvector", fontsize="small")
    fig.colorbar(shown, ax=right, fraction=0.046, pad=0.04)
    for ax in (left, right):
        ax.set_xticks([])
        ax.set_yticks([])
    return save_png(fig, out_png)


def eigenvector_of_image(manifest: dict, keys480_files: Sequence[str | os.PathLike], settings: Any,
                         image_id: int | None, dataset: str) -> tuple[int, np.ndarray]:
    """(image id, its first cut's eigenvector float64 (30, 30)) for the eigenvector figure.

    image_id: config `figures.eigenvector_image`; None takes the data set's first image. keys480_files: the
    reference checkpoint's keys480 shards of the data set, in shard order.
    """
    from decoders.ncut import GRID, eigenvector
    from evaluate.experiment import ConfigError

    wanted = manifest["image_ids"][0] if image_id is None else int(image_id)
    if wanted not in manifest["image_ids"]:
        raise ConfigError(f"config.yaml: figures.eigenvector_image: image id {wanted} is not in data set {dataset}")
    shard = next(i for i, ids in enumerate(manifest["shards"]) if wanted in ids)
    keys = np.load(keys480_files[shard], mmap_mode="r")[manifest["shards"][shard].index(wanted)]
    return wanted, eigenvector(np.asarray(keys, dtype=np.float32), settings, GRID)
