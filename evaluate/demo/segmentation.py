"""The demo's segmentation set: the demo scenes (`evaluate.demo.scenes.make_scene`) written as a VOC segmentation
split (docs/design.md §17; DESIGN 15), as the VOC2012 tarball lays it out: `JPEGImages/<name>.jpg`,
`SegmentationObject/<name>.png` and `SegmentationClass/<name>.png` (palette PNGs in VOC's colour map whose index is
the label), `ImageSets/Segmentation/val.txt`.

Object k of a scene (its k-th non-crowd shape, where it is painted) is index k in the object map and its category
(1 disc, 2 box, 3 wedge) in the class map; the crowd dots are a whole void region (255), as VOC marks ambiguous
regions; and, as VOC's annotators drew it, a void band `BAND_RADIUS` pixels either side of every outline between
two labels (`void_band`: 4 to 5 px wide). Same arguments, same bytes.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image

from evaluate.datasets.voc_segmentation import CLASS_MAPS, OBJECTS, VOID, voc_palette
from evaluate.demo import DemoError
from evaluate.demo.scenes import make_scene
from evaluate.plumbing.atomic import write_bytes, write_text

SPLIT = "val"
BAND_RADIUS = 2  # a pixel within this chessboard distance of a pixel of another label is void


def void_band(labels: np.ndarray, radius: int = BAND_RADIUS) -> np.ndarray:
    """The pixels within `radius` (chessboard distance) of a pixel of another label: labels (H, W) int -> (H, W)
    bool. The image's border is no outline (the map is extended by its edge values)."""
    height, width = labels.shape
    padded = np.pad(labels, radius, mode="edge")
    band = np.zeros(labels.shape, dtype=bool)
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            band |= padded[radius + dy: radius + dy + height, radius + dx: radius + dx + width] != labels
    return band


def palette_png(indices: np.ndarray) -> bytes:
    """(H, W) uint8 indices as a palette PNG (mode P, VOC's colour map)."""
    indices = np.ascontiguousarray(indices, dtype=np.uint8)
    img = Image.frombytes("P", (indices.shape[1], indices.shape[0]), indices.tobytes())
    img.putpalette(voc_palette())
    buffer = io.BytesIO()
    img.save(buffer, format="PNG")
    return buffer.getvalue()


def scene_maps(painted: np.ndarray, categories: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(object map, class map), each (H, W) uint8, from a scene's `painted` (k + 1 for annotation k, -1 the crowd,
    0 background) and its annotations' categories (the objects' first, in order)."""
    band = void_band(painted)
    objects = np.where(painted > 0, painted, 0).astype(np.uint8)
    lookup = np.array([0] + list(categories), dtype=np.uint8)
    classes = lookup[np.clip(painted, 0, None)]
    void = band | (painted < 0)
    objects[void] = VOID
    classes[void] = VOID
    return objects, classes


def make_demo_voc_segmentation(out_dir: str | os.PathLike, *, n_images: int, seed: int) -> Path:
    """Write `n_images` scenes (ids 1..n of `seed`) as a VOC segmentation split at `out_dir`; return it."""
    if int(n_images) < 1 or int(seed) < 0:
        raise DemoError(f"n_images must be at least 1 and seed non-negative, got {n_images!r} and {seed!r}")
    out = Path(out_dir)
    listed = []
    for image_id in range(1, int(n_images) + 1):
        pixels, anns, painted = make_scene(int(seed), image_id)
        objects, classes = scene_maps(painted, [ann["category_id"] for ann in anns if not ann["iscrowd"]])
        name = f"demo_{image_id:06d}"
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=95)
        write_bytes(out / "JPEGImages" / f"{name}.jpg", buffer.getvalue())
        write_bytes(out / OBJECTS / f"{name}.png", palette_png(objects))
        write_bytes(out / CLASS_MAPS / f"{name}.png", palette_png(classes))
        listed.append(name)
    write_text(out / "ImageSets" / "Segmentation" / f"{SPLIT}.txt", "".join(f"{n}\n" for n in listed))
    return out
