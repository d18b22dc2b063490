"""Score any folder in DAVIS's results layout against a DAVIS-layout ground truth (docs/design.md §12).

    RESULTS/<sequence>/<frame>.png      one index PNG per annotated frame, named as the truth's mask

The scored frames of a sequence are its annotated frames without the first and the last (DAVIS's semi-supervised
protocol); its objects are ids 1..M of the first frame's mask (`evaluate.datasets.davis`). A result PNG is read by
the truth's mode rule (grayscale: non-zero is object 1; palette: the ids), except that a palette result has no void:
its 255 is an id. A folder that cannot be scored fails with one `VideoScoreError` line naming the sequence and the
frame: a missing sequence folder or frame, a size that differs from the truth's, an id above M. Ids above M in a
later ground-truth mask are read as background and logged.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evaluate import EvaluationError
from evaluate.datasets.davis import (
    DavisDataset,
    VideoSequence,
    first_mask,
    read_mask,
    truth_mask,
)
from evaluate.video.measures import ObjectScores, VideoScores, frame_scores

log = logging.getLogger("evaluate.video.score")
MIN_ANNOTATED = 3  # the first and the last annotated frame are not scored: at least one more is needed


class VideoScoreError(EvaluationError):
    """A results folder that cannot be scored; the message names the sequence and the frame."""


def score_sequence(results_dir: str | os.PathLike, sequence: VideoSequence) -> list[ObjectScores]:
    """Per-object J and F of `sequence`'s scored frames, from `results_dir/<frame>.png` (the sequence's folder).

    Reads the sequence's first mask (for M) and every scored ground-truth mask. Returns one ObjectScores per object
    1..M, each with (n,) J and F over the n scored frames.
    """
    results_dir = Path(results_dir)
    name = sequence.name
    if len(sequence.masks) < MIN_ANNOTATED:
        raise VideoScoreError(f"sequence {name}: {len(sequence.masks)} annotated frame(s); the first and the last "
                              f"are not scored, so at least {MIN_ANNOTATED} are needed")
    if not results_dir.is_dir():
        raise VideoScoreError(f"sequence {name}: no results folder {results_dir}")
    n_objects = first_mask(sequence).n_objects
    scored = sequence.masks[1:-1]
    j = np.empty((n_objects, len(scored)))
    f = np.empty((n_objects, len(scored)))
    extra = 0
    for i, mask in enumerate(scored):
        frame = mask.stem
        truth = truth_mask(sequence, mask, n_objects)
        extra += truth.n_extra
        path = results_dir / mask.name
        if not path.is_file():
            raise VideoScoreError(f"sequence {name}, frame {frame}: result {path} is missing")
        pred = read_mask(path, result=True)
        if pred.shape != truth.labels.shape:
            raise VideoScoreError(f"sequence {name}, frame {frame}: result {path} is {pred.shape[1]} x "
                                  f"{pred.shape[0]} px but the ground truth is {truth.labels.shape[1]} x "
                                  f"{truth.labels.shape[0]}")
        top = int(pred.max())
        if top > n_objects:
            raise VideoScoreError(f"sequence {name}, frame {frame}: result {path} holds id {top}, but the first "
                                  f"frame has {n_objects} object(s)")
        j[:, i], f[:, i] = frame_scores(pred, truth.labels, n_objects)
    if extra:
        log.warning("sequence %s: %d ground-truth pixel(s) hold an id above the first frame's %d object(s); read "
                    "as background", name, extra, n_objects)
    frames = tuple(mask.stem for mask in scored)
    return [ObjectScores(name, k + 1, frames, j[k], f[k]) for k in range(n_objects)]


def score_results(results_root: str | os.PathLike, dataset: DavisDataset,
                  names: Sequence[str] | None = None) -> VideoScores:
    """Score `results_root/<sequence>/` for every sequence of `dataset` (or of `names`, in that order)."""
    results_root = Path(results_root)
    if not results_root.is_dir():
        raise VideoScoreError(f"{results_root}: results folder not found")
    objects = []
    for name in (dataset.names if names is None else names):
        sequence = dataset.sequence(name)
        objects.extend(score_sequence(results_root / name, sequence))
        log.info("scored sequence %s", name)
    return VideoScores(tuple(objects))
