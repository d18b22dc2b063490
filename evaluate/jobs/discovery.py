"""Jobs of workflow/rules/discovery.smk: keys-native, boxes, CorLoc on boxes."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def extract_native(smk: Any) -> None:
    """keys-native of one checkpoint on one shard."""
    checkpoint: dict = dict(smk.params.checkpoint)
    spec: dict = dict(smk.params.dataset)
    features: dict = dict(smk.params.features)

    from evaluate.discovery.protocol import extract

    extract(checkpoint=checkpoint, checkpoint_file=Path(smk.input.checkpoint), spec=spec,
            manifest_file=Path(smk.input.manifest), shard=str(smk.wildcards.shard),
            out_dir=Path(smk.output.meta).parent, features=features)


def discover_boxes(smk: Any) -> None:
    """Every box decoder on one keys-native shard."""
    from evaluate.discovery.protocol import decode_boxes

    decode_boxes(shard_dir=Path(smk.input.meta).parent, out=Path(smk.output.boxes))


def score_discovery(smk: Any) -> None:
    """CorLoc on boxes of one box decoder, checkpoint and data set -> one ledger record."""
    boxes = [Path(p) for p in smk.input.boxes]
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])

    from evaluate.discovery.protocol import score_discovery as score
    from evaluate.ledger.scoring import Scoring

    scoring = Scoring.of(smk.params.checkpoint, str(smk.wildcards.dataset), Path(smk.input.meta),
                         smk.params.run_time)
    score(scoring, spec=dict(smk.params.dataset), decoder=str(smk.wildcards.decoder),
          manifest_file=Path(smk.input.manifest), boxes_files=boxes, resamples=resamples, seed=seed,
          code=str(smk.params.code), out_record=Path(smk.output.record))
