"""The demo's video data set: short sequences of textured shapes moving over a textured background, with exact
masks, in DAVIS's layout (docs/design.md §12), so the video reading runs end to end on a fresh machine.

`make_demo_videos(out_dir, n_sequences, n_frames, seed)` writes

    out_dir/JPEGImages/480p/seqNN/00000.jpg ...     frames of FRAME_SIZE (W x H), JPEG quality JPEG_QUALITY
    out_dir/Annotations/480p/seqNN/00000.png ...    every frame's mask

Sequence i holds two objects when i is even (a palette PNG of ids 0..2, as DAVIS-2017 writes) and one when i is odd
(a grayscale 0/255 PNG, as DAVIS-2016 writes), so both kinds of mask are read. Each object is an ellipse or a
rectangle with its own colour and stripes, moving at a constant velocity and bouncing off the frame's edges; the
second object passes over the first, and the first's mask is what stays visible. Sequence i depends only on
(seed, i): the same arguments give byte-identical files.

Command line:
    python -m evaluate.demo.videos OUT --sequences N --frames T --seed S
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from evaluate.datasets.davis import RESOLUTION, write_mask
from evaluate.demo import DemoError, print_made
from evaluate.plumbing.atomic import write_bytes

FRAME_SIZE = (128, 96)  # W x H: read at video.height 96 as a 6 x 8 patch grid
JPEG_QUALITY = 95
COARSE = 6  # the background's texture: a COARSE x COARSE grid of random colours, smoothly interpolated
SPEED = 0.06  # at most this share of the frame's side per frame


def _background(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth random colour field with fine noise: (H, W, 3) float64 in [0, 255]."""
    coarse = rng.uniform(40, 215, size=(COARSE, COARSE, 3))
    ys = np.linspace(0, COARSE - 1, height)
    xs = np.linspace(0, COARSE - 1, width)
    y0, x0 = np.minimum(ys.astype(int), COARSE - 2), np.minimum(xs.astype(int), COARSE - 2)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    top = coarse[y0][:, x0] * (1 - fx) + coarse[y0][:, x0 + 1] * fx
    bottom = coarse[y0 + 1][:, x0] * (1 - fx) + coarse[y0 + 1][:, x0 + 1] * fx
    return top * (1 - fy) + bottom * fy + rng.normal(0, 6, size=(height, width, 3))


def _objects(rng: np.random.Generator, n_objects: int, height: int, width: int) -> list[dict]:
    """Each object's shape, size, colour, stripes, start and velocity (pixels per frame)."""
    objects = []
    for _ in range(n_objects):
        half = rng.uniform(0.14, 0.24, size=2) * (height, width)
        objects.append({
            "ellipse": bool(rng.integers(0, 2)),
            "half": half,
            "colour": rng.uniform(0, 255, size=3),
            "stripe": rng.uniform(4, 9),
            "centre": rng.uniform(half, (height, width) - half),
            "velocity": rng.uniform(-SPEED, SPEED, size=2) * (height, width),
        })
    return objects


def _position(obj: dict, t: int, height: int, width: int) -> np.ndarray:
    """The object's centre at frame t, bouncing off the edges (a triangle wave over its free range)."""
    low, span = obj["half"], np.maximum((height, width) - 2 * obj["half"], 1e-9)
    x = obj["centre"] + t * obj["velocity"] - low
    x = np.mod(x, 2 * span)
    return low + np.where(x > span, 2 * span - x, x)


def make_sequence(seed: int, index: int, n_frames: int) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """Sequence `index`: (frames (H, W, 3) uint8, masks (H, W) uint8 object ids 0..M, M)."""
    width, height = FRAME_SIZE
    rng = np.random.default_rng([seed, index])
    n_objects = 2 if index % 2 == 0 else 1
    background = _background(rng, height, width)
    objects = _objects(rng, n_objects, height, width)
    yy, xx = np.mgrid[:height, :width].astype(np.float64)
    stripes = [0.75 + 0.25 * np.sign(np.sin((xx + yy) * np.pi / obj["stripe"])) for obj in objects]
    frames, masks = [], []
    for t in range(n_frames):
        pixels = background.copy()
        ids = np.zeros((height, width), np.uint8)
        for k, obj in enumerate(objects, start=1):
            cy, cx = _position(obj, t, height, width)
            dy, dx = (yy - cy) / obj["half"][0], (xx - cx) / obj["half"][1]
            inside = dy**2 + dx**2 <= 1 if obj["ellipse"] else (np.abs(dy) <= 1) & (np.abs(dx) <= 1)
            pixels[inside] = obj["colour"] * stripes[k - 1][inside, None]
            ids[inside] = k
        frames.append(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))
        masks.append(ids)
    return frames, masks, n_objects


def make_demo_videos(out_dir: str | os.PathLike, n_sequences: int, n_frames: int, seed: int) -> Path:
    """Write the demo's video data set under `out_dir` (DAVIS's layout, module docstring); returns `out_dir`."""
    if n_sequences < 1 or n_frames < 3 or seed < 0:
        raise DemoError(f"demo videos need at least 1 sequence of at least 3 frames (the first and the last are not "
                        f"scored) and a seed >= 0; got {n_sequences} sequence(s), {n_frames} frame(s), seed {seed}")
    out = Path(out_dir)
    for index in range(n_sequences):
        frames, masks, n_objects = make_sequence(seed, index, n_frames)
        write_sequence(out, f"seq{index:02d}", list(zip(frames, masks)), grayscale=n_objects == 1)
    return out


def write_sequence(root: str | os.PathLike, name: str, frames: Sequence[tuple[np.ndarray, np.ndarray]], *,
                   grayscale: bool = False, resolution: str = RESOLUTION) -> None:
    """Write (rgb (H, W, 3) uint8, ids (H, W) uint8) frames in DAVIS's layout: JPEGImages/<resolution>/<name>/
    NNNNN.jpg (JPEG_QUALITY) and Annotations/<resolution>/<name>/NNNNN.png, a grayscale 0/255 mask as DAVIS-2016
    writes one object (`grayscale`), else a palette PNG of the ids (`evaluate.datasets.davis.write_mask`)."""
    root = Path(root)
    for t, (pixels, ids) in enumerate(frames):
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=JPEG_QUALITY)
        write_bytes(root / "JPEGImages" / resolution / name / f"{t:05d}.jpg", buffer.getvalue())
        mask_path = root / "Annotations" / resolution / name / f"{t:05d}.png"
        if grayscale:
            buffer = io.BytesIO()
            Image.fromarray(np.where(ids > 0, 255, 0).astype(np.uint8), mode="L").save(buffer, format="PNG")
            write_bytes(mask_path, buffer.getvalue())
        else:
            write_mask(mask_path, ids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.demo.videos", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="folder to write (DAVIS's layout)")
    parser.add_argument("--sequences", type=int, default=3)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    return print_made(lambda: make_demo_videos(args.out, args.sequences, args.frames, args.seed))


if __name__ == "__main__":
    sys.exit(main())
