"""Saliency figures from the records alone (docs/design.md §16).

Per checkpoint and saliency set, `saliency_{checkpoint}_{dataset}.png`: the set's first images (the record keeps
`evaluate.saliency.protocol.FIGURE_IMAGES` of them), one column each; the top row the decoder's mask before the
solver, the bottom row the solver's soft map above 0.5 (the threshold TokenCut's IoU and accuracy use), where the
record holds it, each tinted and outlined in its row's colour; the truth's outline in white for an unsealed set (a
sealed set's record holds no truth).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure

from evaluate.outputs.drawing import DPI, PALETTE, outline, safe_name, save_png, tinted


def saliency_figures(records: Sequence[dict], out_dir: str | os.PathLike, *, overlay_images: int) -> list[Path]:
    """Write the figures of the module docstring into `out_dir` (at most `overlay_images` images each); return
    their paths."""
    from evaluate.saliency.protocol import figure_maps

    out = Path(out_dir)
    files = []
    for rec in sorted((r for r in records if r["kind"] == "saliency"), key=lambda r: (r["checkpoint"], r["dataset"])):
        entries = rec.get("figure_images", [])[:overlay_images]
        if not entries:
            continue
        maps = [figure_maps(entry) for entry in entries]
        solver = any(refined is not None for _, _, refined, _ in maps)
        rows = [("TokenCut", lambda m: m[1] > 0)] + ([("TokenCut + BS", lambda m: m[2] > 0.5)] if solver else [])
        fig = Figure(figsize=(2.6 * len(entries), 2.4 * len(rows)), dpi=DPI)
        for r, (label, masked) in enumerate(rows):
            for c, (entry, image_maps) in enumerate(zip(entries, maps)):
                ax = fig.add_subplot(len(rows), len(entries), r * len(entries) + c + 1)
                mask = masked(image_maps)
                colour = PALETTE[r % len(PALETTE)]
                ax.imshow(tinted(image_maps[0], mask, colour))
                outline(ax, mask, colour / 255, 1.5)
                if image_maps[3] is not None:
                    outline(ax, image_maps[3], "white", 0.8)
                ax.set_title(f"{label}: {entry['name']}", fontsize=7)
                ax.axis("off")
        truth_note = ", truth outlined in white" if any(m[3] is not None for m in maps) else ""
        fig.suptitle(f"{rec['checkpoint']} on {rec['dataset']}: salient mask before and after the solver{truth_note}",
                     fontsize=8)
        files.append(save_png(fig, out / f"saliency_{safe_name(rec['checkpoint'])}_{safe_name(rec['dataset'])}.png"))
    return files
