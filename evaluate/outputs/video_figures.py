"""Video figures (`results/figures/video_{dataset}_{checkpoint}.png` and `.pdf`, docs/design.md §12): a few
sequences of a video data set, each as its first, middle and last frame, with one checkpoint's propagated masks
filled (each object in its palette colour) and, unless the data set is sealed, the ground truth outlined.

The ground truth is read to draw it (`evaluate.datasets.davis.read_mask`): a drawing, not a score, so it writes no
openings row; for a sealed data set (`truth=False`) none is drawn and the legend says so, as the image overlays do
(`evaluate.outputs.overlays`). The titles carry each sequence's J&F from the checkpoint's video record. Byte-identical
on a re-run (`evaluate.outputs.figures.save_png`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from evaluate.outputs.drawing import ALPHA, DPI, PALETTE, FigureError, safe_name, save_png
from evaluate.outputs.overlays import (
    LEGEND_INCHES,
    SEALED_LEGEND,
    TILE_INCHES,
    TRUTH_COLOUR,
    overlay_masks,
)

FRAMES_SHOWN = ("first", "middle", "last")
TITLE_INCHES = 0.3  # the checkpoint and data set, under the legend


def shown_frames(n_frames: int) -> list[int]:
    """The indices of the first, middle and last frame of a sequence of n_frames (n_frames >= 1)."""
    return [0, n_frames // 2, n_frames - 1]


def paint_objects(picture: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) picture with each object id k > 0 of `labels` (H, W) blended in PALETTE[k - 1] (ALPHA)."""
    return overlay_masks(picture, [labels == k for k in range(1, int(labels.max()) + 1)])


def _legend(fig: Figure, truth: bool) -> None:
    handles = [Patch(facecolor=PALETTE[0] / 255, alpha=ALPHA, label="propagated objects (filled)")]
    if truth:
        handles.append(Line2D([], [], color=TRUTH_COLOUR, linewidth=1.5, label="ground truth (outline)"))
    else:
        handles.append(Line2D([], [], linestyle="none", label=SEALED_LEGEND))
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize="small", frameon=False)


def video_figure(dataset, results_dir: str | os.PathLike, names: Sequence[str], out_png: str | os.PathLike, *,
                 title: str, jf: Mapping[str, float] | None = None, truth: bool = True) -> Path:
    """One row per sequence of `names` (of `dataset`, a `DavisDataset`), columns its first, middle and last frame:
    the frame, the result PNG of `results_dir/<sequence>/` filled, and when `truth` the truth's objects outlined.

    jf: sequence -> J&F in percent (the record's per-sequence value) for the row labels.
    PNG size: (3 * TILE_INCHES * DPI) x ((len(names) * TILE_INCHES + LEGEND_INCHES + TITLE_INCHES) * DPI) pixels.
    """
    from evaluate.datasets.davis import read_mask
    from evaluate.pixels.images import open_rgb

    if not names:
        raise FigureError(f"{results_dir}: a video figure needs at least one sequence")
    results_dir = Path(results_dir)
    cols = len(FRAMES_SHOWN)
    top = LEGEND_INCHES + TITLE_INCHES
    fig = Figure(figsize=(cols * TILE_INCHES, len(names) * TILE_INCHES + top), dpi=DPI)
    for row, name in enumerate(names):
        sequence = dataset.sequence(name)
        masks = {mask.stem: mask for mask in sequence.masks}
        for col, (index, what) in enumerate(zip(shown_frames(len(sequence.frames)), FRAMES_SHOWN)):
            frame = sequence.frames[index]
            result = results_dir / name / f"{frame.stem}.png"
            if not result.is_file():
                raise FigureError(f"{result}: result of sequence {name}, frame {frame.stem} is missing")
            picture = np.asarray(open_rgb(frame))
            labels = read_mask(result, result=True)
            ax = fig.add_subplot(len(names), cols, row * cols + col + 1)
            ax.imshow(paint_objects(picture, labels), interpolation="nearest")
            if truth and frame.stem in masks:
                ids = read_mask(masks[frame.stem])
                for k in np.unique(ids[ids > 0]):
                    ax.contour((ids == k).astype(np.float32), levels=[0.5], colors=[TRUTH_COLOUR], linewidths=1.2)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{what} ({frame.stem})", fontsize="small")
            if col == 0:
                score = "" if jf is None or name not in jf else f"\nJ&F {jf[name]:.1f}"
                ax.set_ylabel(f"{name}{score}", fontsize="small")
    height = fig.get_figheight()
    fig.suptitle(title, fontsize="small", y=1 - LEGEND_INCHES / height, va="top")
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.01, top=1 - top / height, wspace=0.05, hspace=0.25)
    _legend(fig, truth)
    return save_png(fig, out_png)


def video_figures(videos: Mapping[str, Mapping], results: Mapping[str, Mapping[str, str | os.PathLike]],
                  records: Sequence[dict], out_dir: str | os.PathLike, *, sequences: int) -> list[Path]:
    """`video_{dataset}_{checkpoint}.png` for every video data set and checkpoint of `results`.

    videos: name -> {root, resolution, sequences_file, truth} (truth False: sealed, no ground truth drawn);
    results: name -> checkpoint -> its results root (DAVIS's results layout); records: the ledger's records (the
    video ones give each sequence's J&F); sequences: the first this many sequences of each data set are shown.
    """
    from evaluate.datasets.davis import DavisDataset

    files = []
    for name, video in videos.items():
        dataset = DavisDataset(video["root"], video["resolution"], video["sequences_file"])
        names = dataset.names[:sequences]
        for checkpoint, results_dir in results.get(name, {}).items():
            rec = next((r for r in records if r["kind"] == "video" and r["dataset"] == name
                        and r["checkpoint"] == checkpoint), None)
            jf = None if rec is None else {row["sequence"]: row["jf_mean"] for row in rec["per_sequence"]}
            out = Path(out_dir) / f"video_{safe_name(name)}_{safe_name(checkpoint)}.png"
            files.append(video_figure(dataset, results_dir, names, out, title=f"{checkpoint} on {name}", jf=jf,
                                      truth=bool(video["truth"])))
    return files
