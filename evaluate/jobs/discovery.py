"""Jobs of workflow/rules/discovery.smk: a box data set's manifest, keys-native, boxes, CorLoc on boxes."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def discovery_manifest(smk: Any) -> None:
    """A box data set's images and shards (no label read)."""
    from evaluate.discovery.protocol import write_manifest

    write_manifest(spec=dict(smk.params.spec), shard_size=int(smk.params.shard_size), out=Path(smk.output.manifest))


def extract_native(smk: Any) -> None:
    """keys-native of one checkpoint on one shard."""
    checkpoint: dict = smk.params.checkpoint
    features: dict = smk.params.features

    from evaluate.discovery.protocol import extract

    extract(checkpoint=checkpoint["name"], checkpoint_file=Path(smk.input.checkpoint), which=checkpoint["which"],
            position_rule=checkpoint["position_rule"], spec=dict(smk.params.spec),
            manifest_file=Path(smk.input.manifest), shard=str(smk.wildcards.shard),
            out_dir=Path(smk.output.meta).parent, dtype=str(features["dtype"]), device=str(features["device"]),
            precision=str(features["precision"]), threads=int(smk.threads))


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
    score(scoring, spec=dict(smk.params.spec), decoder=str(smk.wildcards.decoder),
          manifest_file=Path(smk.input.manifest), boxes_files=boxes, resamples=resamples, seed=seed,
          code=str(smk.params.code), out_record=Path(smk.output.record))
