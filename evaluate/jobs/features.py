"""Jobs of workflow/rules/features.smk: a shard's images decoded once, then keys480 and tokens224 of one shard."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def preprocess(smk: Any) -> None:
    """One shard's images decoded and resized once (both readings, uint8), in `threads` worker processes."""
    spec: dict = dict(smk.params.dataset)
    manifest_file = Path(smk.input.manifest)
    shard = str(smk.wildcards.shard)
    workers = int(smk.threads)
    record = Path(smk.output.record)

    from evaluate.readings.extraction import decode_shard_inputs

    decode_shard_inputs(spec=spec, manifest_file=manifest_file, shard=shard, workers=workers, out_record=record)


def extract(smk: Any) -> None:
    """keys480 and tokens224 of one shard (docs/design.md §3), from the shard's decoded inputs."""
    checkpoint: dict = dict(smk.params.checkpoint)
    checkpoint_file = Path(smk.input.checkpoint)
    spec: dict = dict(smk.params.dataset)
    manifest_file = Path(smk.input.manifest)
    inputs_record = Path(smk.input.inputs)
    shard = str(smk.wildcards.shard)
    features: dict = dict(smk.params.features)
    run_time = smk.params.run_time  # run-time: dropping features, workers or a new checkpoint re-run nothing
    keep, workers, checkpoints = bool(run_time.keep), int(run_time.workers), tuple(run_time.checkpoints)
    out_dir = Path(smk.output.meta).parent

    from evaluate.readings.extraction import extract_checkpoint_shard

    extract_checkpoint_shard(checkpoint=checkpoint, checkpoint_file=checkpoint_file, spec=spec,
                             manifest_file=manifest_file, shard=shard, inputs_record=inputs_record, out_dir=out_dir,
                             features=features, workers=workers, keep=keep, checkpoints=checkpoints)
