"""The features stage's shard jobs (docs/design.md §3, §10): a shard's images decoded once for every checkpoint
(preprocess), then one checkpoint's keys480 and tokens224 of the shard (extract), with the provenance `meta.json`
records; the entries of the preprocess and extract jobs.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

log = logging.getLogger("evaluate.readings.extraction")


def decode_shard_inputs(*, manifest_file: str | os.PathLike, shard: str, images: str, annotations: str,
                        workers: int, out_record: str | os.PathLike) -> Path:
    """Decode and resize the shard's images once (both readings, uint8) in `workers` processes into the inputs
    folder beside `out_record` (its name without `.json`), then write the record that they were made: the folder,
    the image ids and the manifest's sha256. Returns the folder."""
    from evaluate.datasets.coco import CocoDataset
    from evaluate.plumbing.atomic import read_json, write_json
    from evaluate.readings.features import shard_image_ids
    from evaluate.readings.inputs import preprocess_shard

    manifest = read_json(manifest_file)
    image_ids = shard_image_ids(manifest, shard, manifest_file)
    folder = preprocess_shard(CocoDataset(images, annotations), image_ids, Path(out_record).with_suffix(""),
                              workers=workers)
    write_json(out_record, {"inputs": str(folder), "image_ids": image_ids,
                            "manifest_sha256": manifest["manifest_sha256"]})
    return folder


def extract_checkpoint_shard(*, checkpoint: str, checkpoint_file: str | os.PathLike, which: str, form: str,
                             position_rule: str | None, dataset: str,
                             images: str, annotations: str, manifest_file: str | os.PathLike, shard: str,
                             inputs_record: str | os.PathLike, out_dir: str | os.PathLike, batch_size: int,
                             dtype: str, device: str, precision: str, threads: int, workers: int, keep: bool,
                             checkpoints: Sequence[str]) -> Path:
    """keys480 and tokens224 of one checkpoint on one shard, into `out_dir` (returned), from the shard's decoded
    inputs (the folder beside `inputs_record`), or from its images where that folder is gone (decoded here in
    `workers` processes: the same bytes).

    checkpoint, checkpoint_file, which: the checkpoint's name, file and network (`teacher`/`student`); form,
    position_rule: how the network runs (`evaluate.networks.checkpoints.load_backbone`); dataset,
    images, annotations: the data set; batch_size, dtype, device (`auto`: CUDA where present), precision (the
    network's arithmetic), threads: the config's `features`. Unless `keep`, the inputs folder is dropped once every checkpoint of
    the run (`checkpoints`) has the shard's features.
    """
    from evaluate.datasets.coco import CocoDataset
    from evaluate.networks.checkpoints import load_backbone
    from evaluate.plumbing import paths
    from evaluate.plumbing.atomic import read_json
    from evaluate.readings.features import extract_inputs, resolve_device, shard_image_ids
    from evaluate.readings.inputs import DecodedInputs, StoredInputs, drop_if_all_extracted, open_shard_inputs

    inputs_folder = Path(inputs_record).with_suffix("")
    manifest = read_json(manifest_file)
    image_ids = shard_image_ids(manifest, shard, manifest_file)
    inputs = open_shard_inputs(inputs_folder, image_ids, annotations_sha256=manifest["annotations_sha256"],
                               open_dataset=lambda: CocoDataset(images, annotations), workers=workers)
    if isinstance(inputs, StoredInputs):
        log.info("inputs decoded once, read from %s", inputs_folder)
    else:
        log.info("%s is gone (features.keep false drops it): decoding the images here", inputs_folder)
    loaded = load_backbone(checkpoint_file, which=which, form=form, position_rule=position_rule)
    side = loaded.model.geometry.keys480_side
    if isinstance(inputs, StoredInputs) and side != inputs.keys480_side:
        log.info("the stored inputs are %d px, this network reads keys480 at %d px: decoding the images here",
                 inputs.keys480_side, side)
        inputs = DecodedInputs(CocoDataset(images, annotations), image_ids, where=out_dir, workers=workers,
                               keys480_side=side)
    device = resolve_device(device)
    meta = {
        "checkpoint": checkpoint,
        **loaded.file_meta(),  # path, sha256, format, architecture fields (docs/design.md §9), which network
        "dataset": dataset,
        "manifest_sha256": manifest["manifest_sha256"],
        "shard": shard,
        "device": device,
    }
    out = extract_inputs(loaded.model, inputs, out_dir, batch_size=batch_size, dtype=dtype, device=device,
                         threads=threads, precision=precision, meta=meta)
    if not keep:  # the decoded inputs go too, once every checkpoint of the run has this shard's features
        siblings = [paths.FEATURES_META.format(checkpoint=c, dataset=dataset, shard=shard) for c in checkpoints]
        freed = drop_if_all_extracted(inputs_folder, siblings)
        if freed is not None:
            log.info("every checkpoint has this shard: %d bytes of decoded inputs freed", freed)
    return out
