"""The demo's object-discovery set: the demo scenes (`evaluate.demo.scenes.make_scene`) written as a VOC year folder
(docs/design.md §15): `JPEGImages/<name>.jpg`, `Annotations/<name>.xml` (one `<object>` per non-crowd shape, its
box [x0 + 1, y0 + 1, x1, y1] in VOC's 1-based integers, from the shape's visible pixels; shapes partly hidden are
marked truncated), `ImageSets/Main/trainval.txt`. Same arguments, same bytes."""

from __future__ import annotations

import io
import os
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np
from PIL import Image

from evaluate.demo import DemoError
from evaluate.demo.scenes import CATEGORIES, make_scene
from evaluate.plumbing.atomic import write_bytes, write_text

SPLIT = "trainval"


def voc_xml(name: str, width: int, height: int, objects: list[dict]) -> str:
    """A VOC annotation: objects are {"name", "box": (xmin, ymin, xmax, ymax) 1-based, "truncated", "difficult"}."""
    parts = [f"<annotation><folder>VOC-demo</folder><filename>{escape(name)}.jpg</filename>",
             f"<size><width>{width}</width><height>{height}</height><depth>3</depth></size>"]
    for obj in objects:
        xmin, ymin, xmax, ymax = obj["box"]
        parts.append(f"<object><name>{escape(obj['name'])}</name><pose>Unspecified</pose>"
                     f"<truncated>{int(obj['truncated'])}</truncated><difficult>{int(obj['difficult'])}</difficult>"
                     f"<bndbox><xmin>{xmin}</xmin><ymin>{ymin}</ymin><xmax>{xmax}</xmax><ymax>{ymax}</ymax></bndbox>"
                     "</object>")
    parts.append("</annotation>\n")
    return "".join(parts)


def make_demo_voc(out_dir: str | os.PathLike, *, n_images: int, seed: int) -> Path:
    """Write `n_images` scenes (ids 1..n of `seed`) as a VOC year folder at `out_dir`; return it."""
    if int(n_images) < 1 or int(seed) < 0:
        raise DemoError(f"n_images must be at least 1 and seed non-negative, got {n_images!r} and {seed!r}")
    out = Path(out_dir)
    names = {c["id"]: c["name"] for c in CATEGORIES}
    listed = []
    for image_id in range(1, int(n_images) + 1):
        pixels, anns, painted = make_scene(int(seed), image_id)
        name = f"demo_{image_id:06d}"
        objects = []
        for k, ann in enumerate(anns):
            if ann["iscrowd"]:
                continue
            rows, cols = np.nonzero(painted == k + 1)
            if rows.size == 0:
                continue
            objects.append({"name": names[ann["category_id"]],
                            "box": (int(cols.min()) + 1, int(rows.min()) + 1, int(cols.max()) + 1, int(rows.max()) + 1),
                            "truncated": not isinstance(ann["segmentation"], list), "difficult": False})
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=95)
        write_bytes(out / "JPEGImages" / f"{name}.jpg", buffer.getvalue())
        write_text(out / "Annotations" / f"{name}.xml", voc_xml(name, pixels.shape[1], pixels.shape[0], objects))
        listed.append(name)
    write_text(out / "ImageSets" / "Main" / f"{SPLIT}.txt", "".join(f"{n}\n" for n in listed))
    return out
