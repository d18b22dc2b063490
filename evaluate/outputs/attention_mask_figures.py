"""Class-token attention mask figures from the records alone (docs/design.md §17; DESIGN 15).

Per checkpoint and segmentation set (records of kind `attention_masks`; the record keeps its first scored images,
`evaluate.attention.masks.FIGURE_IMAGES`, in `figure_images`):
- `attention-masks_{checkpoint}_{dataset}.png`: one row per image (at most `overlay_images`), one panel per object
  (at most `OBJECT_PANELS`): the image as the reading cropped it, the mask of the head that matched the object best
  tinted and outlined in the object's colour, the object's truth outlined in white (none for a sealed set, whose
  record keeps no truth), titled with the head and its J;
- `attention-mask-heads_{checkpoint}_{dataset}.png`: the first image, then every head's mask over it, each head
  that was some object's best named so.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from evaluate.outputs.drawing import DPI, PALETTE, outline, safe_name, save_png, tinted

OBJECT_PANELS = 4  # objects drawn per image, in id order
HEAD_COLUMNS = 7  # panels per row of the heads' figure
PANEL = 2.4  # inches across a panel
TITLE = 0.3  # inches above a panel for its title
SHOW_OBJECTS = 4  # object ids a head's title lists before counting them


def entry_maps(entry: dict) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray] | None]:
    """A record's figure entry -> (the image cropped as the reading was (p gh, p gw, 3) uint8, every head's mask at
    pixel scale (heads, p gh, p gw) bool, the truths (object id -> (p gh, p gw) bool) or None)."""
    from evaluate.attention.masks import figure_truths, masks_from_rows
    from evaluate.pixels.images import open_rgb

    patch = int(entry["patch"])
    gh, gw = (int(v) for v in entry["grid"])
    rgb = np.asarray(open_rgb(entry["image"]), dtype=np.uint8)[: gh * patch, : gw * patch]
    masks = masks_from_rows(entry["masks"]).repeat(patch, axis=1).repeat(patch, axis=2)
    return rgb, masks, figure_truths(entry)


def _figure(entry: dict, rows: int, columns: int) -> Figure:
    """A figure of rows x columns panels shaped like `entry`'s image (its grid's aspect), a title row above each."""
    gh, gw = (int(v) for v in entry["grid"])
    panel = PANEL * gh / gw
    height = rows * (panel + TITLE) + 1.5 * TITLE  # the figure's title and each row's titles
    fig = Figure(figsize=(PANEL * columns, height), dpi=DPI)
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.5 * TITLE / height, top=1 - 2 * TITLE / height,
                        wspace=0.04, hspace=TITLE / panel)
    return fig


def _objects_figure(rec: dict, entries: Sequence[dict], maps: Sequence[tuple], out: Path) -> Path:
    columns = max(1, min(OBJECT_PANELS, max(len(entry["objects"]) for entry in entries)))
    fig = _figure(entries[0], len(entries), columns)
    for r, (entry, (rgb, masks, truths)) in enumerate(zip(entries, maps)):
        for c, object_id in enumerate(entry["objects"][:columns]):
            head, value = entry["best_head"][c], entry["best_jaccard"][c]
            colour = PALETTE[c % len(PALETTE)]
            ax = fig.add_subplot(len(entries), columns, r * columns + c + 1)
            ax.imshow(tinted(rgb, masks[head], colour))
            outline(ax, masks[head], colour / 255, 1.5)
            if truths is not None:
                outline(ax, truths[int(object_id)], "white", 0.8)
            ax.set_title(f"{entry['name']} object {object_id}: head {head + 1}, J {100 * value:.1f}", fontsize=6)
            ax.axis("off")
    truth_note = ", the object's truth in white" if any(m[2] is not None for m in maps) else ""
    fig.suptitle(f"{rec['checkpoint']} on {rec['dataset']}: the best head's 60% mask per object{truth_note}",
                 fontsize=8)
    return save_png(fig, out / f"attention-masks_{safe_name(rec['checkpoint'])}_{safe_name(rec['dataset'])}.png")


def _heads_figure(rec: dict, entry: dict, maps: tuple, out: Path) -> Path:
    rgb, masks, truths = maps
    heads = masks.shape[0]
    columns = min(HEAD_COLUMNS, heads + 1)
    rows = math.ceil((heads + 1) / columns)
    fig = _figure(entry, rows, columns)
    ax = fig.add_subplot(rows, columns, 1)
    ax.imshow(rgb)
    if truths is not None:
        for k, object_id in enumerate(entry["objects"]):
            outline(ax, truths[int(object_id)], PALETTE[k % len(PALETTE)] / 255, 1.0)
    ax.set_title(entry["name"], fontsize=7)
    ax.axis("off")
    best_of = {}
    for object_id, head in zip(entry["objects"], entry["best_head"]):
        best_of.setdefault(int(head), []).append(str(object_id))
    for h in range(heads):
        ax = fig.add_subplot(rows, columns, h + 2)
        colour = PALETTE[h % len(PALETTE)]
        ax.imshow(tinted(rgb, masks[h], colour))
        outline(ax, masks[h], colour / 255, 1.0)
        best = best_of.get(h, [])
        note = (f", best for object {', '.join(best)}" if 0 < len(best) <= SHOW_OBJECTS
                else f", best for {len(best)} objects" if best else "")
        ax.set_title(f"head {h + 1}{note}", fontsize=6)
        ax.axis("off")
    fig.suptitle(f"{rec['checkpoint']} on {rec['dataset']}: each head's 60% mask of {entry['name']}", fontsize=8)
    return save_png(fig, out / f"attention-mask-heads_{safe_name(rec['checkpoint'])}_{safe_name(rec['dataset'])}.png")


def attention_mask_figures(records: Sequence[dict], out_dir: str | os.PathLike, *, overlay_images: int) -> list[Path]:
    """Write the figures of the module docstring into `out_dir` (at most `overlay_images` images per checkpoint);
    return their paths."""
    from evaluate.attention.masks import KIND

    out = Path(out_dir)
    files = []
    for rec in sorted((r for r in records if r["kind"] == KIND), key=lambda r: (r["checkpoint"], r["dataset"])):
        entries = rec.get("figure_images", [])[:overlay_images]
        if not entries:
            continue
        maps = [entry_maps(entry) for entry in entries]  # each image and its masks decoded once, for both figures
        files.append(_objects_figure(rec, entries, maps, out))
        files.append(_heads_figure(rec, entries[0], maps[0], out))
    return files
