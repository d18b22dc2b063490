"""The figures a protocol draws from its own records alone, one entry each: `DRAWERS`, (record kinds, drawer), where
`drawer(records, out_dir, figures)` takes that protocol's records and the config's `figures` section and returns the
PNGs it wrote. A new protocol's figures are its module and one line here; the figures job calls `record_figures`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence


def _discovery(records: Sequence[dict], out_dir: str | os.PathLike, figures: Mapping[str, Any]) -> list[Path]:
    from evaluate.outputs.discovery_figures import discovery_figures

    return discovery_figures(records, out_dir, overlay_images=int(figures["overlay_images"]),
                             gallery_images=int(figures["gallery_images"]))


def _saliency(records: Sequence[dict], out_dir: str | os.PathLike, figures: Mapping[str, Any]) -> list[Path]:
    from evaluate.outputs.saliency_figures import saliency_figures

    return saliency_figures(records, out_dir, overlay_images=int(figures["overlay_images"]))


def _attention_masks(records: Sequence[dict], out_dir: str | os.PathLike, figures: Mapping[str, Any]) -> list[Path]:
    from evaluate.outputs.attention_mask_figures import attention_mask_figures

    return attention_mask_figures(records, out_dir, overlay_images=int(figures["overlay_images"]))


def _semseg(records: Sequence[dict], out_dir: str | os.PathLike, figures: Mapping[str, Any]) -> list[Path]:
    from evaluate.outputs.semseg_figures import semseg_figures

    return semseg_figures(records, out_dir, overlay_images=int(figures["overlay_images"]))


DRAWERS: tuple[Callable[[Sequence[dict], str | os.PathLike, Mapping[str, Any]], list[Path]], ...] = (
    _discovery,
    _saliency,
    _attention_masks,
    _semseg,
)


def record_figures(records: Sequence[dict], out_dir: str | os.PathLike, figures: Mapping[str, Any]) -> list[Path]:
    """Every protocol's figures of `records` (each drawer picks its own kinds), in `DRAWERS`' order."""
    return [path for drawer in DRAWERS for path in drawer(records, out_dir, figures)]
