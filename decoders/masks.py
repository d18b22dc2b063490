"""Grid masks back to image pixels and into COCO results (docs/design.md §5 step 6).

A (gh, gw) patch mask becomes an (H, W) pixel mask by bilinear interpolation of its 0/1 values
(`torch.nn.functional.interpolate`, align_corners=False, float32), kept where >= 0.5; it is stored as COCO RLE.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
from pycocotools import mask as mask_utils

from decoders.registry import DecoderError

CATEGORY_ID = 1  # class-agnostic: every decoded mask is "object"


def _check_size(height, width) -> tuple[int, int]:
    try:
        h, w = int(height), int(width)
    except (TypeError, ValueError):
        raise DecoderError(f"image size must be two integers, got height={height!r}, width={width!r}") from None
    if h != height or w != width or h < 1 or w < 1:
        raise DecoderError(f"image size must be positive integers, got height={height!r}, width={width!r}")
    return h, w


def grid_to_image(mask, height: int, width: int) -> np.ndarray:
    """Patch-grid mask bool (gh, gw) -> pixel mask bool (height, width).

    Bilinear interpolation (align_corners=False) of the 0/1 grid in float32, kept where >= 0.5.
    """
    grid = np.asarray(mask)
    if grid.ndim != 2 or grid.shape[0] < 1 or grid.shape[1] < 1:
        raise DecoderError(f"grid mask must be a 2-D (rows, columns) array, got shape {grid.shape}")
    if grid.dtype != np.bool_:
        if not np.isin(grid, (0, 1)).all():
            raise DecoderError(f"grid mask must hold only 0/1 or booleans, got dtype {grid.dtype} with other values")
        grid = grid.astype(bool)
    h, w = _check_size(height, width)
    import torch  # here, not above: the decoder's sweep and eigenvector jobs never resize a mask

    values = torch.from_numpy(grid.astype(np.float32))[None, None]
    up = torch.nn.functional.interpolate(values, size=(h, w), mode="bilinear", align_corners=False)
    return (up[0, 0] >= 0.5).numpy()


def encode_rle(pixels: np.ndarray) -> dict:
    """bool (H, W) -> COCO RLE {"size": [H, W], "counts": str} (counts decoded to ASCII for JSON)."""
    rle = mask_utils.encode(np.asfortranarray(pixels.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}


def coco_results(image_id: int, grid_masks: Iterable, height: int, width: int) -> list[dict]:
    """COCO results entries for one image's decoded masks, in the order given.

    grid_masks: objects with `.mask` bool (gh, gw) and `.score` float in [0, 1] (what a decoder's `decode` returns,
    `decoders.registry.Decoder`).
    Each entry: {"image_id", "category_id": 1, "segmentation": RLE (counts as str), "score"}.
    """
    if isinstance(image_id, bool) or not isinstance(image_id, (int, np.integer)):
        raise DecoderError(f"image_id must be an integer, got {image_id!r}")
    h, w = _check_size(height, width)
    results = []
    for index, grid_mask in enumerate(grid_masks):
        score = float(grid_mask.score)
        if not 0.0 <= score <= 1.0:
            raise DecoderError(f"image {image_id}: mask {index} has score {score!r}, outside [0, 1]")
        pixels = grid_to_image(grid_mask.mask, h, w)
        results.append(
            {
                "image_id": int(image_id),
                "category_id": CATEGORY_ID,
                "segmentation": encode_rle(pixels),
                "score": score,
            }
        )
    return results
