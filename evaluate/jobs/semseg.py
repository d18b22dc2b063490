"""Jobs of workflow/rules/semseg.smk: tokens320 of a shard, a set's clusters, a shard's cluster maps, the scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def extract_tokens320(smk: Any) -> None:
    """tokens320 of one checkpoint on one shard (the released form, float32)."""
    checkpoint: dict = dict(smk.params.checkpoint)
    spec: dict = dict(smk.params.dataset)
    features: dict = dict(smk.params.features)

    from evaluate.semseg.protocol import read_shard

    read_shard(checkpoint=checkpoint, checkpoint_file=Path(smk.input.checkpoint), spec=spec,
               manifest_file=Path(smk.input.manifest), shard=str(smk.wildcards.shard),
               out_dir=Path(smk.output.meta).parent, features=features)


def fit_clusters(smk: Any) -> None:
    """The clusters of every token of one set by one checkpoint."""
    spec: dict = dict(smk.params.dataset)
    clustering: dict = dict(smk.params.clustering)
    shard_dirs = [Path(p).parent for p in smk.input.metas]

    from evaluate.semseg.protocol import fit

    fit(spec=spec, clustering=clustering, shard_dirs=shard_dirs, threads=int(smk.threads), out=Path(smk.output.fit))


def predict_clusters(smk: Any) -> None:
    """Each image's cluster map of one shard."""
    from evaluate.semseg.protocol import predict

    predict(fit_file=Path(smk.input.fit), shard_dir=Path(smk.input.meta).parent, out_dir=Path(smk.output.maps))


def score_semseg(smk: Any) -> None:
    """Unsupervised mIoU and accuracy of one checkpoint on one set -> one ledger record."""
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])

    from evaluate.ledger.scoring import Scoring
    from evaluate.semseg.protocol import score

    scoring = Scoring.of(smk.params.checkpoint, str(smk.wildcards.dataset), Path(smk.input.meta),
                         smk.params.run_time)
    score(scoring, spec=dict(smk.params.dataset), manifest_file=Path(smk.input.manifest), fit_file=Path(smk.input.fit),
          map_dirs=[Path(p) for p in smk.input.maps], resamples=resamples, seed=seed, code=str(smk.params.code),
          out_record=Path(smk.output.record))
