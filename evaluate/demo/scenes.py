"""Demo inputs that run the whole pipeline on a fresh machine: procedural scenes and a random checkpoint.

`make_demo_dataset(out_dir, n_images, seed)` writes `out_dir/images/*.png` and `out_dir/annotations.json` (COCO
instances format). Each scene is a textured background with 1-4 shapes of three categories,

    1 "disc"   rotated ellipses, striped, warm colours
    2 "box"    rotated rectangles, checkered, cool colours
    3 "wedge"  triangles, shaded, green-yellow colours

sometimes overlapping (a later shape hides part of an earlier one, never more than half of it), and in about a
third of the scenes a crowd region: a cluster of small dots annotated as one `iscrowd = 1` RLE, an ignore region.
The masks are exact by construction: each shape's mask is what pycocotools decodes from its polygon, the image is
painted from those masks, and a shape partly hidden is annotated by an uncompressed RLE of its visible pixels.
Scene i depends only on (seed, image id), and the same arguments give byte-identical files.

The demo's checkpoints are made by `evaluate.demo.checkpoints`.

Command line:
    python -m evaluate.demo.scenes OUT --n N --seed S [--first-id I]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

from evaluate.demo import DemoError, print_made
from evaluate.plumbing.atomic import write_bytes, write_json
from evaluate.datasets.coco import mask_area_bbox, quiet_pycocotools, rle_from_mask

CATEGORIES = [
    {"id": 1, "name": "disc", "supercategory": "shape"},
    {"id": 2, "name": "box", "supercategory": "shape"},
    {"id": 3, "name": "wedge", "supercategory": "shape"},
]
CROWD_CATEGORY = 1  # a crowd is a cluster of small discs
MIN_VISIBLE = 150  # px: a shape smaller than this (after occlusion) is not placed
MAX_HIDDEN = 0.5  # a new shape may hide at most this share of an earlier shape
PLACEMENT_TRIES = 30


def polygon_mask(polygon: list[float], height: int, width: int) -> np.ndarray:
    """The pixels pycocotools assigns to a polygon [x1, y1, x2, y2, ...]: bool (H, W)."""
    with quiet_pycocotools():
        rles = mask_utils.frPyObjects([polygon], height, width)
        return mask_utils.decode(mask_utils.merge(rles)).astype(bool)


def _scene_size(rng: np.random.Generator) -> tuple[int, int]:
    """(width, height): long side 160-320 px, short side at least 120 px; landscape, portrait or square."""
    long_side = int(rng.integers(160, 321))
    shape = rng.choice(3, p=[0.6, 0.3, 0.1])
    if shape == 2:
        return long_side, long_side
    short_side = max(120, int(round(long_side * rng.uniform(0.6, 0.8))))
    return (long_side, short_side) if shape == 0 else (short_side, long_side)


def _colour(rng: np.random.Generator, category: int) -> np.ndarray:
    """A saturated RGB colour (float, 0-255) in the category's hue family."""
    hue_range = {1: (0.95, 1.10), 2: (0.55, 0.70), 3: (0.20, 0.35)}[category]
    hue = rng.uniform(*hue_range) % 1.0
    sat = rng.uniform(0.6, 0.95)
    val = rng.uniform(0.6, 0.95)
    rgb = np.asarray(_hsv_to_rgb(hue, sat, val))
    return rgb * 255.0


def _hsv_to_rgb(h: float, s: float, v: float) -> tuple[float, float, float]:
    i = int(h * 6.0) % 6
    f = h * 6.0 - int(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    return [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]


def _background(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A muted gradient with smooth blotches and pixel noise: float (H, W, 3)."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    a = rng.uniform(60, 170, size=3)
    b = rng.uniform(60, 170, size=3)
    angle = rng.uniform(0, 2 * np.pi)
    ramp = (np.cos(angle) * xx / width + np.sin(angle) * yy / height + 1.0) / 2.0
    canvas = a + (b - a) * ramp[..., None]
    for _ in range(3):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        radius = rng.uniform(0.15, 0.4) * max(height, width)
        blotch = np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * radius**2))
        canvas += blotch[..., None] * rng.uniform(-25, 25, size=3)
    canvas += rng.normal(0.0, 6.0, size=(height, width, 3))
    return canvas


def _texture(rng: np.random.Generator, category: int, height: int, width: int) -> np.ndarray:
    """The category's texture over the whole canvas: float (H, W, 3)."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    base = _colour(rng, category)
    if category == 1:  # stripes
        other = base * rng.uniform(0.45, 0.7)
        angle = rng.uniform(0, np.pi)
        period = rng.uniform(5, 11)
        phase = (np.cos(angle) * xx + np.sin(angle) * yy) / period
        weight = (np.sin(2 * np.pi * phase) > 0).astype(np.float64)
        tex = base * weight[..., None] + other * (1 - weight[..., None])
    elif category == 2:  # checks
        other = np.clip(base * rng.uniform(1.1, 1.3) + 20, 0, 255)
        cell = int(rng.integers(4, 10))
        weight = ((xx // cell + yy // cell) % 2).astype(np.float64)
        tex = base * weight[..., None] + other * (1 - weight[..., None])
    else:  # shading
        angle = rng.uniform(0, 2 * np.pi)
        ramp = (np.cos(angle) * xx / width + np.sin(angle) * yy / height + 1.0) / 2.0
        tex = base * (0.75 + 0.4 * ramp[..., None])
    return tex + rng.normal(0.0, 4.0, size=(height, width, 3))


def _shape_polygon(rng: np.random.Generator, category: int, height: int, width: int) -> list[float]:
    """A random polygon of the category, centred inside the image, rounded to 0.01 px: [x1, y1, ...]."""
    size = min(height, width)
    cx = rng.uniform(0.15, 0.85) * width
    cy = rng.uniform(0.15, 0.85) * height
    theta = rng.uniform(0, np.pi)
    if category == 1:  # ellipse, 32 vertices
        rx, ry = rng.uniform(0.1, 0.28, size=2) * size
        t = np.linspace(0, 2 * np.pi, 32, endpoint=False)
        px, py = rx * np.cos(t), ry * np.sin(t)
    elif category == 2:  # rectangle
        hw, hh = rng.uniform(0.08, 0.25, size=2) * size
        px, py = np.array([-hw, hw, hw, -hw]), np.array([-hh, -hh, hh, hh])
    else:  # triangle: three corners at well-separated angles
        radius = rng.uniform(0.14, 0.3) * size
        angles = np.array([0.0, 2 * np.pi / 3, 4 * np.pi / 3]) + rng.uniform(-0.4, 0.4, size=3)
        px, py = radius * np.cos(angles), radius * np.sin(angles)
    x = cx + np.cos(theta) * px - np.sin(theta) * py
    y = cy + np.sin(theta) * px + np.cos(theta) * py
    x = np.clip(x, 0, width)
    y = np.clip(y, 0, height)
    return [round(float(v), 2) for pair in zip(x, y) for v in pair]


def _crowd_mask(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A cluster of 8-20 small dots in a random window: bool (H, W)."""
    yy, xx = np.mgrid[0:height, 0:width]
    wx0, wy0 = rng.uniform(0, 0.6) * width, rng.uniform(0, 0.6) * height
    ww, wh = rng.uniform(0.25, 0.4) * width, rng.uniform(0.25, 0.4) * height
    mask = np.zeros((height, width), dtype=bool)
    for _ in range(int(rng.integers(8, 21))):
        cx, cy = wx0 + rng.uniform(0, ww), wy0 + rng.uniform(0, wh)
        r = rng.uniform(2.5, 5.5)
        mask |= (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
    return mask


def make_scene(seed: int, image_id: int) -> tuple[np.ndarray, list[dict], np.ndarray]:
    """One scene, depending only on (seed, image_id): (image, annotations, painted).

    image: uint8 (H, W, 3). annotations: COCO dicts without `id`: image_id, category_id, segmentation (the polygon
    when the shape is fully visible, else an uncompressed RLE of its visible pixels), area, bbox, iscrowd; the
    crowd region, if any, comes last. painted: int16 (H, W), what was painted last at each pixel: k + 1 for
    annotations[k] (objects), -1 for the crowd region, 0 for background; annotation k's mask is `painted == k + 1`.
    """
    rng = np.random.default_rng([seed, image_id])
    width, height = _scene_size(rng)
    canvas = _background(rng, height, width)

    placed: list[dict] = []  # {"category", "polygon", "full", "visible", "texture"}
    for _ in range(int(rng.integers(1, 5))):
        category = int(rng.integers(1, 4))
        for _try in range(PLACEMENT_TRIES):
            polygon = _shape_polygon(rng, category, height, width)
            full = polygon_mask(polygon, height, width)
            if full.sum() < MIN_VISIBLE:
                continue
            if all((p["visible"] & ~full).sum() >= (1 - MAX_HIDDEN) * p["visible"].sum() for p in placed):
                break
        else:
            continue
        for p in placed:
            p["visible"] &= ~full
        placed.append({"category": category, "polygon": polygon, "full": full, "visible": full.copy(),
                       "texture": _texture(rng, category, height, width)})

    objects = np.zeros((height, width), dtype=bool)
    for p in placed:
        objects |= p["full"]
    crowd = None
    if rng.uniform() < 0.35:
        crowd = _crowd_mask(rng, height, width) & ~objects
        if crowd.sum() >= 50:
            dots = _colour(rng, CROWD_CATEGORY) + rng.normal(0.0, 10.0, size=(height, width, 3))
            canvas[crowd] = dots[crowd]
        else:
            crowd = None
    painted = np.zeros((height, width), dtype=np.int16)
    if crowd is not None:
        painted[crowd] = -1
    for k, p in enumerate(placed):
        canvas[p["full"]] = p["texture"][p["full"]]
        painted[p["full"]] = k + 1

    annotations = []
    for p in placed:
        if (p["visible"] == p["full"]).all():
            segmentation: object = [p["polygon"]]
        else:
            segmentation = rle_from_mask(p["visible"])
        area, bbox = mask_area_bbox(p["visible"])
        annotations.append({"image_id": image_id, "category_id": p["category"], "segmentation": segmentation,
                            "area": area, "bbox": bbox, "iscrowd": 0})
    if crowd is not None:
        area, bbox = mask_area_bbox(crowd)
        annotations.append({"image_id": image_id, "category_id": CROWD_CATEGORY,
                            "segmentation": rle_from_mask(crowd), "area": area, "bbox": bbox, "iscrowd": 1})
    image = np.clip(np.rint(canvas), 0, 255).astype(np.uint8)
    return image, annotations, painted


def make_demo_dataset(out_dir: str | os.PathLike, n_images: int, seed: int, first_image_id: int = 1) -> Path:
    """Write `n_images` scenes to out_dir/images/{id:06d}.png and out_dir/annotations.json; return the JSON path.

    Image ids run from `first_image_id`; annotation ids from 1 in image order. Same arguments, same bytes.
    """
    if int(n_images) < 1:
        raise DemoError(f"n_images must be at least 1, got {n_images!r}")
    if int(seed) < 0 or int(first_image_id) < 0:
        raise DemoError(f"seed and first_image_id must be non-negative, got {seed!r} and {first_image_id!r}")
    out = Path(out_dir)
    images, annotations = [], []
    for image_id in range(int(first_image_id), int(first_image_id) + int(n_images)):
        pixels, anns, _ = make_scene(int(seed), image_id)
        file_name = f"{image_id:06d}.png"
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="PNG")
        write_bytes(out / "images" / file_name, buffer.getvalue())
        images.append({"id": image_id, "file_name": file_name, "height": int(pixels.shape[0]),
                       "width": int(pixels.shape[1]), "license": 0})
        for ann in anns:
            annotations.append({"id": len(annotations) + 1, **ann})
    data = {
        "info": {"description": "labelfree-seg-eval demo scenes (procedural, exact masks)",
                 "generator": "evaluate.demo.scenes.make_demo_dataset", "seed": int(seed), "n_images": int(n_images),
                 "first_image_id": int(first_image_id)},
        "licenses": [{"id": 0, "name": "generated, no rights reserved", "url": ""}],
        "images": images,
        "annotations": annotations,
        "categories": CATEGORIES,
    }
    path = out / "annotations.json"
    write_json(path, data)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.demo.scenes", description="write procedural scenes: "
                                     "OUT/images/*.png and OUT/annotations.json")
    parser.add_argument("out")
    parser.add_argument("--n", type=int, default=16, help="number of images (default 16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first-id", type=int, default=1, help="first image id (default 1)")
    args = parser.parse_args(argv)
    return print_made(lambda: make_demo_dataset(args.out, args.n, args.seed, args.first_id))


if __name__ == "__main__":
    sys.exit(main())
