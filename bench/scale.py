"""Thesis scale: decoding once per data set against decoding once per checkpoint, workers, and the disk it takes.

    .venv/bin/python bench/scale.py [--checkpoints 3] [--images N] [--network-images 8] [--workers W]
                                    [--batch B] [--threads T] [--repeats 2]

--images, --workers, --batch and --threads default to the workflow's `features.shard_size`, `features.workers`,
`features.batch_size` and `features.threads` (the config schema), so the figures are those of one preprocess or
extract job of a shard.

K seeded checkpoints (`evaluate.demo.checkpoints.make_demo_checkpoint`) are extracted on real coco2017-mini photos, decoded from
JPEG exactly as the workflow does. Printed in one run:
- preprocessing throughput (decode + both resizes, images/s) of `preprocess_shard` with 1 worker and with --workers,
  each timed run writing a new inputs folder, as a preprocess job does;
- wall time per image per checkpoint, network cost excluded (the preprocessing-bound figure: everything an
  extraction job does before the network, i.e. decode + resize + normalise per checkpoint today, against one
  `preprocess_shard` for the data set + reading and normalising its uint8 inputs per checkpoint), on --images;
- the same with the network included (`extract_shard`, which decodes in the job, against `preprocess_shard` once +
  `extract_inputs` per checkpoint), on --network-images, with the features checked byte-identical between the two;
- disk bytes written per image and checkpoint with features kept and dropped (`features.keep`), measured on the
  files the run wrote, and what that makes for 60 checkpoints x 5,000 images.
The machine may be shared: the load average before and after is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.machine import machine_line  # noqa: E402
from bench.shared_data import COCO_MINI, skip_unless  # noqa: E402
from evaluate.networks.checkpoints import load_backbone  # noqa: E402
from evaluate.datasets.coco import CocoDataset  # noqa: E402
from evaluate.demo.checkpoints import make_demo_checkpoint  # noqa: E402
from evaluate.experiment import config_defaults  # noqa: E402
from evaluate.readings.features import extract_inputs, extract_shard  # noqa: E402
from evaluate.readings.inputs import BYTES_PER_IMAGE, DecodedInputs, StoredInputs, model_batches, preprocess_shard  # noqa: E402

FORMATS = ("dino-backbone", "selfpatch-train", "dino-train", "backbone")
FEATURES = config_defaults("features")  # the workflow's defaults: the bench times what a job does
JOB_OPTIONS = {  # command-line option -> (its `features` setting, what it sets)
    "--batch": ("batch_size", "images per forward pass"),
    "--threads": ("threads", "torch threads"),
    "--workers": ("workers", "processes decoding the images"),
}


def add_job_options(parser: argparse.ArgumentParser, *options: str) -> None:
    """`options` of JOB_OPTIONS, each defaulting to its `features` setting in the config schema, so that a bench
    times what a job does (bench/precision.py uses them too)."""
    for option in options:
        key, what = JOB_OPTIONS[option]
        parser.add_argument(option, type=int, default=FEATURES[key], help=f"{what} (features.{key}, {FEATURES[key]})")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def best_of(repeats: int, fn) -> float:
    """The shortest of `repeats` timed calls of `fn`, in seconds."""
    return min(timed(fn) for _ in range(repeats))


def drain(batches) -> None:
    for _ in batches:
        pass


def folder_bytes(folder: Path, names: tuple[str, ...] | None = None) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and (names is None or p.name in names))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=3, help="K seeded checkpoints (default 3)")
    parser.add_argument("--images", type=int, default=FEATURES["shard_size"],
                        help=f"images for the network-excluded figures (features.shard_size, {FEATURES['shard_size']})")
    parser.add_argument("--network-images", type=int, default=8, help="images for the network-included figures (8)")
    add_job_options(parser, "--workers", "--batch", "--threads")
    parser.add_argument("--repeats", type=int, default=2, help="timed repeats of each figure, best kept (2)")
    args = parser.parse_args(argv)
    skip_unless(COCO_MINI / "annotations.json", "bench/scale.py")
    torch.set_num_threads(args.threads)
    dataset = CocoDataset(COCO_MINI / "images", COCO_MINI / "annotations.json")
    ids = sorted(dataset.image_ids)[: args.images]
    net_ids = ids[: args.network_images]
    k = args.checkpoints
    root = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    try:
        models = [load_backbone(make_demo_checkpoint(root / f"c{i}.pth", FORMATS[i % len(FORMATS)], seed=i,
                                                       architecture="vit-s16"), which="teacher", form="backbone").model
                  for i in range(k)]
        load_before = os.getloadavg()
        print(machine_line())
        print(f"{k} seeded checkpoints, coco2017-mini JPEGs; {len(ids)} images (network excluded), {len(net_ids)} "
              f"(network included); {args.workers} workers, batch {args.batch}; load average before "
              f"{load_before[0]:.2f} (1 min) {load_before[1]:.2f} (5 min)")
        cpu_start, wall_start = time.process_time(), time.perf_counter()

        # ---- preprocessing throughput: 1 worker against --workers, alternately, each into a new folder
        def preprocess_into_new_folder(workers: int) -> float:
            folder = root / f"preprocess-{workers}"
            seconds = timed(lambda: preprocess_shard(dataset, ids, folder, workers=workers))
            shutil.rmtree(folder)
            return seconds

        one, many = [], []
        for _ in range(args.repeats):
            one.append(preprocess_into_new_folder(1))
            many.append(preprocess_into_new_folder(args.workers))
        rate1, rate_w = len(ids) / min(one), len(ids) / min(many)
        print(f"\npreprocessing (decode + both resizes): 1 worker {rate1:.1f} img/s, {args.workers} workers "
              f"{rate_w:.1f} img/s -> {rate_w / rate1:.2f}x (target >= 1.6x on 2 cores)")

        # ---- network excluded: everything before the network, per checkpoint
        def per_checkpoint_decoding() -> None:
            for _ in range(k):
                drain(model_batches(DecodedInputs(dataset, ids), args.batch))

        def shared_decoding() -> None:
            folder = preprocess_shard(dataset, ids, root / "shared", workers=args.workers)
            for _ in range(k):
                drain(model_batches(StoredInputs(folder, expected_ids=ids), args.batch))

        today = min(timed(per_checkpoint_decoding) for _ in range(args.repeats))
        shared = min(timed(shared_decoding) for _ in range(args.repeats))
        per = len(ids) * k
        print(f"\nnetwork excluded, per image per checkpoint (K = {k}): decode per checkpoint "
              f"{1000 * today / per:.1f} ms, decoded once per data set {1000 * shared / per:.1f} ms -> "
              f"{today / shared:.2f}x (target >= 2x)")

        # ---- network included: the extraction jobs themselves
        def today_extract() -> None:
            for i, model in enumerate(models):
                extract_shard(model, dataset, net_ids, root / "today" / f"c{i}", batch_size=args.batch,
                              dtype=FEATURES["dtype"], threads=args.threads,
                              precision=FEATURES["precision"])

        def shared_extract() -> None:
            folder = preprocess_shard(dataset, net_ids, root / "inputs", workers=args.workers)
            for i, model in enumerate(models):
                extract_inputs(model, StoredInputs(folder, expected_ids=net_ids), root / "features" / f"c{i}",
                               batch_size=args.batch, dtype=FEATURES["dtype"], threads=args.threads,
                               precision=FEATURES["precision"])

        with torch.inference_mode():
            models[0].last_keys(torch.zeros(1, 3, 480, 480))  # warm-up: first-call allocations off the clock
        t_today, t_shared = [], []
        for _ in range(args.repeats):
            t_today.append(timed(today_extract))
            t_shared.append(timed(shared_extract))
        per = len(net_ids) * k
        identical = all((root / "today" / f"c{i}" / f"{kind}.npy").read_bytes()
                        == (root / "features" / f"c{i}" / f"{kind}.npy").read_bytes()
                        for i in range(k) for kind in ("keys480", "tokens224"))
        print(f"network included, per image per checkpoint: decode per checkpoint {min(t_today) / per:.3f} s, "
              f"decoded once {min(t_shared) / per:.3f} s -> {min(t_today) / min(t_shared):.2f}x (target >= 1x, no "
              f"slower); features byte-identical: {identical}")

        # ---- disk
        n = len(net_ids)
        kept = folder_bytes(root / "features")
        dropped = folder_bytes(root / "features", ("meta.json", "image_ids.json"))
        inputs = folder_bytes(root / "inputs")
        print(f"\ndisk written, {k} checkpoints x {n} images: features kept {kept:,} B "
              f"({kept / (n * k):,.0f} B per image per checkpoint; float16 arrays {900 * 384 * 2 + 196 * 384 * 2:,} B), "
              f"dropped {dropped:,} B ({dropped / (n * k):,.0f} B per image per checkpoint: meta.json and "
              f"image_ids.json only); decoded inputs {inputs:,} B ({inputs / n:,.0f} B per image per data set, "
              f"{BYTES_PER_IMAGE:,} B of pixels), kept with the features, dropped with them")
        gb = 1e9
        print(f"60 checkpoints x 5,000 images: kept {60 * 5000 * kept / (n * k) / gb:.1f} GB + decoded inputs "
              f"{5000 * inputs / n / gb:.1f} GB; dropped {60 * 5000 * dropped / (n * k) / gb:.3f} GB")
        wall = time.perf_counter() - wall_start
        cpu = time.process_time() - cpu_start
        load_after = os.getloadavg()
        print(f"\nthis process: CPU {cpu:.0f} s over {wall:.0f} s wall (workers not counted); load average after "
              f"{load_after[0]:.2f} (1 min) {load_after[1]:.2f} (5 min)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
