"""Jobs of workflow/rules/segmentation.smk: a checkpoint's class-token attention of a shard, its attention masks
scored on the record."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_cls_attention(smk: Any) -> None:
    """The class-token attention of one shard by one checkpoint (the released form, float32)."""
    checkpoint: dict = dict(smk.params.checkpoint)
    spec: dict = dict(smk.params.dataset)
    features: dict = dict(smk.params.features)

    from evaluate.attention.mask_protocol import read_shard

    read_shard(checkpoint=checkpoint, checkpoint_file=Path(smk.input.checkpoint), spec=spec,
               manifest_file=Path(smk.input.manifest), shard=str(smk.wildcards.shard), out=Path(smk.output.reading),
               out_meta=Path(smk.output.meta), features=features)


def score_attention_masks(smk: Any) -> None:
    """The attention-mask measures of one checkpoint on one segmentation set -> one ledger record."""
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    readings = [Path(p) for p in smk.input.readings]
    metas = [Path(p) for p in smk.input.metas]

    from evaluate.attention.mask_protocol import score_masks
    from evaluate.ledger.scoring import Scoring

    scoring = Scoring.of(smk.params.checkpoint, str(smk.wildcards.dataset), metas[0], smk.params.run_time)
    score_masks(scoring, spec=dict(smk.params.dataset), manifest_file=Path(smk.input.manifest),
                reading_files=readings, meta_files=metas, resamples=resamples, seed=seed, code=str(smk.params.code),
                out_record=Path(smk.output.record))
