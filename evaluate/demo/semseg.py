"""The demo's unsupervised-segmentation set (docs/design.md §18): the demo scenes (`evaluate.demo.scenes.make_scene`)
as a `folder`-kind set (`evaluate.datasets.label_folder`):

    images/demo_<id>.png     the scene
    labels/demo_<id>.png     8-bit grey, the class painted last at each pixel: 1 disc, 2 box, 3 wedge (the scene's
                             category ids), 0 background, 255 (ignore) on the crowd dots
    classes.txt              background, disc, box, wedge (line i names value i)

Same arguments, same bytes.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image

from evaluate.datasets.semantic import IGNORE
from evaluate.demo import DemoError
from evaluate.demo.scenes import CATEGORIES, make_scene
from evaluate.plumbing.atomic import write_bytes, write_text

IMAGES, LABELS, CLASSES = "images", "labels", "classes.txt"
BACKGROUND = "background"


def class_names() -> list[str]:
    """Value i's name: background, then the scenes' categories by id (1 disc, 2 box, 3 wedge)."""
    by_id = {c["id"]: c["name"] for c in CATEGORIES}
    if sorted(by_id) != list(range(1, len(by_id) + 1)):
        raise DemoError(f"the scenes' category ids {sorted(by_id)} are not 1..{len(by_id)}")
    return [BACKGROUND] + [by_id[i] for i in sorted(by_id)]


def scene_labels(annotations: list[dict], painted: np.ndarray) -> np.ndarray:
    """(H, W) uint8 classes of a scene: annotation k's category where `painted == k + 1`, IGNORE on the crowd
    (painted -1), 0 elsewhere."""
    labels = np.zeros(painted.shape, dtype=np.uint8)
    labels[painted < 0] = IGNORE
    for k, ann in enumerate(annotations):
        if not ann["iscrowd"]:
            labels[painted == k + 1] = int(ann["category_id"])
    return labels


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def make_demo_semseg(out_dir: str | os.PathLike, *, n_images: int, seed: int) -> Path:
    """Write `n_images` scenes (ids 1..n of `seed`) as a folder-kind set at `out_dir` (module docstring); return it."""
    if int(n_images) < 1 or int(seed) < 0:
        raise DemoError(f"n_images must be at least 1 and seed non-negative, got {n_images!r} and {seed!r}")
    out = Path(out_dir)
    for image_id in range(1, int(n_images) + 1):
        pixels, annotations, painted = make_scene(int(seed), image_id)
        name = f"demo_{image_id:04d}"
        write_bytes(out / IMAGES / f"{name}.png", _png(pixels))
        write_bytes(out / LABELS / f"{name}.png", _png(scene_labels(annotations, painted)))
    write_text(out / CLASSES, "\n".join(class_names()) + "\n")
    return out
