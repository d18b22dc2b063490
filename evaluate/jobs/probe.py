"""Jobs of workflow/rules/probe.smk: the probe trained once per checkpoint, scored once per eval data set."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def train_probe(smk: Any) -> None:
    """Open the probe-train set's labels once and train the probe on its tokens224 (docs/design.md §6)."""
    shard_dirs = [Path(p).parent for p in smk.input.train]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    hyper: dict = smk.params.probe
    seed = int(smk.params.bootstrap["seed"])
    out_weights, out_training = Path(smk.output.weights), Path(smk.output.training)

    from evaluate.ledger.scoring import Scoring
    from evaluate.probe.protocol import train_probe as train

    scoring = Scoring.of(smk.params.checkpoint, smk.params.dataset["name"], smk.input.meta, smk.params.run_time)
    train(scoring, shard_dirs=shard_dirs, images=images, annotations=annotations,
          weight_decay=float(hyper["weight_decay"]), max_iter=int(hyper["max_iter"]), tol=float(hyper["tol"]),
          max_tokens=int(hyper["max_tokens"]), seed=seed, out_weights=out_weights, out_training=out_training)


def score_probe(smk: Any) -> None:
    """Open one eval data set's labels once and score the checkpoint's probe on it: mIoU and patch accuracy."""
    shard_dirs = [Path(p).parent for p in smk.input.features]
    weights, training_file = Path(smk.input.weights), Path(smk.input.training)
    manifest_file = Path(smk.input.manifest)
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    code: str = smk.params.code
    out_record = Path(smk.output.record)

    from evaluate.ledger.scoring import Scoring
    from evaluate.probe.protocol import score_probe as score

    scoring = Scoring.of(smk.params.checkpoint, smk.params.dataset["name"], smk.input.meta, smk.params.run_time)
    score(scoring, shard_dirs=shard_dirs, weights=weights, training_file=training_file, manifest_file=manifest_file,
          images=images, annotations=annotations, resamples=resamples, seed=seed, code=code, out_record=out_record)
