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

    from evaluate.plumbing.atomic import write_json
    from evaluate.datasets.coco import CocoDataset, dataset_manifest

    manifest = dataset_manifest(CocoDataset(images, annotations), name, roles, shard_size)
    write_json(out, manifest)
    log.info("%s: %d images in %d shards", name, len(manifest["image_ids"]), len(manifest["shards"]))


def preprocess(smk: Any) -> None:
    """One shard's images decoded and resized once (both readings, uint8), in `threads` worker processes."""
    manifest_file = Path(smk.input.manifest)
    shard = str(smk.wildcards.shard)
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    workers = int(smk.threads)
    record = Path(smk.output.record)

    from evaluate.plumbing.atomic import read_json, write_json
    from evaluate.datasets.coco import CocoDataset
    from evaluate.readings.features import shard_image_ids
    from evaluate.readings.inputs import preprocess_shard

    manifest = read_json(manifest_file)
    image_ids = shard_image_ids(manifest, shard, manifest_file)
    folder = preprocess_shard(CocoDataset(images, annotations), image_ids, record.with_suffix(""), workers=workers)
    write_json(record, {"inputs": str(folder), "image_ids": image_ids, "manifest_sha256": manifest["manifest_sha256"]})


def extract(smk: Any) -> None:
    """keys480 and tokens224 of one shard (docs/design.md §3), from the shard's decoded inputs."""
    checkpoint_name: str = smk.wildcards.checkpoint
    checkpoint_file = Path(smk.input.checkpoint)
    manifest_file = Path(smk.input.manifest)
    inputs_folder = Path(smk.input.inputs).with_suffix("")
    shard = str(smk.wildcards.shard)
    dataset_name: str = smk.params.dataset["name"]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    which: str = smk.params.which
    features: dict = smk.params.features
    keep, workers = bool(smk.config["features"]["keep"]), int(smk.config["features"]["workers"])  # run-time only
    config: dict = smk.config
    threads = int(smk.threads)
    out_dir = Path(smk.output.meta).parent

    from evaluate.plumbing import paths
    from evaluate.plumbing.atomic import read_json
    from evaluate.networks.checkpoints import load_backbone
    from evaluate.plumbing.config import checkpoint_table
    from evaluate.datasets.coco import CocoDataset
    from evaluate.readings.features import extract_inputs, resolve_device, shard_image_ids
    from evaluate.readings.inputs import StoredInputs, drop_if_all_extracted, open_shard_inputs

    manifest = read_json(manifest_file)
    image_ids = shard_image_ids(manifest, shard, manifest_file)
    inputs = open_shard_inputs(inputs_folder, image_ids, annotations_sha256=manifest["annotations_sha256"],
                               open_dataset=lambda: CocoDataset(images, annotations), workers=workers)
    if isinstance(inputs, StoredInputs):
        log.info("inputs decoded once, read from %s", inputs_folder)
    else:
        log.info("%s is gone (features.keep false drops it): decoding the images here", inputs_folder)
    loaded = load_backbone(checkpoint_file, which=which)
    device = resolve_device(features["device"])
    meta = {
        "checkpoint": checkpoint_name,
        "checkpoint_path": str(checkpoint_file),
        "checkpoint_sha256": loaded.sha256,
        "checkpoint_format": loaded.format,
        **loaded.architecture_meta(),  # architecture, architecture_variant, head_layout (docs/design.md §9)
        "which": which,
        "dataset": dataset_name,
        "manifest_sha256": manifest["manifest_sha256"],
        "shard": shard,
        "device": device,
    }
    extract_inputs(loaded.model, inputs, out_dir, batch_size=int(features["batch_size"]), dtype=features["dtype"],
                   device=device, threads=threads, precision=features["precision"], meta=meta)
    if not keep:  # the decoded inputs go too, once every checkpoint of the run has this shard's features
        siblings = [paths.FEATURES_META.format(checkpoint=c, dataset=dataset_name, shard=shard)
                    for c in checkpoint_table(config)]
        freed = drop_if_all_extracted(inputs_folder, siblings)
        if freed is not None:
            log.info("every checkpoint has this shard: %d bytes of decoded inputs freed", freed)
