"""The video reading as workflow jobs (docs/design.md §12): the entries of workflow/rules/video.smk.

- `propagate_one`: one checkpoint on one sequence, through the one runner: the network on `frames480`, the first frame's masks carried to
  every frame (`evaluate.video.propagate`), DAVIS's results layout `out_dir/<frame>.png` (written under a temporary
  folder name, then renamed), and a run file saying what was run (the checkpoint's sha256 and architecture, the
  settings, the grid, the seconds). The first-frame mask is the protocol's given input: an openings row of purpose
  `propagate`, which a sealed data set's budget does not count;
- `score_video`: one checkpoint on one video data set: every other mask opened once (purpose `video-eval`, counted),
  the official measures (`evaluate.video.score`), one ledger record (kind `video`) whose intervals resample
  SEQUENCES (the `ratio` reducer of per-sequence [sum over its objects, object count]), with the per-sequence and
  per-object values and the propagation settings; or the record of the same results, labels, code and settings
  reused (`evaluate.ledger.scoring.score_on_record`).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluate.datasets.davis import DavisDataset
    from evaluate.ledger.scoring import Scoring
    from evaluate.plumbing.config import RunTime

log = logging.getLogger("evaluate.video.protocol")
TMP_SUFFIX = ".tmp"  # a sequence's results folder while it is written
DECODER = "label-propagation"  # what its records name as the decoder of frames480 (docs/design.md §10)


def file_hashes(folder: Path) -> dict[str, str]:
    """{file name: sha256} of a results folder's PNGs, sorted by name: what a propagation opening hashes."""
    from evaluate.plumbing.provenance import sha256_file

    return {p.name: sha256_file(p) for p in sorted(folder.glob("*.png"))}


def propagate_one(*, checkpoint: Mapping[str, Any], checkpoint_file: str | os.PathLike, spec: dict,
                  manifest_file: str | os.PathLike, sequence: str, settings: Mapping[str, Any], features: dict,
                  run_time: RunTime, out_dir: str | os.PathLike, out_run: str | os.PathLike) -> dict:
    """Propagate one sequence's first-frame masks with one checkpoint, through the one runner (frames480 in the
    config's `features.form`, float32, on `features.device`); returns the run file's content (the runner's meta).

    checkpoint: its params (name, run, epoch, which network, position rule); spec: the video data set's; settings:
    the config's `video:` (`PropagationSettings`); run_time: the data set's seal and budget. The job's torch threads
    (`video.threads`) are set by the job runner.
    """
    from evaluate.ledger.scoring import Scoring, open_labels
    from evaluate.plumbing.provenance import sha256_json
    from evaluate.readings.frames import FRAMES480
    from evaluate.readings.runner import Shard, run_reading
    from evaluate.video.propagate import propagate_sequence
    from evaluate.video.settings import PropagationSettings

    chosen = PropagationSettings.of_config(settings)
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + TMP_SUFFIX)
    scoring = Scoring.of(checkpoint, spec["name"], out_run, run_time)

    def body(run: Shard) -> dict:
        video = run.dataset.sequence(sequence)
        shutil.rmtree(tmp, ignore_errors=True)
        with open_labels(scoring, run.dataset.labels_sha256("first", [sequence]), role="eval", purpose="propagate",
                         setting=chosen.name, n_images=1) as labels:
            result = propagate_sequence(run.model, video, chosen, tmp)
            written = file_hashes(tmp)
            labels.result_sha256 = sha256_json(written)
        shutil.rmtree(out_dir, ignore_errors=True)
        tmp.rename(out_dir)
        log.info("%s on %s/%s: %d frames, %d object(s), %.1f s", checkpoint["name"], spec["name"], sequence,
                 result.n_frames, result.n_objects, result.seconds)
        return {"sequence": sequence, "settings": chosen.as_dict(), "setting": chosen.name,
                "n_frames": result.n_frames, "n_objects": result.n_objects, "frame_size": list(result.frame_size),
                "grid": list(result.grid), "seconds": result.seconds, "opening_row_sha256": labels.row_sha256,
                "results": written}

    return run_reading(FRAMES480, body, checkpoint=dict(checkpoint), checkpoint_file=checkpoint_file, spec=spec,
                       manifest_file=manifest_file, shard=sequence, meta_out=out_run, features=features)


@dataclass(frozen=True)
class VideoLabels:
    """A video data set opened for scoring: the data set and the identity of the masks scoring reads."""

    dataset: DavisDataset
    annotations_sha256: str


def video_measures(scores: Any, *, resamples: int, seed: int) -> list[dict]:
    """The record's measures of `evaluate.video.score.VideoScores`: each of `evaluate.video.measures.MEASURES` in
    percent, its interval by resampling sequences (per sequence [sum of its objects' values, object count], the
    `ratio` reducer; the sequence's index is the unit)."""
    from evaluate.scores.measures import make_measure
    from evaluate.video.measures import MEASURES

    units = list(range(len(scores.sequences)))
    return [make_measure(m, image_ids=units, per_image=scores.per_sequence(m), reducer="ratio", resamples=resamples,
                         seed=seed) for m in MEASURES]


def per_sequence_rows(scores: Any) -> list[dict]:
    """One row per sequence: its name, objects and each measure in percent (mean over its objects)."""
    from evaluate.video.measures import MEASURES, PERCENT

    sums = {m: scores.per_sequence(m) for m in MEASURES}
    return [{"sequence": name, "objects": int(sums[MEASURES[0]][i][1]),
             **{m: PERCENT * sums[m][i][0] / sums[m][i][1] for m in MEASURES}}
            for i, name in enumerate(scores.sequences)]


def score_video(scoring: Scoring, *, spec: dict, manifest_file: str | os.PathLike,
                results_root: str | os.PathLike, sequences: Sequence[str],
                settings: Mapping[str, Any], resamples: int, seed: int, code: str,
                out_record: str | os.PathLike) -> dict:
    """Score `results_root/<sequence>/` for `sequences` against the data set's masks; write the video record.

    scoring: the checkpoint and data set, whose `features_meta` is a propagation run file (it names the
    checkpoint's sha256 and architecture); settings: the propagation's (the record's setting is their name).
    Returns the record.
    """
    from evaluate.datasets import open_dataset as open_dataset_of
    from evaluate.ledger.scoring import Scored, score_on_record
    from evaluate.plumbing.atomic import read_json
    from evaluate.readings.frames import FRAMES480
    from evaluate.video.score import score_results
    from evaluate.video.settings import PropagationSettings

    chosen = PropagationSettings.of_config(settings)
    names = list(sequences)
    results_root = Path(results_root)

    def open_dataset() -> VideoLabels:
        davis = open_dataset_of(spec)
        return VideoLabels(davis, davis.labels_sha256("rest", names))

    def score(labels: VideoLabels) -> Scored:
        scores = score_results(results_root, labels.dataset, names)
        return Scored(measures=video_measures(scores, resamples=resamples, seed=seed),
                      fields={"sequences": names, "per_sequence": per_sequence_rows(scores),
                              "per_object": scores.per_object(), "propagation": chosen.as_dict()})

    manifest = read_json(manifest_file)
    n_masks = sum(len(s["masks"]) - 1 for s in manifest["sequences"] if s["name"] in set(names))
    results = sorted(p for name in names for p in (results_root / name).glob("*.png"))
    record, _ = score_on_record(
        scoring, kind="video", role="eval", purpose="video-eval", setting=chosen.name, reading=FRAMES480.name,
        decoder=DECODER, n_images=n_masks,
        out_record=out_record, decided_by=[manifest_file, *results],
        settings={"code": code, "resamples": resamples, "seed": seed, "propagation": chosen.as_dict()},
        open_dataset=open_dataset, score=score,
    )
    value = {m["measure"]: m["value"] for m in record["measures"]}
    log.info("%s on %s: J&F %.2f, J %.2f, F %.2f (%d sequence(s))", scoring.checkpoint, scoring.dataset,
             value["jf_mean"], value["j_mean"], value["f_mean"], len(names))
    return record
