"""A seeded, category-balanced subset of a COCO instances file: the train subset an experiment selects the decoder's
settings on and trains the probe on (examples/coco-val2017.yaml names `instances_train_subset.json`).

    python -m evaluate.datasets.subset data/coco/annotations/instances_train2017.json --images 500 --seed 0 \\
        -o data/coco/annotations/instances_train_subset.json

(`make subset SOURCE=... IMAGES=500 SEED=0 OUT=...` runs the same.) The images folder stays the source's (train2017):
the subset lists some of its images, and the config's `images:` names that folder.

Which images: those with at least one object that is not a crowd region (`iscrowd: 0`). An image counts for every
category of its non-crowd objects. The subset grows one image at a time: the category held by the fewest chosen
images so far, among those that still have an image not chosen (ties: the category with fewer images in the source
first, then a seeded random order of the categories), gives its next image in a seeded random order of its images.
So the rarest categories are covered first, and no category trails another by more images than the source forces.
The same file, size and seed give the same subset, byte for byte.

What is written: the source's `info` (with `subset_of`: the source file's name and sha256, the size, the seed),
`licenses` and every category (so category names match the eval set's, which the probe needs), the chosen images in
the source's order and all their annotations (crowd regions too). Written atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from evaluate.datasets import DataSetError


class SubsetError(DataSetError):
    """A subset that cannot be made: the message names the file and what is wrong."""


def read_instances(path: str | Path) -> dict[str, Any]:
    """A COCO instances file's JSON: `images`, `annotations` and `categories` lists (SubsetError otherwise)."""
    path = Path(path)
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise SubsetError(f"{path}: no such annotation file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SubsetError(f"{path}: not valid JSON ({exc})") from None
    lists = ("images", "annotations", "categories")
    if not isinstance(data, dict) or not all(isinstance(data.get(key), list) for key in lists):
        raise SubsetError(f"{path}: not a COCO instances file (it needs the lists {', '.join(lists)})")
    return data


def images_by_category(data: dict[str, Any]) -> dict[int, list[int]]:
    """Category id -> the sorted ids of the images holding one of its non-crowd objects."""
    found: dict[int, set[int]] = defaultdict(set)
    for annotation in data["annotations"]:
        if not annotation.get("iscrowd", 0):
            found[int(annotation["category_id"])].add(int(annotation["image_id"]))
    return {category: sorted(ids) for category, ids in sorted(found.items())}


def balanced_image_ids(data: dict[str, Any], n_images: int, seed: int, source: str = "the annotation file") -> list[int]:
    """The ids of the `n_images` images of a balanced subset (module docstring), in the order they were chosen."""
    per_category = images_by_category(data)
    candidates = sorted({i for ids in per_category.values() for i in ids})
    if isinstance(n_images, bool) or not isinstance(n_images, int) or n_images < 1:
        raise SubsetError(f"{source}: the subset's size must be a positive number of images, got {n_images!r}")
    if n_images > len(candidates):
        raise SubsetError(f"{source}: asked for {n_images} images, but only {len(candidates)} hold an object that "
                          "is not a crowd region")
    rng = np.random.default_rng(seed)
    categories = list(per_category)
    tie_order = {c: rank for rank, c in enumerate(rng.permutation(categories).tolist())}
    queue = {c: rng.permutation(per_category[c]).tolist() for c in categories}
    categories_of: dict[int, set[int]] = defaultdict(set)
    for c, ids in per_category.items():
        for i in ids:
            categories_of[i].add(c)
    held = dict.fromkeys(categories, 0)
    chosen: list[int] = []
    taken: set[int] = set()
    while len(chosen) < n_images:
        for c in categories:
            while queue[c] and queue[c][0] in taken:
                queue[c].pop(0)
        open_categories = [c for c in categories if queue[c]]
        c = min(open_categories, key=lambda c: (held[c], len(per_category[c]), tie_order[c]))
        image = queue[c].pop(0)
        chosen.append(image)
        taken.add(image)
        for other in categories_of[image]:
            held[other] += 1
    return chosen


def subset_of(data: dict[str, Any], image_ids: list[int], subset_info: dict[str, Any]) -> dict[str, Any]:
    """The instances file of the chosen images: info (with `subset_of`), licenses, every category, the images in
    the source's order and all their annotations."""
    keep = set(image_ids)
    info = dict(data.get("info") or {})
    info["subset_of"] = subset_info
    out: dict[str, Any] = {"info": info}
    if "licenses" in data:
        out["licenses"] = data["licenses"]
    out["images"] = [image for image in data["images"] if int(image["id"]) in keep]
    out["annotations"] = [a for a in data["annotations"] if int(a["image_id"]) in keep]
    out["categories"] = data["categories"]
    return out


def make_subset(source: str | Path, out: str | Path, n_images: int, seed: int) -> dict[str, Any]:
    """Write the balanced subset of `source` to `out` (atomically) and return it."""
    from evaluate.plumbing.atomic import write_bytes
    from evaluate.plumbing.provenance import sha256_file

    source, out = Path(source), Path(out)
    if out.resolve() == source.resolve():
        raise SubsetError(f"{out}: the subset would overwrite its source; name another output file")
    data = read_instances(source)
    ids = balanced_image_ids(data, n_images, seed, str(source))
    subset = subset_of(data, ids, {"file": source.name, "sha256": sha256_file(source), "images": n_images,
                                   "seed": seed})
    write_bytes(out, (json.dumps(subset, ensure_ascii=False) + "\n").encode("utf-8"))
    return subset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.datasets.subset",
                                     description="A seeded, category-balanced subset of a COCO instances file.")
    parser.add_argument("source", help="a COCO instances file, e.g. instances_train2017.json")
    parser.add_argument("--images", type=int, required=True, help="how many images the subset holds")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the random orders (default 0)")
    parser.add_argument("-o", "--out", required=True, help="the subset's instances file")
    args = parser.parse_args(argv)
    try:
        subset = make_subset(args.source, args.out, args.images, args.seed)
    except DataSetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    covered = len({a["category_id"] for a in subset["annotations"] if not a.get("iscrowd", 0)})
    print(f"{args.out}: {len(subset['images'])} images of {args.source} (seed {args.seed}), "
          f"{len(subset['annotations'])} objects, {covered} of {len(subset['categories'])} categories present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
