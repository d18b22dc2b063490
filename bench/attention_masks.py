"""Benchmark the class-token attention mask measure (docs/design.md §17; DESIGN 15): the whole per-image work against a
plain released forward of the same network on the same images.

    .venv/bin/python bench/attention_masks.py                  # 8 coco2017-mini photos at VOC's size, ViT-S/16
    .venv/bin/python bench/attention_masks.py --patch 8 --images 4

In one run, on real photos (../shared/data/coco2017-mini val, the first `--images` in id order) resized to VOC's size
(long side 500, LANCZOS) and written with their instance masks (nearest) as a VOC segmentation split in a temporary
folder, with a seeded ViT-S/16 (or S/8) in the released form (class token, final norm; torch.manual_seed(0)), each
figure the best of `--repeats` runs over all images (the two alternated):
1. forward: open the image, normalise and crop it (`network_input`), `model.tokens(x)`: the plain released forward;
2. reading + masks + score: open and crop, the tapped forward giving the class-token attention
   (`class_token_attention`), the 60% masks (`mass_masks`), the labels read (`VocSegmentation.labels`: two PNGs
   decoded) and the image scored (`MaskTally.add`);
then the images/s of each and their ratio (goal: at least 0.9, i.e. the masks and the scoring cost under a tenth of
the forward), and per image the median time of each part alone. Timings depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from pycocotools import mask as mask_utils

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.machine import machine_line
from bench.scale import best_of, timed
from bench.shared_data import COCO_MINI, skip_unless
from evaluate.attention.masks import MaskTally, mass_masks, score_image
from evaluate.datasets.voc_segmentation import VocSegmentation
from evaluate.demo.segmentation import palette_png
from evaluate.networks.vit import VisionTransformer
from evaluate.readings.cls_attention import class_token_attention, network_input

VOC_LONG_SIDE = 500


def write_set(folder: Path, n: int) -> None:
    """The first n val photos with an instance as a VOC segmentation split: long side 500 (image LANCZOS, labels
    nearest), objects 1..k in annotation order, every object of class 1."""
    data = json.loads((COCO_MINI / "annotations.json").read_text())
    by_image: dict[int, list[dict]] = {}
    for ann in data["annotations"]:
        if not ann["iscrowd"]:
            by_image.setdefault(ann["image_id"], []).append(ann)
    images = [i for i in sorted(data["images"], key=lambda i: i["id"]) if i["id"] in by_image][:n]
    for folder_name in ("JPEGImages", "SegmentationObject", "SegmentationClass", "ImageSets/Segmentation"):
        (folder / folder_name).mkdir(parents=True)
    for image in images:
        height, width = image["height"], image["width"]
        objects = np.zeros((height, width), dtype=np.uint8)
        for k, ann in enumerate(by_image[image["id"]], start=1):
            rles = mask_utils.frPyObjects(ann["segmentation"], height, width)
            objects[mask_utils.decode(mask_utils.merge(rles) if isinstance(rles, list) else rles).astype(bool)] = k
        scale = VOC_LONG_SIDE / max(height, width)
        size = (round(width * scale), round(height * scale))
        name = Path(image["file_name"]).stem
        photo = Image.open(COCO_MINI / "images" / image["file_name"]).convert("RGB")
        photo.resize(size, Image.Resampling.LANCZOS).save(folder / "JPEGImages" / f"{name}.jpg", quality=95)
        resized = np.asarray(Image.fromarray(objects).resize(size, Image.Resampling.NEAREST))
        (folder / "SegmentationObject" / f"{name}.png").write_bytes(palette_png(resized))
        (folder / "SegmentationClass" / f"{name}.png").write_bytes(palette_png(np.minimum(resized, 1)))
    (folder / "ImageSets" / "Segmentation" / "val.txt").write_text("".join(
        Path(i["file_name"]).stem + "\n" for i in images))


def part_times(model: VisionTransformer, dataset: VocSegmentation, image_id: int, patch: int,
               repeats: int) -> dict[str, float]:
    """Seconds of each part of one image's work alone, each the best of `repeats`."""
    x = network_input(dataset.open_image(image_id), patch).unsqueeze(0)
    attention = class_token_attention(model, x)[0].numpy()
    masks, objects = mass_masks(attention), dataset.labels(image_id).objects
    with torch.inference_mode():
        forward = best_of(repeats, lambda: model.tokens(x))
    return {"open + crop": best_of(repeats, lambda: network_input(dataset.open_image(image_id), patch)),
            "forward": forward,
            "tapped forward": best_of(repeats, lambda: class_token_attention(model, x)),
            "masks": best_of(repeats, lambda: mass_masks(attention)),
            "labels read": best_of(repeats, lambda: dataset.labels(image_id)),
            "score": best_of(repeats, lambda: score_image(masks, objects, patch))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--patch", type=int, default=16, choices=(8, 16))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    skip_unless(COCO_MINI / "annotations.json", "bench/attention_masks.py")
    print(machine_line())
    torch.manual_seed(0)
    model = VisionTransformer(patch_size=args.patch, pos_grid=224 // args.patch, class_token=True,
                              final_norm=True).eval()
    p = args.patch
    with tempfile.TemporaryDirectory() as tmp:
        write_set(Path(tmp), args.images)
        dataset = VocSegmentation(tmp)
        ids = dataset.image_ids
        sizes = [dataset.open_image(i).size for i in ids]
        tokens = statistics.median((w // p) * (h // p) for w, h in sizes)
        print(f"data: {len(ids)} coco2017-mini photos at VOC's size (long side {VOC_LONG_SIDE}; median {tokens:.0f} "
              f"patches), ViT-S/{p} released form, seeded, {torch.get_num_threads()} threads")

        def forward_only() -> None:
            with torch.inference_mode():
                for i in ids:
                    model.tokens(network_input(dataset.open_image(i), p).unsqueeze(0))

        def whole() -> None:
            tally = MaskTally()
            for i in ids:
                attention = class_token_attention(model, network_input(dataset.open_image(i), p).unsqueeze(0))[0]
                labels = dataset.labels(i)
                tally.add(i, mass_masks(attention.numpy()), labels.objects, p, labels.class_of)

        # alternated, so that a load that comes and goes on a shared machine weighs on both alike
        plain, measured = math.inf, math.inf
        for _ in range(args.repeats):
            plain = min(plain, timed(forward_only))
            measured = min(measured, timed(whole))
        ratio = plain / measured
        print(f"forward: {len(ids) / plain:.2f} images/s; reading + masks + score: {len(ids) / measured:.2f} "
              f"images/s: x{ratio:.3f} the forward's speed (goal: at least 0.9)")
        parts: dict[str, list[float]] = {}
        for i in ids:
            for name, seconds in part_times(model, dataset, i, p, args.repeats).items():
                parts.setdefault(name, []).append(seconds)
        print("per image, median: " + ", ".join(f"{name} {1000 * statistics.median(t):.2f} ms"
                                                for name, t in parts.items()))


if __name__ == "__main__":
    main()
