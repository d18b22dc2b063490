"""Jobs of workflow/rules/saliency.smk: a saliency set's manifest, a checkpoint's reading of a shard, its scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def saliency_manifest(smk: Any) -> None:
    """A saliency set's pairs and shards (no label opened)."""
    from evaluate.saliency.protocol import write_manifest

    write_manifest(spec=dict(smk.params.spec), shard_size=int(smk.params.shard_size), out=Path(smk.output.manifest))


def read_saliency(smk: Any) -> None:
    """TokenCut's reading of one shard by one checkpoint, with the solver where the set asks for it."""
    checkpoint: dict = smk.params.checkpoint

    from evaluate.saliency.protocol import read_shard

    read_shard(checkpoint=checkpoint["name"], checkpoint_file=Path(smk.input.checkpoint), which=checkpoint["which"],
               position_rule=checkpoint["position_rule"], spec=dict(smk.params.spec),
               manifest_file=Path(smk.input.manifest), shard=str(smk.wildcards.shard),
               out_reading=Path(smk.output.reading), out_meta=Path(smk.output.meta), threads=int(smk.threads))


def score_saliency(smk: Any) -> None:
    """The saliency measures of one checkpoint on one set -> one ledger record."""
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    readings = [Path(p) for p in smk.input.readings]
    metas = [Path(p) for p in smk.input.metas]

    from evaluate.ledger.scoring import Scoring
    from evaluate.saliency.protocol import score_saliency as score

    scoring = Scoring.of(smk.params.checkpoint, str(smk.wildcards.dataset), metas[0], smk.params.run_time)
    score(scoring, spec=dict(smk.params.spec), manifest_file=Path(smk.input.manifest), reading_files=readings,
          meta_files=metas, resamples=resamples, seed=seed, code=str(smk.params.code),
          out_record=Path(smk.output.record))
