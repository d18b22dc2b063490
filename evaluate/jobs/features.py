"""Jobs of workflow/rules/features.smk: a data set's manifest, then keys480 and tokens224 of one shard."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def manifest(smk: Any) -> None:
    """Validate a data set (annotations and image files) and write its manifest: sorted ids cut into shards."""
    name: str = smk.params.dataset["name"]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    roles: tuple[str, ...] = smk.params.run_time.roles  # run-time: giving a data set a role re-runs nothing
    shard_size = int(smk.params.shard_size)
    out = Path(smk.output.manifest)

    from evaluate.datasets.coco import write_manifest

    write_manifest(images=images, annotations=annotations, name=name, roles=roles, shard_size=shard_size, out=out)


def preprocess(smk: Any) -> None:
    """One shard's images decoded and resized once (both readings, uint8), in `threads` worker processes."""
    manifest_file = Path(smk.input.manifest)
    shard = str(smk.wildcards.shard)
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    workers = int(smk.threads)
    record = Path(smk.output.record)

    from evaluate.readings.extraction import decode_shard_inputs

    decode_shard_inputs(manifest_file=manifest_file, shard=shard, images=images, annotations=annotations,
                        workers=workers, out_record=record)


def extract(smk: Any) -> None:
    """keys480 and tokens224 of one shard (docs/design.md §3), from the shard's decoded inputs."""
    checkpoint: str = smk.wildcards.checkpoint
    checkpoint_file = Path(smk.input.checkpoint)
    manifest_file = Path(smk.input.manifest)
    inputs_record = Path(smk.input.inputs)
    shard = str(smk.wildcards.shard)
    dataset: str = smk.params.dataset["name"]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    which: str = smk.params.which
    position_rule: str | None = smk.params.position_rule  # None: the architecture's default
    features: dict = smk.params.features
    run_time = smk.params.run_time  # run-time: dropping features, workers or a new checkpoint re-run nothing
    keep, workers, checkpoints = bool(run_time.keep), int(run_time.workers), tuple(run_time.checkpoints)
    threads = int(smk.threads)
    out_dir = Path(smk.output.meta).parent

    from evaluate.readings.extraction import extract_checkpoint_shard

    extract_checkpoint_shard(
        checkpoint=checkpoint, checkpoint_file=checkpoint_file, which=which, form=str(features["form"]),
        position_rule=position_rule, dataset=dataset, images=images,
        annotations=annotations, manifest_file=manifest_file, shard=shard, inputs_record=inputs_record,
        out_dir=out_dir, batch_size=int(features["batch_size"]), dtype=str(features["dtype"]),
        device=str(features["device"]), precision=str(features["precision"]), threads=threads, workers=workers,
        keep=keep, checkpoints=checkpoints,
    )
