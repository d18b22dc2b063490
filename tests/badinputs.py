"""Builders of bad and awkward input files for the bad-input matrix and the resume tests (issue 6).

Every builder writes a real file into a folder the test owns (pytest's tmp_path): no mocks of the model or the
data set. Checkpoints are written from state dicts built here by name and shape, independently of
`evaluate.networks.vit`, so a ViT-B or a ViT-S/8 file has exactly the tensors DINO's own code saves; image builders
return the file and the RGB pixels a correct reader must produce, computed here with numpy.

Also here: a tiny experiment's config.yaml and a runner for the real `snakemake` CLI on it.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch
import yaml
from PIL import Image

from sources import REPO
SNAKEMAKE = REPO / ".venv" / "bin" / "snakemake"
if not SNAKEMAKE.exists():  # an installation outside the checkout's .venv: the snakemake beside this Python
    SNAKEMAKE = Path(sys.executable).with_name("snakemake")
SNAKEFILE = REPO / "Snakefile"

# ---------------------------------------------------------------------------------------------------- checkpoints


def vit_state(*, width: int = 384, patch: int = 16, depth: int = 12, image: int = 224, dino: bool = True,
              seed: int = 0) -> dict[str, torch.Tensor]:
    """A DINO-style ViT state dict with real random float32 weights: ViT-S/16 by default.

    width 384 / patch 16 is ViT-S/16, width 768 is ViT-B, patch 8 gives a (1, 1 + 784, width) position table.
    dino=True: DINO's released form (`cls_token`, a class row in `pos_embed`, final `norm.*`); False: our own
    names (docs/design.md §1). Built here by name and shape so the test does not lean on the loader's own model.
    """
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * 0.02

    n = (image // patch) ** 2
    state: dict[str, torch.Tensor] = {}
    if dino:
        state["cls_token"] = randn(1, 1, width)
    state["pos_embed"] = randn(1, n + (1 if dino else 0), width)
    state["patch_embed.proj.weight"] = randn(width, 3, patch, patch)
    state["patch_embed.proj.bias"] = randn(width)
    for i in range(depth):
        b = f"blocks.{i}."
        state[b + "norm1.weight"] = 1 + randn(width)
        state[b + "norm1.bias"] = randn(width)
        state[b + "attn.qkv.weight"] = randn(3 * width, width)
        state[b + "attn.qkv.bias"] = randn(3 * width)
        state[b + "attn.proj.weight"] = randn(width, width)
        state[b + "attn.proj.bias"] = randn(width)
        state[b + "norm2.weight"] = 1 + randn(width)
        state[b + "norm2.bias"] = randn(width)
        state[b + "mlp.fc1.weight"] = randn(4 * width, width)
        state[b + "mlp.fc1.bias"] = randn(4 * width)
        state[b + "mlp.fc2.weight"] = randn(width, 4 * width)
        state[b + "mlp.fc2.bias"] = randn(width)
    if dino:
        state["norm.weight"] = 1 + randn(width)
        state["norm.bias"] = randn(width)
    return state


def save_state(path: Path, state: Any, **kwargs: Any) -> Path:
    """torch.save `state` to `path` (parents created); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path, **kwargs)
    return path


class Payload:
    """An object whose unpickling runs `touch <marker>`: what an attacker hides in a checkpoint.

    Pickling it only records the call; the command runs when (and only when) an unrestricted unpickler loads it.
    """

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


MALICIOUS_CONTAINERS = ("zip", "legacy", "raw-pickle")


def write_malicious_checkpoint(path: Path, marker: Path, container: str = "zip") -> Path:
    """A checkpoint that looks like a backbone but carries `Payload(marker)` beside its weights.

    container: "zip" (torch.save's default), "legacy" (torch.save's pre-1.6 format) or "raw-pickle" (a bare
    pickle.dump, as some training scripts write).
    """
    state = {"pos_embed": torch.zeros(1, 196, 384), "args": Payload(marker)}
    path.parent.mkdir(parents=True, exist_ok=True)
    if container == "zip":
        torch.save(state, path)
    elif container == "legacy":
        torch.save(state, path, _use_new_zipfile_serialization=False)
    elif container == "raw-pickle":
        with open(path, "wb") as handle:
            pickle.dump(state, handle)
    else:
        raise ValueError(f"unknown container {container!r}")
    return path


def load_unsafely(path: Path, container: str) -> None:
    """What an unsafe loader would do with the file (runs its payload): the control that proves it is malicious."""
    if container == "raw-pickle":
        with open(path, "rb") as handle:
            pickle.load(handle)  # noqa: S301 - deliberate, on a file this test wrote
    else:
        torch.load(path, weights_only=False)


# --------------------------------------------------------------------------------------------------------- images


def _save(img: Image.Image, path: Path, **kwargs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, **kwargs)
    return path


def quadrants(height: int, width: int, colours: Iterable[Iterable[int]]) -> np.ndarray:
    """(height, width, C) uint8 image of four flat blocks: top-left, top-right, bottom-left, bottom-right."""
    tl, tr, bl, br = (np.asarray(c, dtype=np.uint8) for c in colours)
    out = np.zeros((height, width, tl.size), dtype=np.uint8)
    h, w = height // 2, width // 2
    out[:h, :w], out[:h, w:], out[h:, :w], out[h:, w:] = tl, tr, bl, br
    return out


def quadrant_centres(height: int, width: int) -> list[tuple[int, int]]:
    """(row, col) of the centre of each quadrant, in quadrants' order (far from JPEG's block edges)."""
    h, w = height // 2, width // 2
    return [(h // 2, w // 2), (h // 2, w + w // 2), (h + h // 2, w // 2), (h + h // 2, w + w // 2)]


def rgb_png(path: Path, height: int = 40, width: int = 48, seed: int = 0) -> tuple[Path, np.ndarray]:
    """An ordinary RGB PNG of seeded noise; returns (path, pixels (H, W, 3) uint8)."""
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    return _save(Image.fromarray(pixels, "RGB"), path), pixels


def rgba_png(path: Path) -> tuple[Path, np.ndarray]:
    """RGBA PNG whose alpha runs from fully transparent to opaque; expected: the colour under the alpha."""
    rgba = np.random.default_rng(1).integers(0, 256, size=(32, 40, 4), dtype=np.uint8)
    rgba[:, :, 3] = np.linspace(0, 255, 40).astype(np.uint8)[None, :]
    rgba[:4, :, 3] = 0  # fully transparent rows still keep their colour
    return _save(Image.fromarray(rgba, "RGBA"), path), rgba[:, :, :3].copy()


def gray16_png(path: Path) -> tuple[Path, np.ndarray]:
    """16-bit grayscale PNG; expected: value >> 8 in all three channels (256 -> 1, not 255 as a clip would give)."""
    row = np.array([0, 255, 256, 4660, 32768, 65280, 65535, 511], dtype=np.uint16)
    values = np.tile(row, (24, 3))  # (24, 24)
    path = _save(Image.fromarray(values), path)
    expected = np.repeat((values >> 8).astype(np.uint8)[:, :, None], 3, axis=2)
    return path, expected


CMYK_QUADRANTS = ((0, 0, 0, 0), (255, 0, 0, 0), (0, 128, 64, 32), (10, 20, 30, 200))


def cmyk_jpeg(path: Path) -> tuple[Path, np.ndarray]:
    """CMYK JPEG of four flat blocks; expected RGB = (255 - c)(255 - k) / 255 per channel, i.e. white, cyan, ..."""
    cmyk = quadrants(32, 32, CMYK_QUADRANTS)
    path = _save(Image.fromarray(cmyk, "CMYK"), path, quality=100, subsampling=0)
    c = cmyk[:, :, :3].astype(np.float64)
    k = cmyk[:, :, 3:].astype(np.float64)
    expected = np.rint((255 - c) * (255 - k) / 255).astype(np.uint8)
    return path, expected


def palette_png(path: Path, transparency: bool = False) -> tuple[Path, np.ndarray]:
    """Palette (mode P) PNG of 5 colours; expected: palette[index]. With `transparency`, index 0 is transparent
    (its colour must still come through)."""
    palette = np.array([[12, 34, 56], [255, 0, 0], [0, 200, 0], [7, 7, 250], [128, 128, 128]], dtype=np.uint8)
    index = (np.arange(30 * 36).reshape(30, 36) * 7 % 5).astype(np.uint8)
    img = Image.fromarray(index, "P")
    full = np.zeros((256, 3), dtype=np.uint8)
    full[: len(palette)] = palette
    img.putpalette(full.flatten().tolist())
    kwargs = {"transparency": 0} if transparency else {}
    return _save(img, path, **kwargs), palette[index]


EXIF_ORIENTATION = 0x0112
EXIF_QUADRANTS = ((250, 10, 10), (10, 250, 10), (10, 10, 250), (240, 240, 20))


def exif_rotated_jpeg(path: Path, orientation: int = 6) -> tuple[Path, np.ndarray]:
    """A photo stored 48 wide x 32 high with EXIF orientation 6 (camera held upright: show it rotated 90 degrees
    clockwise) or 8 (counter-clockwise) or 3 (180). Expected: the stored pixels rotated with numpy, so
    32 wide x 48 high for 6 and 8."""
    stored = quadrants(32, 48, EXIF_QUADRANTS)
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    path = _save(Image.fromarray(stored, "RGB"), path, quality=100, subsampling=0, exif=exif.tobytes())
    turns = {6: -1, 8: 1, 3: 2, 1: 0}[orientation]  # np.rot90 k: positive = counter-clockwise
    return path, np.rot90(stored, k=turns).copy()


def jpeg_bytes(height: int = 64, width: int = 64, seed: int = 0) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def truncated_jpeg(path: Path) -> Path:
    """A JPEG cut off halfway through its entropy-coded data (a partial download)."""
    data = jpeg_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data[: len(data) // 2])
    return path


# ------------------------------------------------------------------------------------------------ COCO data sets


def square_polygon(x: float, y: float, side: float) -> list[float]:
    return [x, y, x + side, y, x + side, y + side, x, y + side]


def annotation(ann_id: int, image_id: int, category_id: int = 1, polygon: list[float] | None = None,
               iscrowd: int = 0) -> dict:
    polygon = polygon if polygon is not None else square_polygon(4, 4, 10)
    xs, ys = polygon[0::2] or [0], polygon[1::2] or [0]
    bbox = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
    return {"id": ann_id, "image_id": image_id, "category_id": category_id, "segmentation": [polygon],
            "area": float(bbox[2] * bbox[3]), "bbox": bbox, "iscrowd": iscrowd}


CATEGORIES = [{"id": 1, "name": "thing", "supercategory": "thing"}, {"id": 2, "name": "other", "supercategory": "thing"}]


def write_coco(folder: Path, n_images: int = 2, *, height: int = 40, width: int = 48, first_id: int = 1,
               annotations: list[dict] | None = None, categories: list[dict] | None = None,
               ext: str = "png") -> tuple[Path, Path]:
    """A small valid COCO data set in `folder`: images/{id:06d}.{ext} (seeded noise, PNG or JPEG) and
    annotations.json with one square per image. Returns (images folder, annotation file). `annotations` /
    `categories` replace the defaults."""
    images_dir = folder / "images"
    images = []
    for image_id in range(first_id, first_id + n_images):
        name = f"{image_id:06d}.{ext}"
        if ext == "png":
            rgb_png(images_dir / name, height, width, seed=image_id)
        else:
            images_dir.mkdir(parents=True, exist_ok=True)
            (images_dir / name).write_bytes(jpeg_bytes(height, width, seed=image_id))
        images.append({"id": image_id, "file_name": name, "height": height, "width": width})
    images_dir.mkdir(parents=True, exist_ok=True)
    if annotations is None:
        annotations = [annotation(k + 1, img["id"]) for k, img in enumerate(images)]
    data = {"images": images, "annotations": annotations,
            "categories": CATEGORIES if categories is None else categories}
    path = folder / "annotations.json"
    path.write_text(json.dumps(data))
    return images_dir, path


# ------------------------------------------------------------------------------------------- workflow (snakemake)

TINY_SETTINGS = {
    "features": {"shard_size": 1, "batch_size": 1, "dtype": "float16", "device": "cpu", "threads": 1},
    "decoder": {"sweep": {"tau": [0.1, 0.2], "eps": [1e-5], "foreground": ["seed"], "split": ["mean"],
                          "component": ["seed"]}},
    "probe": {"max_iter": 10},
    "bootstrap": {"resamples": 100, "seed": 0},
    "figures": {"overlay_images": 1},
}


def demo_checkpoint(name: str, seed: int = 0, fmt: str = "dino-backbone") -> dict:
    """A config entry for a demo checkpoint the workflow generates itself (results/demo/checkpoints)."""
    return {"path": f"results/demo/checkpoints/{name}.pth", "demo": {"format": fmt, "seed": seed}}


def demo_dataset(name: str, n_images: int, roles: list[str], seed: int = 1, first_image_id: int = 1) -> dict:
    """A config entry for a demo data set the workflow draws itself (results/demo/datasets)."""
    return {"images": f"results/demo/datasets/{name}/images",
            "annotations": f"results/demo/datasets/{name}/annotations.json", "roles": roles,
            "demo": {"n_images": n_images, "seed": seed, "first_image_id": first_image_id}}


def write_config(workdir: Path, checkpoints: dict, datasets: dict, **sections: Any) -> Path:
    """workdir/config.yaml of a tiny experiment: the given checkpoints and data sets, TINY_SETTINGS unless
    `sections` replaces a section (pass a section as None to leave it out)."""
    config: dict[str, Any] = {"checkpoints": checkpoints, "datasets": datasets}
    for key, value in {**TINY_SETTINGS, **sections}.items():
        if value is not None:
            config[key] = value
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def snakemake_command(workdir: Path, *targets: str, keep_going: bool = False, extra: Iterable[str] = (),
                      configfile: Path | None = None) -> list[str]:
    """The real CLI on workdir/config.yaml (or `configfile`) with the local profile (rerun-incomplete,
    show-failed-logs), 2 cores."""
    cmd = [str(SNAKEMAKE), "--snakefile", str(SNAKEFILE), "--directory", str(workdir),
           "--configfile", str(configfile or workdir / "config.yaml"),
           "--profile", str(REPO / "workflow" / "profiles" / "local"),
           "--cores", "2"]
    if keep_going:
        cmd.append("--keep-going")
    return cmd + list(extra) + list(targets)


def run_snakemake(workdir: Path, *targets: str, keep_going: bool = False, extra: Iterable[str] = (),
                  env: dict | None = None, configfile: Path | None = None) -> subprocess.CompletedProcess:
    """Run snakemake to the end (on workdir/config.yaml, or `configfile`); returns the CompletedProcess with stdout
    and stderr merged into `.stdout`."""
    return subprocess.run(snakemake_command(workdir, *targets, keep_going=keep_going, extra=extra,
                                            configfile=configfile),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=workdir,
                          env=env)


def shard_files(workdir: Path, checkpoint: str, dataset: str, shard: str) -> list[Path]:
    """The four files of one feature shard."""
    folder = workdir / "results" / "features" / checkpoint / dataset / shard
    return [folder / name for name in ("keys480.npy", "tokens224.npy", "image_ids.json", "meta.json")]


# ------------------------------------------------------------------------------- loaders' bad input (issue 34)


def png_header(path: Path, width: int, height: int, grey: bool = False) -> Path:
    """A PNG whose header declares `width` x `height` pixels (RGB, or 8-bit grey), its pixel data left out: what a
    decompression bomb shows a reader, which decides from the header before decoding anything."""
    import struct
    import zlib

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0 if grey else 2, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b""))
    return path


def write_voc(root: Path, images: dict[str, dict], split: str = "trainval", split_text: str | bytes | None = None
              ) -> Path:
    """A VOC year folder: per name of `images` a JPEG of its `size` (W, H), an XML declaring `declared` (W, H;
    default its size) with one object per `boxes` entry (VOC's 1-based xmin, ymin, xmax, ymax), and the split
    file listing the names (or holding `split_text` as given). Returns the root."""
    for sub in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for name, spec in images.items():
        width, height = spec["size"]
        (root / "JPEGImages" / f"{name}.jpg").write_bytes(jpeg_bytes(height, width))
        dw, dh = spec.get("declared", spec["size"])
        objects = "".join(f"<object><name>thing</name><bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin><xmax>{x1}</xmax>"
                          f"<ymax>{y1}</ymax></bndbox></object>" for x0, y0, x1, y1 in spec.get("boxes", ()))
        (root / "Annotations" / f"{name}.xml").write_text(
            f"<annotation><filename>{name}.jpg</filename><size><width>{dw}</width><height>{dh}</height>"
            f"<depth>3</depth></size>{objects}</annotation>")
    text = "".join(f"{name}\n" for name in images) if split_text is None else split_text
    split_file = root / "ImageSets" / "Main" / f"{split}.txt"
    (split_file.write_bytes if isinstance(text, bytes) else split_file.write_text)(text)
    return root


def write_coco_boxes(folder: Path, image_specs: list[dict], annotations: Any = None, **top: Any
                     ) -> tuple[Path, Path]:
    """A COCO instances file for object discovery and its images folder. Per entry of `image_specs`: a JPEG of its
    `size` (W, H) written as images/%012d.jpg of its `id`, and an entry of that id, file name and `declared` (W, H)
    as width and height (default: the size), then the keys of `set` put in and those of `without` left out.
    `annotations`: what the file's "annotations" holds (default: one 10 x 8 box per image); `top`: more
    top-level keys. Returns (images folder, annotation file)."""
    images_dir = folder / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for k, spec in enumerate(image_specs):
        width, height = spec["size"]
        name = f"{spec['id']:012d}.jpg"
        (images_dir / name).write_bytes(jpeg_bytes(height, width, seed=k))
        declared_width, declared_height = spec.get("declared", spec["size"])
        entry = {"id": spec["id"], "file_name": name, "width": declared_width, "height": declared_height,
                 **spec.get("set", {})}
        entries.append({key: value for key, value in entry.items() if key not in spec.get("without", ())})
    if annotations is None:
        annotations = [{"id": k + 1, "image_id": e["id"], "category_id": 1, "bbox": [2, 2, 10, 8], "iscrowd": 0,
                        "area": 80.0} for k, e in enumerate(entries) if "id" in e]
    data = {"images": entries, "annotations": annotations, "categories": CATEGORIES, **top}
    path = folder / "instances.json"
    path.write_text(json.dumps(data))
    return images_dir, path


def torch_zip_member_offset(path: Path, member_suffix: str) -> tuple[int, int]:
    """(offset of the first data byte, size) of the first member of a torch zip checkpoint whose name ends with
    `member_suffix` (e.g. "/data/0", a tensor's storage), read from its local header."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(member_suffix))
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(30)
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    return info.header_offset + 30 + name_length + extra_length, info.compress_size
