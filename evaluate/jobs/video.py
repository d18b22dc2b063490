"""Jobs of workflow/rules/video.smk: propagation, scoring."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def propagate(smk: Any) -> None:
    """One checkpoint on one sequence: the first frame's masks carried through the video (DAVIS results layout)."""
    checkpoint: dict = dict(smk.params.checkpoint)
    spec: dict = dict(smk.params.dataset)
    settings: dict = smk.params.settings
    features: dict = dict(smk.params.features)
    out_dir, out_run = Path(smk.output.results), Path(smk.output.run)

    from evaluate.video.protocol import propagate_one

    propagate_one(checkpoint=checkpoint, checkpoint_file=Path(smk.input.checkpoint), spec=spec,
                  manifest_file=Path(smk.params.manifest), sequence=str(smk.wildcards.sequence), settings=settings,
                  features=features, run_time=smk.params.run_time, out_dir=out_dir, out_run=out_run)


def score_video(smk: Any) -> None:
    """Open a video data set's masks once: J&F, J, F (means, recalls, decays) per checkpoint -> one record."""
    manifest_file, runs = Path(smk.input.manifest), [Path(p) for p in smk.input.runs]
    sequences = [Path(p).name for p in smk.input.results]
    spec: dict = dict(smk.params.dataset)
    settings: dict = smk.params.settings
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    code: str = smk.params.code
    out_record = Path(smk.output.record)

    from evaluate.ledger.scoring import Scoring
    from evaluate.video.protocol import score_video as score

    scoring = Scoring.of(smk.params.checkpoint, spec["name"], runs[0], smk.params.run_time)
    score(scoring, spec=spec, manifest_file=manifest_file, results_root=Path(smk.input.results[0]).parent,
          sequences=sequences, settings=settings, resamples=resamples, seed=seed, code=code, out_record=out_record)
