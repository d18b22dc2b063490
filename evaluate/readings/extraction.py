"""The features stage's shard jobs (docs/design.md §3, §10): a shard's images decoded once for every checkpoint
(preprocess), then one checkpoint's keys480 and tokens224 of the shard (extract) through the one runner
(`evaluate.readings.runner`), which writes the shard's meta.json; the entries of the preprocess and extract jobs.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

log = logging.getLogger("evaluate.readings.extraction")


def decode_shard_inputs(*, spec: dict, manifest_file: str | os.PathLike, shard: str, workers: int,
                        out_record: str | os.PathLike) -> Path:
    """Decode and resize the shard's images once (both readings, uint8) in `workers` processes into the inputs
    folder beside `out_record` (its name without `.json`), then write the record that they were made: the folder,
    the image ids and the manifest's sha256. Returns the folder. spec: the data set's (`DataSet.spec`)."""
    from evaluate.datasets import open_dataset
    from evaluate.datasets.manifest import shard_image_ids
    from evaluate.plumbing.atomic import read_json, write_json
    from evaluate.readings.inputs import preprocess_shard

    manifest = read_json(manifest_file)
    image_ids = shard_image_ids(manifest, shard, manifest_file)
    folder = preprocess_shard(open_dataset(spec), image_ids, Path(out_record).with_suffix(""), workers=workers)
    write_json(out_record, {"inputs": str(folder), "image_ids": image_ids,
                            "manifest_sha256": manifest["manifest_sha256"]})
    return folder


def extract_checkpoint_shard(*, checkpoint: dict, checkpoint_file: str | os.PathLike, spec: dict,
                             manifest_file: str | os.PathLike, shard: str, inputs_record: str | os.PathLike,
                             out_dir: str | os.PathLike, features: dict, workers: int, keep: bool,
                             checkpoints: Sequence[str]) -> Path:
    """keys480 and tokens224 of one checkpoint on one shard, into `out_dir` (returned), from the shard's decoded
    inputs (the folder beside `inputs_record`), or from its images where that folder is gone (decoded here in
    `workers` processes: the same bytes).

    checkpoint: its params (`Checkpoint.params`); spec: the data set's; features: the config's `features` (form,
    batch_size, dtype, device, precision). Unless `keep`, the inputs folder is dropped once every checkpoint of the
    run (`checkpoints`) has the shard's features.
    """
    from evaluate.plumbing import paths
    from evaluate.readings.features import KEYS_TOKENS, META, write_features
    from evaluate.readings.inputs import DecodedInputs, StoredInputs, drop_if_all_extracted, open_shard_inputs
    from evaluate.readings.runner import Shard, run_reading

    inputs_folder = Path(inputs_record).with_suffix("")
    out_dir = Path(out_dir)

    def body(run: Shard) -> dict:
        inputs = open_shard_inputs(inputs_folder, run.units, annotations_sha256=run.manifest["annotations_sha256"],
                                   open_dataset=lambda: run.dataset, workers=workers)
        if isinstance(inputs, StoredInputs):
            log.info("inputs decoded once, read from %s", inputs_folder)
        else:
            log.info("%s is gone (features.keep false drops it): decoding the images here", inputs_folder)
        side = run.model.geometry.keys480_side
        if isinstance(inputs, StoredInputs) and side != inputs.keys480_side:
            log.info("the stored inputs are %d px, this network reads keys480 at %d px: decoding the images here",
                     inputs.keys480_side, side)
            inputs = DecodedInputs(run.dataset, run.units, where=out_dir, workers=workers, keys480_side=side)
        return write_features(run.model, inputs, out_dir, batch_size=int(features["batch_size"]),
                              dtype=str(features["dtype"]), device=run.device, precision=run.precision)

    run_reading(KEYS_TOKENS, body, checkpoint=checkpoint, checkpoint_file=checkpoint_file, spec=spec,
                manifest_file=manifest_file, shard=shard, meta_out=out_dir / META, features=features)
    if not keep:  # the decoded inputs go too, once every checkpoint of the run has this shard's features
        siblings = [paths.FEATURES_META.format(checkpoint=c, dataset=spec["name"], shard=shard) for c in checkpoints]
        freed = drop_if_all_extracted(inputs_folder, siblings)
        if freed is not None:
            log.info("every checkpoint has this shard: %d bytes of decoded inputs freed", freed)
    return out_dir
