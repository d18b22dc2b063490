"""bfloat16 against float32 (`features.precision`): speed and agreement on real photos, per architecture.

    .venv/bin/python bench/precision.py [--images 8] [--architectures A ...] [--batch B] [--threads T]
                                        [--workers W] [--device D]

For each architecture's seeded checkpoint (`evaluate.demo.checkpoints.make_demo_checkpoint`, seed 0, read back by
`load_backbone`), the first --images val images and the first --images train images of
../shared/data/coco2017-mini are decoded once (`preprocess_shard`) and extracted by the product's own
`extract_inputs` in float32 and in bfloat16, one after the other in the same run. Every job setting (batch size,
threads, workers, feature dtype, device, the probe's and the bootstrap's settings) is the config schema's default
unless given here. Printed per architecture, then as one table:
- images/s of the network alone at 480 px (keys480) and 224 px (tokens224) in both precisions, and their ratio
  (each forward pass is timed inside the extraction; decoding and normalising run beside it in the prefetch thread);
- the relative error ||bf16 - fp32|| / ||fp32|| of keys480 and tokens224 as stored (features.dtype);
- the decoder's masks under one stated setting (the schema's `decoder.centre` and `decoder.masks`, the rest the
  contract's ncut setting: tau 0.2, eps 1e-5, split mean, seed foreground and component): the mean IoU of each
  image's bfloat16 mask against its float32 mask (at the image's own size) and the share of images whose mask is
  identical; the Jaccard and CorLoc of both (%), their difference in points, and float32's 95% interval half-width;
- the probe (trained on the train images' tokens224 of each precision, scored on the val images): mIoU of both,
  the difference in points, and float32's interval half-width.
Then the input path against the network (does preprocessing keep up with a 3-4x faster network?): per batch, the
time to read and normalise it from the decoded inputs (what the prefetch thread does) and the images/s of decoding
JPEGs with --workers processes (the fallback where the decoded inputs are gone), against the float32 network.

The train images' keys480 are not computed (the probe reads tokens224 alone); their rows are zeros. The seeded
checkpoints are random networks: their masks and probe scores mean nothing, but bfloat16 and float32 run the same
weights on the same photos, so their differences are what the precision does. bfloat16 is slow on a CPU without
bfloat16 matrix units (the log says so); --images keeps the run to minutes. The machine may be shared: the load
average before and after is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.machine import machine_line  # noqa: E402
from bench.shared_data import skip_unless  # noqa: E402
from bench.memory import pooled_subset  # noqa: E402
from bench.scale import COCO_MINI, FEATURES, add_job_options  # noqa: E402
from decoders import get_decoder  # noqa: E402
from decoders.shards import decode_keys  # noqa: E402
from evaluate.datasets.coco import CocoDataset  # noqa: E402
from evaluate.demo.checkpoints import make_demo_checkpoint  # noqa: E402
from evaluate.experiment import config_defaults  # noqa: E402
from evaluate.networks.checkpoints import load_backbone  # noqa: E402
from evaluate.networks.registry import ARCHITECTURES, SEED_ARCHITECTURES  # noqa: E402
from evaluate.readings.features import FeatureReader, extract_inputs  # noqa: E402
from evaluate.readings.runner import resolve_device  # noqa: E402
from evaluate.pixels.geometry import KEYS480_SIZE  # noqa: E402
from evaluate.readings.inputs import (  # noqa: E402
    DecodedInputs,
    StoredInputs,
    model_batches,
    preprocess_shard,
)

DECODER = config_defaults("decoder")
# The decoder's masks are compared under one setting, the contract's ncut setting (../shared/DESIGN.md): the schema
# holds a sweep grid, not a single setting, and the bench must not depend on a selection.
CONTRACT_SETTING = {"tau": 0.2, "eps": 1e-5, "split": "mean", "foreground": "seed", "component": "seed"}
PROBE, BOOTSTRAP = config_defaults("probe"), config_defaults("bootstrap")
PRECISIONS = ("float32", "bfloat16")
READINGS = {"keys480": "last_keys", "tokens224": "tokens"}


class TimedNetwork(torch.nn.Module):
    """The network with each reading's forward passes timed (seconds summed per reading). keys=False: keys480 is
    not computed (zeros), for images whose keys nothing reads."""

    def __init__(self, model: torch.nn.Module, keys: bool = True):
        super().__init__()
        self.model, self.keys = model, keys
        self.geometry, self.form = model.geometry, model.form  # what `extract_inputs` sizes the shard by
        self.seconds = dict.fromkeys(READINGS, 0.0)

    def _timed(self, reading: str, x: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        if reading == "keys480" and not self.keys:
            out = torch.zeros(x.shape[0], *self.geometry.kinds[reading])
        else:
            out = getattr(self.model, READINGS[reading])(x)
        if out.is_cuda:
            torch.cuda.synchronize(out.device)
        self.seconds[reading] += time.perf_counter() - start
        return out

    def last_keys(self, x: torch.Tensor) -> torch.Tensor:
        return self._timed("keys480", x)

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        return self._timed("tokens224", x)


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def image_masks(results: list[dict], image_ids: list[int], sizes: dict[int, tuple[int, int]]) -> dict[int, np.ndarray]:
    """Each image's decoded masks joined: bool (height, width), from COCO results (RLE)."""
    from pycocotools import mask as mask_utils

    masks = {i: np.zeros(sizes[i], dtype=bool) for i in image_ids}
    for result in results:
        masks[int(result["image_id"])] |= mask_utils.decode(result["segmentation"]).astype(bool)
    return masks


def mask_agreement(a: dict[int, np.ndarray], b: dict[int, np.ndarray]) -> tuple[float, float]:
    """(mean IoU of a's masks against b's, share of images whose masks are identical); two empty masks: IoU 1."""
    ious, same = [], []
    for image_id, mask in b.items():
        union = np.logical_or(a[image_id], mask).sum()
        ious.append(1.0 if union == 0 else float(np.logical_and(a[image_id], mask).sum() / union))
        same.append(bool(np.array_equal(a[image_id], mask)))
    return float(np.mean(ious)), float(np.mean(same))


def probe_miou(train: CocoDataset, train_annotations: Path, train_dir: Path, val: CocoDataset,
               val_annotations: Path, val_dir: Path) -> dict:
    """Train the probe on one precision's train tokens224, score it on that precision's val tokens224 (the jobs'
    own functions, the schema's probe and bootstrap settings): the probe_miou measure."""
    from evaluate.probe.labels import class_index, dataset_patch_labels, probe_classes
    from evaluate.probe.linear import fit_probe, training_tokens
    from evaluate.probe.scores import eval_items, probe_measures

    classes = probe_classes(train.categories, str(train_annotations))
    reader = FeatureReader([train_dir], kinds=("tokens224",))
    index = class_index(classes, train.categories, str(train_annotations))
    labels = dataset_patch_labels(train, reader.image_ids, index, reader.geometry.patch)
    features, targets = training_tokens(reader, labels, max_tokens=int(PROBE["max_tokens"]),
                                        seed=int(BOOTSTRAP["seed"]))
    probe = fit_probe(features, targets, len(classes) + 1, weight_decay=float(PROBE["weight_decay"]),
                      max_iter=int(PROBE["max_iter"]), tol=float(PROBE["tol"]))
    scored = FeatureReader([val_dir], kinds=("tokens224",))
    items = eval_items(scored, val, class_index(classes, val.categories, str(val_annotations)))
    return probe_measures(probe, items, resamples=int(BOOTSTRAP["resamples"]), seed=int(BOOTSTRAP["seed"]))[0]


def half_width(measure: dict) -> float:
    return (measure["ci_high"] - measure["ci_low"]) / 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8, help="val images, and train images for the probe (8)")
    parser.add_argument("--architectures", nargs="+", default=list(reversed(SEED_ARCHITECTURES)),
                        choices=ARCHITECTURES, metavar="A",
                        help=f"which seeded checkpoints, of {', '.join(ARCHITECTURES)} (default: the seed's four; "
                        f"the DINO family of docs/design.md §14 only when named, ViT-L among it)")
    add_job_options(parser, "--batch", "--threads", "--workers")
    parser.add_argument("--device", default=FEATURES["device"], help=f"features.device ({FEATURES['device']})")
    args = parser.parse_args(argv)
    skip_unless(COCO_MINI / "annotations.json", "bench/precision.py")
    root = Path(tempfile.mkdtemp(prefix="bench-precision-"))
    try:
        measure(args, root)
    finally:  # a crash or Ctrl-C leaves no checkpoints behind in the temporary folder
        shutil.rmtree(root, ignore_errors=True)
    return 0


def measure(args: argparse.Namespace, root: Path) -> None:
    """Every measurement of the bench, printed as it goes; `root` holds its scratch files."""
    from evaluate.scores.measures import decoder_measures

    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    decoder = get_decoder(DECODER["name"])
    setting = decoder.Settings(centre=bool(DECODER["centre"]), masks=int(DECODER["masks"]), **CONTRACT_SETTING)
    splits = {}
    for split, name in (("val", "annotations.json"), ("train", "annotations_train.json")):
        full = json.loads((COCO_MINI / name).read_text())
        ids = sorted(image["id"] for image in full["images"])[: args.images]
        annotations = pooled_subset(root, split, ids, full)
        dataset = CocoDataset(COCO_MINI / "images", annotations)
        splits[split] = (dataset, annotations, ids)
    val, val_annotations, val_ids = splits["val"]
    sizes = {i: val.image_size(i) for i in val_ids}
    load_before = os.getloadavg()
    print(machine_line())
    print(f"{len(val_ids)} val + {len(splits['train'][2])} train coco2017-mini photos; device {device}, batch "
          f"{args.batch}, {args.workers} decoding workers, features stored as "
          f"{FEATURES['dtype']}; decoder setting {setting.name}; load average before {load_before[0]:.1f}")
    started_cpu, started_wall = time.process_time(), time.perf_counter()

    # ---- the input path: decoding, then reading and normalising per batch
    decode_s = {}
    inputs = {}
    for split, (dataset, _, ids) in splits.items():
        start = time.perf_counter()
        inputs[split] = preprocess_shard(dataset, ids, root / "inputs" / split, workers=args.workers)
        decode_s[split] = (time.perf_counter() - start) / len(ids)
    read_s = []  # per image: read from the decoded inputs and normalise, as the prefetch thread does
    for _ in range(2):
        start = time.perf_counter()
        for _ in model_batches(StoredInputs(inputs["val"]), args.batch, pin_memory=False):
            pass
        read_s.append((time.perf_counter() - start) / len(val_ids))

    rows = []
    for architecture in args.architectures:
        checkpoint = make_demo_checkpoint(root / f"{architecture}.pth", "dino-backbone", seed=0,
                                          architecture=architecture)
        model = load_backbone(checkpoint, which="teacher", form="backbone").model
        side = model.geometry.keys480_side

        def source(split: str, side: int = side):
            """The decoded inputs at 480 px, or (patch 14: 476 px) the network's own, decoded as extract does."""
            if side == KEYS480_SIZE:
                return StoredInputs(inputs[split])
            dataset, _, ids = splits[split]
            return DecodedInputs(dataset, ids, workers=args.workers, keys480_side=side)

        out, rates = {}, {}
        for precision in PRECISIONS:
            timed = TimedNetwork(model)
            out[precision] = extract_inputs(timed, source("val"), root / architecture / precision / "val",
                                            batch_size=args.batch, dtype=FEATURES["dtype"], device=device,
                                            threads=args.threads, precision=precision)
            rates[precision] = {r: len(val_ids) / s for r, s in timed.seconds.items()}
            extract_inputs(TimedNetwork(model, keys=False), source("train"),
                           root / architecture / precision / "train", batch_size=args.batch,
                           dtype=FEATURES["dtype"], device=device, threads=args.threads, precision=precision)
        row = {"architecture": architecture}
        for reading in READINGS:
            arrays = {p: np.load(out[p] / f"{reading}.npy") for p in PRECISIONS}
            row[f"{reading} error"] = relative_error(arrays["bfloat16"], arrays["float32"])
            row[f"{reading} fp32"], row[f"{reading} bf16"] = (rates[p][reading] for p in PRECISIONS)
        masks, measures = {}, {}
        for precision in PRECISIONS:
            ids, keys = val_ids, np.load(out[precision] / "keys480.npy", mmap_mode="r")
            results = decode_keys(decoder, setting, ids, keys, sizes)
            masks[precision] = image_masks(results, ids, sizes)
            scored = decoder_measures(val, results, resamples=int(BOOTSTRAP["resamples"]), seed=int(BOOTSTRAP["seed"]))
            measures[precision] = {m["measure"]: m for m in scored}
            measures[precision]["probe_miou"] = probe_miou(*splits["train"][:2], root / architecture / precision /
                                                           "train", val, val_annotations, out[precision])
        row["mask iou"], row["masks identical"] = mask_agreement(masks["bfloat16"], masks["float32"])
        for name in ("jaccard", "corloc", "probe_miou"):
            fp32, bf16 = measures["float32"][name], measures["bfloat16"][name]
            row[name] = (fp32["value"], bf16["value"], bf16["value"] - fp32["value"], half_width(fp32))
        rows.append(row)
        print(f"\n{architecture}:")
        for reading in READINGS:
            print(f"  {reading}: float32 {row[f'{reading} fp32']:.2f} img/s, bfloat16 {row[f'{reading} bf16']:.2f} "
                  f"img/s -> {row[f'{reading} bf16'] / row[f'{reading} fp32']:.2f}x; relative error "
                  f"{row[f'{reading} error']:.2e}")
        print(f"  masks: mean IoU bf16 vs fp32 {row['mask iou']:.4f}, identical on "
              f"{100 * row['masks identical']:.0f}% of {len(val_ids)} images")
        for name in ("jaccard", "corloc", "probe_miou"):
            fp32, bf16, diff, hw = row[name]
            print(f"  {name}: float32 {fp32:.2f}, bfloat16 {bf16:.2f}, difference {diff:+.2f} points "
                  f"(float32's 95% interval +-{hw:.2f})")

    print("\n| architecture | keys480 img/s fp32 / bf16 (ratio) | tokens224 img/s fp32 / bf16 (ratio) | rel. error "
          "keys480 / tokens224 | mask IoU | masks identical | Jaccard diff | CorLoc diff | probe mIoU diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        speed = [f"{row[f'{r} fp32']:.2f} / {row[f'{r} bf16']:.2f} ({row[f'{r} bf16'] / row[f'{r} fp32']:.2f}x)"
                 for r in READINGS]
        diffs = [f"{row[n][2]:+.2f} (+-{row[n][3]:.1f})" for n in ("jaccard", "corloc", "probe_miou")]
        print(f"| {row['architecture']} | {speed[0]} | {speed[1]} | {row['keys480 error']:.1e} / "
              f"{row['tokens224 error']:.1e} | {row['mask iou']:.3f} | {100 * row['masks identical']:.0f}% | "
              f"{' | '.join(diffs)} |")
    print("(differences in points, bfloat16 - float32; in brackets float32's 95% bootstrap half-width)")

    network_s = statistics.median(1 / row["keys480 fp32"] + 1 / row["tokens224 fp32"] for row in rows)
    print(f"\ninput path, per image: read + normalise both readings {1000 * min(read_s):.1f} ms (the prefetch "
          f"thread's work) against the float32 network's {1000 * network_s:.0f} ms (median architecture): it keeps "
          f"up with a network {network_s / min(read_s):.0f}x faster than float32 here; decoding the JPEGs (the "
          f"preprocess job, or extract's fallback) with {args.workers} workers {1 / decode_s['val']:.1f} img/s "
          f"against the float32 network's {1 / network_s:.2f} img/s: it keeps up with a network "
          f"{network_s / decode_s['val']:.0f}x faster")
    wall, cpu = time.perf_counter() - started_wall, time.process_time() - started_cpu
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s ({cpu / wall:.2f} of {args.threads} threads busy); load average "
          f"after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
