"""Object-discovery figures from the records alone (docs/design.md §15).

Per checkpoint and discovery data set:
- `discovery_{checkpoint}_{dataset}.png`: the first `overlay_images` images (id order) with each box decoder's
  predicted box (its own colour, named in the legend) and the ground-truth boxes (white, dashed; none for a sealed
  set, whose records carry no ground truth);
- `discovery-gallery_{checkpoint}_{dataset}.png`: per box decoder a row of hits (IoU >= 0.5) and a row of misses,
  up to `gallery_images` each, in id order.
The records (one per box decoder) hold each image's file, predicted box and, for an unsealed set, its truths.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image

from evaluate.outputs.drawing import DPI, PALETTE, safe_name, save_png


def _discovery_records(records: Sequence[dict]) -> dict[tuple[str, str], dict[str, dict]]:
    """(checkpoint, dataset) -> {decoder: record} for the records measuring corloc_box."""
    out: dict[tuple[str, str], dict[str, dict]] = {}
    for rec in records:
        if any(m["measure"] == "corloc_box" for m in rec["measures"]) and "image_files" in rec:
            out.setdefault((rec["checkpoint"], rec["dataset"]), {})[rec["kind"]] = rec
    return out


def _draw(ax, path: str, boxes: dict[str, list | None], truths: list | None, title: str) -> None:
    ax.imshow(np.asarray(Image.open(path).convert("RGB")))
    for k, (name, box) in enumerate(sorted(boxes.items())):
        if box is not None:
            x0, y0, x1, y1 = box
            ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, lw=2, label=name,
                                   edgecolor=PALETTE[k % len(PALETTE)] / 255))
    for x0, y0, x1, y1 in truths or []:
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, lw=1, ls="--", edgecolor="white"))
    ax.set_title(title, fontsize=7)
    ax.axis("off")


def discovery_figures(records: Sequence[dict], out_dir: str | os.PathLike, *, overlay_images: int,
                      gallery_images: int) -> list[Path]:
    """Write the figures of the module docstring into `out_dir`; return their paths."""
    from evaluate.scores.boxes import box_hit

    out = Path(out_dir)
    files = []
    for (checkpoint, dataset), by_decoder in sorted(_discovery_records(records).items()):
        first = next(iter(by_decoder.values()))
        ids = sorted(first["image_files"], key=int)[:overlay_images]
        truths = first.get("truths")
        fig = Figure(figsize=(3 * len(ids), 3), dpi=DPI)
        for k, image_id in enumerate(ids):
            ax = fig.add_subplot(1, len(ids), k + 1)
            _draw(ax, first["image_files"][image_id], {d: r["boxes"].get(image_id) for d, r in by_decoder.items()},
                  None if truths is None else truths.get(image_id, []), f"image {image_id}")
            if k == 0:
                ax.legend(loc="lower left", fontsize=6)
        fig.suptitle(f"{checkpoint} on {dataset}: predicted boxes" + (", truth dashed" if truths else ""),
                     fontsize=8)
        files.append(save_png(fig, out / f"discovery_{safe_name(checkpoint)}_{safe_name(dataset)}.png"))
        if truths is None:
            continue
        rows = []
        for decoder, rec in sorted(by_decoder.items()):
            ordered = sorted(rec["boxes"], key=int)
            hits = [i for i in ordered if box_hit(rec["boxes"][i], truths.get(i, []))][:gallery_images]
            misses = [i for i in ordered if not box_hit(rec["boxes"][i], truths.get(i, []))][:gallery_images]
            rows += [(decoder, "hit", hits), (decoder, "miss", misses)]
        width = max(1, max(len(r[2]) for r in rows))
        fig = Figure(figsize=(2.5 * width, 2.5 * len(rows)), dpi=DPI)
        for r, (decoder, what, chosen) in enumerate(rows):
            for c, image_id in enumerate(chosen):
                ax = fig.add_subplot(len(rows), width, r * width + c + 1)
                _draw(ax, first["image_files"][image_id], {decoder: by_decoder[decoder]["boxes"][image_id]},
                      truths.get(image_id, []), f"{decoder} {what}: {image_id}")
        files.append(save_png(fig, out / f"discovery-gallery_{safe_name(checkpoint)}_{safe_name(dataset)}.png"))
    return files
