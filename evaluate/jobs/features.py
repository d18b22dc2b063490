"""Jobs of workflow/rules/features.smk: a data set's manifest, then keys480 and tokens224 of one shard."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("evaluate.jobs.features")


def manifest(smk: Any) -> None:
    """Validate a data set (annotations and image files) and write its manifest: sorted ids cut into shards."""
    name: str = smk.params.dataset["name"]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    roles: list[str] = list(smk.config["datasets"][name]["roles"])
    shard_size = int(smk.params.shard_size)
    out = Path(smk.output.manifest)

    from evaluate.atomic import write_json
    from evaluate.datasets import CocoDataset, dataset_manifest

    manifest = dataset_manifest(CocoDataset(images, annotations), name, roles, shard_size)
    write_json(out, manifest)
    log.info("%s: %d images in %d shards", name, len(manifest["image_ids"]), len(manifest["shards"]))


def extract(smk: Any) -> None:
    """keys480 and tokens224 of one shard (docs/design.md §3)."""
    checkpoint_name: str = smk.wildcards.checkpoint
    checkpoint_file = Path(smk.input.checkpoint)
    manifest_file = Path(smk.input.manifest)
    shard = str(smk.wildcards.shard)
    dataset_name: str = smk.params.dataset["name"]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    which: str = smk.params.which
    features: dict = smk.params.features
    threads = int(smk.threads)
    out_dir = Path(smk.output.meta).parent

    from evaluate.atomic import read_json
    from evaluate.checkpoints import load_backbone
    from evaluate.datasets import CocoDataset
    from evaluate.features import extract_shard, resolve_device, shard_image_ids

    manifest = read_json(manifest_file)
    image_ids = shard_image_ids(manifest, shard, manifest_file)
    loaded = load_backbone(checkpoint_file, which=which)
    device = resolve_device(features["device"])
    autocast = bool(features["autocast"]) and device.startswith("cuda")
    meta = {
        "checkpoint": checkpoint_name,
        "checkpoint_path": str(checkpoint_file),
        "checkpoint_sha256": loaded.sha256,
        "checkpoint_format": loaded.format,
        "which": which,
        "dataset": dataset_name,
        "manifest_sha256": manifest["manifest_sha256"],
        "shard": shard,
        "device": device,
        "autocast": autocast,
    }
    extract_shard(
        loaded.model, CocoDataset(images, annotations), image_ids, out_dir, batch_size=int(features["batch_size"]),
        dtype=features["dtype"], device=device, threads=threads, meta=meta, autocast=autocast,
    )
