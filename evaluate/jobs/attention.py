"""Jobs of workflow/rules/attention.smk: the label-free attention reading (docs/design.md §13), per shard, then one
record per checkpoint and data set, and one image's rows for the per-patch figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def attention_shard(smk: Any) -> None:
    """The per-image attention entropy and spread of one checkpoint on one shard, from its decoded 224-px inputs."""
    checkpoint: dict = dict(smk.params.checkpoint)
    spec: dict = dict(smk.params.dataset)
    features: dict = dict(smk.params.features)
    workers = int(smk.params.run_time.workers)  # run-time: changing features.workers re-runs nothing

    from evaluate.attention.shards import read_attention_shard

    read_attention_shard(checkpoint=checkpoint, checkpoint_file=Path(smk.input.checkpoint), spec=spec,
                         manifest_file=Path(smk.input.manifest), shard=str(smk.wildcards.shard),
                         inputs_record=Path(smk.input.inputs), out=Path(smk.output.shard), features=features,
                         workers=workers)


def attention_record(smk: Any) -> None:
    """The label-free `attention` record of one checkpoint on one data set: no labels, no openings row."""
    shard_files = [Path(p) for p in smk.input.shards]
    checkpoint: dict = smk.params.checkpoint
    dataset: str = smk.wildcards.dataset
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    config_hash: str = smk.params.run_time.config_hash
    out_record = Path(smk.output.record)

    from evaluate.attention.shards import write_attention_record

    write_attention_record(checkpoint=checkpoint["name"], run=checkpoint["run"], epoch=checkpoint["epoch"],
                           dataset=dataset, shard_files=shard_files, resamples=resamples, seed=seed,
                           config_hash=config_hash, out_record=out_record)


def attention_rows(smk: Any) -> None:
    """One image's last-block attention rows of the query patch `figures.attention_patch`, per head."""
    checkpoint: dict = dict(smk.params.checkpoint)
    spec: dict = dict(smk.params.dataset)
    features: dict = dict(smk.params.features)
    image_id = smk.params.image
    patch = smk.params.patch  # None: the centre patch of each network's own grid

    from evaluate.attention.shards import write_attention_rows

    write_attention_rows(checkpoint=checkpoint, checkpoint_file=Path(smk.input.checkpoint), spec=spec,
                         manifest_file=Path(smk.input.manifest), image_id=None if image_id is None else int(image_id),
                         patch=None if patch is None else int(patch), out=Path(smk.output.rows), features=features)
