"""Jobs of workflow/rules/saliency.smk: a checkpoint's reading of a shard of a saliency set, its scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_saliency(smk: Any) -> None:
    """TokenCut's reading of one shard by one checkpoint, with the solver where the set asks for it."""
    checkpoint: dict = dict(smk.params.checkpoint)
    spec: dict = dict(smk.params.dataset)

    from evaluate.saliency.protocol import read_shard

    read_shard(checkpoint=checkpoint, checkpoint_file=Path(smk.input.checkpoint), spec=spec,
               manifest_file=Path(smk.input.manifest), shard=str(smk.wildcards.shard),
               out_reading=Path(smk.output.reading), out_meta=Path(smk.output.meta), features={})


def score_saliency(smk: Any) -> None:
    """The saliency measures of one checkpoint on one set -> one ledger record."""
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    readings = [Path(p) for p in smk.input.readings]
    metas = [Path(p) for p in smk.input.metas]

    from evaluate.ledger.scoring import Scoring
    from evaluate.saliency.protocol import score_saliency as score

    scoring = Scoring.of(smk.params.checkpoint, str(smk.wildcards.dataset), metas[0], smk.params.run_time)
    score(scoring, spec=dict(smk.params.dataset), manifest_file=Path(smk.input.manifest), reading_files=readings,
          meta_files=metas, resamples=resamples, seed=seed, code=str(smk.params.code),
          out_record=Path(smk.output.record))
