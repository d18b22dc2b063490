"""Figures (`results/figures/`: PNG, and the same figure as PDF beside it for LaTeX), regenerated from the ledger
and decoder outputs; byte-identical on a re-run.

Determinism: matplotlib's Agg canvas through `matplotlib.figure.Figure` (no pyplot global state), fixed figure
size and dpi, no `Software` entry in the PNG metadata and no `CreationDate` in the PDF (the only varying parts
matplotlib writes).

- `measure_figures`: for each eval data set and measure, value against epoch with one line and a 95% interval
  band per run (RUN_FIGSIZE at DPI: 640 x 400 pixels).
- `mask_overlays`: the first K image ids (sorted) of a COCO data set, one row per checkpoint: the prediction
  (union of the checkpoint's masks) as a filled region, the ground truth (non-crowd) as an outline, crowd
  (ignore) regions as a dashed outline; each tile titled with the image id and its Jaccard from the record; one
  legend (tile of TILE_INCHES at DPI per cell, plus LEGEND_INCHES on top).
- `gallery_figure`: the same tiles for one checkpoint's worst (top row) and best (bottom row) images by Jaccard.
- `sweep_heatmap`: mean Jaccard of every sweep setting, tau as rows against the other settings as columns, the
  selected setting outlined.
- `agreement_scatter`: one measure against another across checkpoints (points with both 95% intervals, each
  checkpoint named), Kendall's tau and its interval in the title.
- `eigenvector_figure`: one image (resized to 480 x 480, as keys480 sees it) beside its (30, 30) second
  eigenvector (EIGEN_FIGSIZE at DPI: 800 x 400 pixels).

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
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from PIL import Image

from evaluate import EvaluationError
from evaluate.plumbing.atomic import atomic_path
from evaluate.ledger.records import read_records

DPI = 100
RUN_FIGSIZE = (6.4, 4.0)
EIGEN_FIGSIZE = (8.0, 4.0)
TILE_INCHES = 2.0
LEGEND_INCHES = 0.6
PREDICTION_COLOUR = (0.0, 0.51, 0.78)  # filled, ALPHA
TRUTH_COLOUR = (1.0, 0.84, 0.0)  # outline
CROWD_COLOUR = (0.85, 0.85, 0.85)  # dashed outline
PALETTE = np.array([
    [230, 25, 75], [60, 180, 75], [0, 130, 200], [245, 130, 48], [145, 30, 180], [70, 240, 240],
    [240, 50, 230], [210, 245, 60],
], dtype=np.float32)
ALPHA = 0.5


class FigureError(EvaluationError):
    """An input a figure needs is missing or malformed; names the file."""


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
    """The image as the readings start from it (`evaluate.readings.images.open_rgb`): (H, W, 3) uint8."""
    from evaluate.readings.images import ImageError, open_rgb  # noqa: PLC0415

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


# ---------------------------------------------------------------------------------------------- sweep heatmap


SWEEP_ROWS = "tau"
SWEEP_COLUMNS = ("eps", "foreground", "split", "component")
_SHORT = {"eps": "eps", "foreground": "fg", "split": "split", "component": "cc"}


def sweep_heatmap(sweep_csv: str | os.PathLike, selected: str, out_png: str | os.PathLike) -> Path:
    """Mean Jaccard (%) of every sweep setting: rows tau (ascending), columns the combinations of the other
    swept settings (SWEEP_COLUMNS, in the CSV's order of first appearance); the `selected` setting (its name)
    outlined in black with a star. Reads the select job's sweep CSV (columns setting, value and the settings)."""
    import csv  # noqa: PLC0415

    path = Path(sweep_csv)
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise FigureError(f"{path}: cannot read the sweep CSV ({exc})") from exc
    missing = [c for c in ("setting", "value", SWEEP_ROWS, *SWEEP_COLUMNS) if rows and c not in rows[0]]
    if not rows or missing:
        raise FigureError(f"{path}: the sweep CSV needs rows and column(s) {', '.join(missing) or 'setting, value'}")
    taus = sorted({float(r[SWEEP_ROWS]) for r in rows})
    combos: list[tuple[str, ...]] = []
    for r in rows:
        key = tuple(r[c] for c in SWEEP_COLUMNS)
        if key not in combos:
            combos.append(key)
    grid = np.full((len(taus), len(combos)), np.nan)
    where = None
    for r in rows:
        i, j = taus.index(float(r[SWEEP_ROWS])), combos.index(tuple(r[c] for c in SWEEP_COLUMNS))
        grid[i, j] = float(r["value"])
        if r["setting"] == selected:
            where = (i, j)
    if where is None:
        raise FigureError(f"{path}: the selected setting {selected!r} is not among the swept settings")
    fig = Figure(figsize=(max(6.0, 0.3 * len(combos) + 2.5), 0.4 * len(taus) + 3.4), dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    shown = ax.imshow(grid, cmap="viridis", aspect="auto", interpolation="nearest")
    fig.colorbar(shown, ax=ax, fraction=0.04, pad=0.02, label="mean Jaccard (%)")
    ax.set_yticks(range(len(taus)), [f"{t:g}" for t in taus])
    ax.set_ylabel("tau")
    ax.set_xticks(range(len(combos)), [" ".join(f"{_SHORT[c]}={v}" for c, v in zip(SWEEP_COLUMNS, k))
                                       for k in combos], fontsize="x-small", rotation=90)
    ax.add_patch(Rectangle((where[1] - 0.5, where[0] - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2.5))
    ax.plot([where[1]], [where[0]], marker="*", color="white", markersize=10, markeredgecolor="black")
    dataset = rows[0].get("dataset", "")
    ax.set_title(f"Decoder sweep{' on ' + dataset if dataset else ''}: mean Jaccard; selected {selected}",
                 fontsize="small")
    fig.tight_layout()
    return save_png(fig, out_png)


# ------------------------------------------------------------------------------------------ agreement scatter


def agreement_scatter(a: Mapping[str, dict], b: Mapping[str, dict], agreement: Mapping, names: tuple[str, str],
                      dataset: str, out_png: str | os.PathLike) -> Path:
    """Measure a (x) against measure b (y) across checkpoints: each checkpoint a point at its records' values
    with both 95% intervals as error bars and its name beside it; title with `agreement`'s tau [lo, hi].

    a, b: checkpoint -> measure entry; agreement: `evaluate.scores.agreement.pair_agreement`'s dict; names: display
    names of the two measures."""
    ckpts = list(agreement["checkpoints"])
    fig = Figure(figsize=RUN_FIGSIZE, dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    for k, c in enumerate(ckpts):
        x, y = a[c]["value"], b[c]["value"]

        def err(m, v):
            return [[v - m["ci_low"]], [m["ci_high"] - v]] if m["ci_low"] is not None else None

        colour = PALETTE[k % len(PALETTE)] / 255.0
        ax.errorbar([x], [y], xerr=err(a[c], x), yerr=err(b[c], y), fmt="o", color=colour, capsize=3, label=c)
        ax.annotate(c, (x, y), textcoords="offset points", xytext=(5, 5), fontsize="x-small")
    tau = agreement["tau"]
    text = "undefined" if tau is None else f"{tau:.2f}"
    if agreement["ci_low"] is not None:
        text += f" [{agreement['ci_low']:.2f}, {agreement['ci_high']:.2f}]"
    ax.set_xlabel(f"{names[0]} (%)")
    ax.set_ylabel(f"{names[1]} (%)")
    ax.set_title(f"{names[0]} against {names[1]} on {dataset}: Kendall tau {text}", fontsize="small")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="x-small")
    fig.tight_layout()
    return save_png(fig, out_png)


# ------------------------------------------------------------------------------------------- eigenvector map


def eigenvector_figure(image_path: str | os.PathLike, eigenvector: np.ndarray, out_png: str | os.PathLike,
                       title: str | None = None) -> Path:
    """The image (resized to 480 x 480 as keys480 sees it) beside its second eigenvector, a float (30, 30) map."""
    eigenvector = np.asarray(eigenvector, dtype=np.float64)
    if eigenvector.ndim != 2:
        raise FigureError(f"eigenvector map for {image_path} must be 2-D (keys480's patch grid), got shape "
                          f"{eigenvector.shape}")
    from evaluate.readings.images import ImageError, keys480_pixels, open_rgb  # noqa: PLC0415

    try:
        picture = keys480_pixels(open_rgb(image_path))  # exactly the pixels keys480 is computed from
    except ImageError as exc:
        raise FigureError(str(exc)) from exc
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


# ----------------------------------------------------------------------------------------- the figures job's set

SCATTER_PAIR = ("jaccard", "probe_miou")  # the agreement figure: the decoder's reading against the probe's


def record_jaccard(records: Sequence[dict], dataset: str) -> dict[str, dict[int, float]]:
    """checkpoint -> image id -> per-image Jaccard in percent, from the decoder records on `dataset`."""
    from evaluate.scores.measures import PERCENT  # noqa: PLC0415

    out: dict[str, dict[int, float]] = {}
    for rec in records:
        if rec["kind"] == "decoder" and rec["role"] == "eval" and rec["dataset"] == dataset:
            for m in rec["measures"]:
                if m["measure"] == "jaccard":
                    out[rec["checkpoint"]] = {int(i): PERCENT * float(v) for i, v in zip(m["image_ids"], m["per_image"])}
    return out


def ledger_figures(ledger_dir: str | os.PathLike, out_dir: str | os.PathLike, *, dataset: Mapping | None = None,
                   masks: Mapping[str, str | os.PathLike] | None = None, sweep_csv: str | os.PathLike | None = None,
                   overlay_images: int, gallery_images: int | None = None, resamples: int,
                   seed: int, truth: bool = True) -> list[Path]:
    """Every figure but the eigenvector map: measures against epoch; for `dataset` ({"name", "images",
    "annotations"}; `truth`: draw its ground truth, False when it is sealed) with `masks` (checkpoint -> COCO results) the overlays of its first `overlay_images` images
    and each checkpoint's gallery of `gallery_images` worst and best images (by the records' Jaccard); the sweep
    heatmap (with the sweep record's selected setting); the SCATTER_PAIR agreement figure per eval data set.
    Returns the PNG paths (each has its PDF beside it)."""
    from evaluate.scores.agreement import pair_agreement  # noqa: PLC0415
    from evaluate.outputs.tables import DISPLAY_NAMES, eval_measures, gallery_picks  # noqa: PLC0415

    out = Path(out_dir)
    records = read_records(Path(ledger_dir) / "records")
    files = list(measure_figures(ledger_dir, out) or [])
    if dataset is not None and masks:
        name = dataset["name"]
        jaccard = record_jaccard(records, name)
        overlay = out / f"overlays_{_safe(name)}.png"
        files.append(mask_overlays(dataset["images"], dataset["annotations"], masks, overlay, k=overlay_images,
                                   jaccard=jaccard, truth=truth))
        if gallery_images:
            for rec in sorted(records, key=lambda r: r["checkpoint"]):
                if rec["kind"] == "decoder" and rec["role"] == "eval" and rec["dataset"] == name \
                        and rec["checkpoint"] in masks:
                    worst, best = gallery_picks(rec, int(gallery_images))
                    files.append(gallery_figure(
                        dataset["images"], dataset["annotations"], masks[rec["checkpoint"]], worst, best,
                        jaccard.get(rec["checkpoint"], {}),
                        out / f"gallery_{_safe(name)}_{_safe(rec['checkpoint'])}.png", rec["checkpoint"], truth))
    sweeps = [r for r in records if r["kind"] == "sweep"]
    if sweep_csv is not None and sweeps:
        files.append(sweep_heatmap(sweep_csv, sweeps[0]["setting"], out / "sweep_heatmap.png"))
    for name in sorted({r["dataset"] for r in records if r["role"] == "eval"}):
        _, measures = eval_measures(records, name)
        if all(k in measures for k in SCATTER_PAIR):
            a, b = (measures[k] for k in SCATTER_PAIR)
            entry = pair_agreement(a, b, resamples=resamples, seed=seed)
            if len(entry["checkpoints"]) >= 2:
                files.append(agreement_scatter(
                    a, b, entry, tuple(DISPLAY_NAMES[k][0] for k in SCATTER_PAIR), name,
                    out / f"agreement_{_safe(name)}_{SCATTER_PAIR[0]}_{SCATTER_PAIR[1]}.png"))
    return files
