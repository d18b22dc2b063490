"""Jobs of workflow/rules/video.smk: a video data set's sequences, propagation, scoring."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def video_sequences(smk: Any) -> None:
    """A video data set's manifest: its sequences, frames and masks, and the identity of its labels."""
    video: dict = smk.params.video
    out = Path(smk.output.manifest)

    from evaluate.video.protocol import list_sequences

    list_sequences(root=video["root"], resolution=video["resolution"], sequences_file=video["sequences_file"],
                   out=out)


def propagate(smk: Any) -> None:
    """One checkpoint on one sequence: the first frame's masks carried through the video (DAVIS results layout)."""
    checkpoint_file = Path(smk.input.checkpoint)
    video: dict = smk.params.video
    settings: dict = smk.params.settings
    device = str(smk.params.device)
    form = str(smk.params.form)
    out_dir, out_run = Path(smk.output.results), Path(smk.output.run)

    from evaluate.video.protocol import propagate_one

    propagate_one(checkpoint=smk.params.checkpoint, checkpoint_file=checkpoint_file, dataset=video["name"],
                  root=video["root"], resolution=video["resolution"], sequences_file=video["sequences_file"],
                  sequence=smk.wildcards.sequence, settings=settings, device=device, form=form,
                  run_time=smk.params.run_time,
                  out_dir=out_dir, out_run=out_run)


def score_video(smk: Any) -> None:
    """Open a video data set's masks once: J&F, J, F (means, recalls, decays) per checkpoint -> one record."""
    manifest_file, runs = Path(smk.input.manifest), [Path(p) for p in smk.input.runs]
    sequences = [Path(p).name for p in smk.input.results]
    video: dict = smk.params.video
    settings: dict = smk.params.settings
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    code: str = smk.params.code
    out_record = Path(smk.output.record)

    from evaluate.ledger.scoring import Scoring
    from evaluate.video.protocol import score_video as score

    scoring = Scoring.of(smk.params.checkpoint, video["name"], runs[0], smk.params.run_time)
    score(scoring, root=video["root"], resolution=video["resolution"], sequences_file=video["sequences_file"],
          manifest_file=manifest_file, results_root=Path(smk.input.results[0]).parent, sequences=sequences,
          settings=settings, resamples=resamples, seed=seed, code=code, out_record=out_record)
