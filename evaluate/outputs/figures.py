"""Figures (`results/figures/`: PNG, and the same figure as PDF beside it for LaTeX), regenerated from the ledger
and decoder outputs; byte-identical on a re-run.

Determinism (`evaluate.outputs.drawing.save_png`): matplotlib's Agg canvas through `matplotlib.figure.Figure` (no pyplot global state), fixed figure
size and dpi, no `Software` entry in the PNG metadata and no `CreationDate` in the PDF (the only varying parts
matplotlib writes).

- `measure_figures`: for each eval data set and measure, value against epoch with one line and a 95% interval
  band per run (RUN_FIGSIZE at DPI: 640 x 400 pixels).
- `evaluate.outputs.overlays`: the data set's images with each checkpoint's masks drawn on them (`mask_overlays`),
  and each checkpoint's worst and best images (`gallery_figure`).
- `sweep_heatmap`: mean Jaccard of every sweep setting, tau as rows against the other settings as columns, the
  selected setting outlined.
- `agreement_scatter`: one measure against another across checkpoints (points with both 95% intervals, each
  checkpoint named), Kendall's tau and its interval in the title.
- `evaluate.outputs.attention_figures`: the attention reading's heatmaps (blocks x heads), each run's per-head
  spread against epoch, and one image's attention rows from one patch per head.
- `eigenvector_figure`: one image (resized to s x s, s = keys480_side of the network: 480 for p 8 and 16, 476 for
  p 14, as keys480 sees it) beside its (g, g) second eigenvector, g the keys' grid (EIGEN_FIGSIZE at DPI: 800 x 400
  pixels).

`ledger_figures` makes the whole set the figures job writes; every number shown comes from the records.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from evaluate.ledger.records import read_records
from evaluate.outputs.attention_figures import attention_figures
from evaluate.outputs.drawing import DPI, PALETTE, RUN_FIGSIZE, FigureError, safe_name, save_png
from evaluate.outputs.overlays import gallery_figure, mask_overlays
from evaluate.scores import catalogue
from evaluate.outputs.tables import eval_measures
from evaluate.outputs.video_figures import video_figures
from evaluate.outputs.views import gallery_picks
from evaluate.plumbing.paths import RECORDS_IN_LEDGER
from evaluate.pixels.geometry import SEED

EIGEN_FIGSIZE = (8.0, 4.0)


# ----------------------------------------------------------------------------------- measures against epoch


def measure_figures(ledger_dir: str | os.PathLike, out_dir: str | os.PathLike) -> list[Path]:
    """One PNG per (eval data set, measure): `{dataset}_{measure}.png`, a line and interval band per run.

    Only records with an epoch are drawn; a measure without an interval gets no band.
    """
    return _measure_figures(read_records(Path(ledger_dir) / RECORDS_IN_LEDGER), out_dir)


def _measure_figures(records: Sequence[dict], out_dir: str | os.PathLike) -> list[Path]:
    records = [r for r in records if r["role"] == "eval" and r["epoch"] is not None]
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
        files.append(save_png(fig, Path(out_dir) / f"{safe_name(dataset)}_{safe_name(measure)}.png"))
    return files


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
                       title: str | None = None, side: int = SEED.keys480_side) -> Path:
    """The image (resized to side x side as keys480 sees it: `Geometry.keys480_side` of the keys' network, what the
    eigenvector job records) beside its second eigenvector, a float (g, g) map on the keys' grid."""
    eigenvector = np.asarray(eigenvector, dtype=np.float64)
    if eigenvector.ndim != 2:
        raise FigureError(f"eigenvector map for {image_path} must be 2-D (keys480's patch grid), got shape "
                          f"{eigenvector.shape}")
    from PIL import Image  # noqa: PLC0415

    from evaluate.pixels.images import ImageError, open_rgb  # noqa: PLC0415

    try:
        # keys480's resize (evaluate.pixels.images.keys480_pixels: the whole image, PIL LANCZOS) at this side
        picture = np.asarray(open_rgb(image_path).resize((int(side), int(side)), Image.Resampling.LANCZOS),
                             dtype=np.uint8)
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
                    out[rec["checkpoint"]] = {int(i): PERCENT * float(v)
                                              for i, v in zip(m["image_ids"], m["per_image"])}
    return out


def ledger_figures(ledger_dir: str | os.PathLike, out_dir: str | os.PathLike, *, dataset: Mapping | None = None,
                   masks: Mapping[str, str | os.PathLike] | None = None, sweep_csv: str | os.PathLike | None = None,
                   overlay_images: int, gallery_images: int | None = None, resamples: int,
                   seed: int, truth: bool = True,
                   attention_rows: Mapping[str, str | os.PathLike] | None = None,
                   video: Mapping | None = None) -> list[Path]:
    """Every figure but the eigenvector map: measures against epoch; for `dataset` ({"name", "images",
    "annotations"}; `truth`: draw its ground truth, False when it is sealed) with `masks` (checkpoint -> COCO
    results) the overlays of its first `overlay_images` images and each checkpoint's gallery of `gallery_images`
    worst and best images (by the records' Jaccard); the sweep heatmap (with the sweep record's selected setting);
    the SCATTER_PAIR agreement figure per eval data set; the attention figures
    (`evaluate.outputs.attention_figures`, with the per-patch rows of `attention_rows`: checkpoint -> .npz); and
    the propagated masks of each video data set and checkpoint (`evaluate.outputs.video_figures`; video:
    {"videos", "results"}, the first `overlay_images` sequences of each). Returns the PNG paths (each has its PDF
    beside it)."""
    from evaluate.scores.agreement import pair_agreement  # noqa: PLC0415

    out = Path(out_dir)
    records = read_records(Path(ledger_dir) / RECORDS_IN_LEDGER)
    files = list(_measure_figures(records, out) or [])
    if dataset is not None and masks:
        name = dataset["name"]
        jaccard = record_jaccard(records, name)
        overlay = out / f"overlays_{safe_name(name)}.png"
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
                        out / f"gallery_{safe_name(name)}_{safe_name(rec['checkpoint'])}.png", rec["checkpoint"],
                        truth))
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
                    a, b, entry, tuple(catalogue.plain(k) for k in SCATTER_PAIR), name,
                    out / f"agreement_{safe_name(name)}_{SCATTER_PAIR[0]}_{SCATTER_PAIR[1]}.png"))
    files += attention_figures(records, out, attention_rows)
    if video and video["videos"]:
        files += video_figures(video["videos"], video["results"], records, out, sequences=overlay_images)
    return files
