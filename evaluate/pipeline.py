"""The workflow's jobs, one function per rule, each taking Snakemake's `snakemake` object.

Each `*_job(smk)` only unpacks the rule's input, output, params and wildcards and calls the package's tested
functions; nothing here decides a number. The rule files in `workflow/rules/` say which job runs when.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("evaluate.pipeline")


# ----------------------------------------------------------------------------------------------- shared helpers


def resolve_device(device: str) -> str:
    """`auto` -> "cuda" when a CUDA device is present, else "cpu"; anything else as given (checked)."""
    import torch

    from evaluate.experiment import ConfigError

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"config.yaml: features.device is {device!r} but no CUDA device is available here")
    return device


def open_dataset(params: dict):
    """The `CocoDataset` named by a rule's `dataset` params (images folder + annotation JSON)."""
    from evaluate.datasets import CocoDataset

    return CocoDataset(params["images"], params["annotations"])


def read_json(path: str | Path) -> Any:
    with open(path) as handle:
        return json.load(handle)


def manifest_sizes(manifest: dict) -> dict[int, tuple[int, int]]:
    """image id -> (height, width) from a manifest."""
    return {int(i): (int(h), int(w)) for i, (h, w) in zip(manifest["image_ids"], manifest["sizes"])}


def bootstrap_params(params: dict) -> dict:
    b = params or {}
    return {"resamples": int(b.get("resamples", 10000)), "seed": int(b.get("seed", 0))}


# -------------------------------------------------------------------------------------------------------- demo


def demo_dataset_job(smk) -> None:
    from evaluate.demo import make_demo_dataset

    demo = smk.params.demo
    out = Path(smk.output.annotations).parent
    make_demo_dataset(out, n_images=int(demo["n_images"]), seed=int(demo["seed"]),
                      first_image_id=int(demo.get("first_image_id", 1)))


def demo_checkpoint_job(smk) -> None:
    from evaluate.demo import make_demo_checkpoint

    demo = smk.params.demo
    make_demo_checkpoint(smk.output[0], fmt=demo["format"], seed=int(demo["seed"]))


# ---------------------------------------------------------------------------------------------------- features


def manifest_job(smk) -> None:
    """Validate a data set (annotations and image files) and write its manifest: sorted ids cut into shards."""
    from evaluate.atomic import write_json

    dataset = open_dataset(smk.params.dataset)
    dataset.validate_files()
    manifest = dataset.manifest(int(smk.params.shard_size))
    manifest["dataset"] = smk.params.dataset["name"]
    write_json(smk.output.manifest, manifest)
    log.info("%s: %d images in %d shards", smk.params.dataset["name"], len(manifest["image_ids"]),
             len(manifest["shards"]))


def extract_job(smk) -> None:
    """keys480 and tokens224 of one shard (DESIGN §3)."""
    from evaluate.checkpoints import load_backbone
    from evaluate.features import extract_shard

    manifest = read_json(smk.input.manifest)
    shard = int(smk.wildcards.shard)
    if shard >= len(manifest["shards"]):
        from evaluate.features import FeatureError

        raise FeatureError(f"{smk.input.manifest}: shard {shard:03d} does not exist (the manifest has "
                           f"{len(manifest['shards'])} shards); re-run the workflow so the shard list is re-read")
    image_ids = manifest["shards"][shard]
    ckpt = smk.params.checkpoint
    loaded = load_backbone(smk.input.checkpoint, which=ckpt.get("which", "teacher"))
    dataset = open_dataset(smk.params.dataset)
    device = resolve_device(smk.params.device)
    meta = {
        "checkpoint": ckpt["name"],
        "checkpoint_path": str(smk.input.checkpoint),
        "checkpoint_sha256": loaded.sha256,
        "checkpoint_format": loaded.format,
        "which": ckpt.get("which", "teacher"),
        "dataset": smk.params.dataset["name"],
        "manifest_sha256": manifest["manifest_sha256"],
        "shard": smk.wildcards.shard,
        "device": device,
        "autocast": bool(smk.params.autocast) and device.startswith("cuda"),
    }
    extract_shard(
        loaded.model, dataset, image_ids, Path(smk.output.meta).parent,
        batch_size=int(smk.params.batch_size), dtype=smk.params.dtype, device=device, threads=int(smk.threads),
        meta=meta, autocast=meta["autocast"],
    )
