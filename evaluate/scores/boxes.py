"""CorLoc on boxes, `corloc_box` (docs/design.md §15): a measure of its own, apart from §6's mask CorLoc.

Per image: 1 if IoU(pred, g) >= 0.5 for any ground-truth box g, IoU without +1 (width x1 - x0, height y1 - y0),
decided exactly on the integer boxes as 2 * intersection >= union (an IoU of exactly 0.5 is a hit, as LOST's
float32 `bbox_iou` makes it). An image without a ground-truth box, or without a predicted box, is a miss.
"""

from __future__ import annotations

from typing import Sequence

MEASURE = "corloc_box"


def box_hit(pred: Sequence[int] | None, truths: Sequence[Sequence[int]]) -> bool:
    """Whether the integer box `pred` (x0, y0, x1, y1; None: no box) has IoU >= 0.5 with any box of `truths`."""
    if pred is None:
        return False
    px0, py0, px1, py1 = (int(v) for v in pred)
    area_p = (px1 - px0) * (py1 - py0)
    for gx0, gy0, gx1, gy1 in truths:
        inter = max(0, min(px1, int(gx1)) - max(px0, int(gx0))) * max(0, min(py1, int(gy1)) - max(py0, int(gy0)))
        union = area_p + (int(gx1) - int(gx0)) * (int(gy1) - int(gy0)) - inter
        if union > 0 and 2 * inter >= union:
            return True
    return False
