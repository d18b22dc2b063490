"""Unsupervised semantic segmentation in the workflow (docs/design.md §18; DESIGN 16): the entries of the four jobs of
workflow/rules/semseg.smk, one after the other for each checkpoint and set.

- `read_shard` (job `extract_tokens320`): tokens320 of one shard through the one runner (the released form, float32:
  `evaluate.readings.tokens320`).
- `fit` (job `fit_clusters`): the spherical k-means of every token of a set, streamed from its shards in image order
  (`evaluate.semseg.cluster`), K = the set's classes + `extra_clusters`: `fit.json`, the fit's record with its exact
  centres. Label-free: the class count comes from the kind's class list, not from a label.
- `predict` (job `predict_clusters`): each image's cluster map on its s x s square (`matching.cluster_map`), one
  PNG per image (`{id}.png`, 8-bit cluster ids) in a folder per shard, written under a temporary name, then renamed.
  Label-free.
- `score` (job `score_semseg`): the set's labels opened once, on the record: each image's labels cut to its square
  (`evaluate.pixels.tokens320.tokens320_labels`), its cluster-by-class confusion, one Hungarian matching for the whole set, `unsup_miou`
  and `unsup_acc` with intervals over images, the assignment held fixed (`matching.score_set`); the record keeps M, the
  assignment, the per-class IoU, the fit's summary and the first images' maps for the figures (and, for an unsealed
  set, their truths).
"""

from __future__ import annotations

import base64
import io
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Sequence

import numpy as np

log = logging.getLogger("evaluate.semseg.protocol")
KIND = "semseg"  # the ledger kind of the records
DECODER = "spherical-kmeans"  # what its records name as the decoder of tokens320
FIGURE_IMAGES = 4  # the first images of a set whose maps a record keeps for the figures
TMP_SUFFIX = ".tmp"  # a shard's maps folder while it is written


def read_shard(*, checkpoint: dict, checkpoint_file: str | os.PathLike, spec: dict, manifest_file: str | os.PathLike,
               shard: str, out_dir: str | os.PathLike, features: dict) -> dict:
    """tokens320 of one checkpoint on one shard into `out_dir` (module docstring); returns the meta."""
    from evaluate.readings.features import META
    from evaluate.readings.runner import run_reading
    from evaluate.readings.tokens320 import TOKENS320, write_tokens320

    return run_reading(TOKENS320, lambda run: write_tokens320(run, out_dir), checkpoint=checkpoint,
                       checkpoint_file=checkpoint_file, spec=spec, manifest_file=manifest_file, shard=shard,
                       meta_out=Path(out_dir) / META, features=features)


def cluster_settings(spec: dict, clustering: dict) -> Any:
    """The fit's `ClusterSettings` for a set: K = its classes (its kind's class list: no label read) plus the
    config's `extra_clusters`, and the config's seed, restarts and iteration cap."""
    from evaluate.datasets import open_dataset
    from evaluate.semseg.cluster import ClusterSettings

    from evaluate import ConfigError
    from evaluate.semseg.matching import MAP_CLUSTERS

    classes = len(open_dataset(spec).class_names)
    k = classes + int(clustering["extra_clusters"])
    if k > MAP_CLUSTERS:
        raise ConfigError(f"semseg.{spec['name']}.extra_clusters: {classes} classes + {clustering['extra_clusters']} "
                          f"make {k} clusters, more than an 8-bit cluster map holds ({MAP_CLUSTERS})")
    return ClusterSettings(k=k, seed=int(clustering["seed"]), n_init=int(clustering["n_init"]),
                           max_iter=int(clustering["max_iter"]))


def fit(*, spec: dict, clustering: dict, shard_dirs: Sequence[str | os.PathLike], threads: int,
        out: str | os.PathLike) -> dict:
    """The clusters of a set's tokens320 (`shard_dirs` in shard order) -> `out` (the fit's record, JSON); returns it.
    clustering: the set's config entry's `extra_clusters`, `seed`, `n_init`, `max_iter`."""
    from evaluate.plumbing.atomic import read_json, write_json
    from evaluate.readings.features import META
    from evaluate.readings.tokens320 import TOKENS
    from evaluate.semseg.cluster import TokenStream, fit_clusters

    settings = cluster_settings(spec, clustering)
    meta = read_json(Path(shard_dirs[0]) / META)  # every shard's meta names the same checkpoint, manifest and grid
    stream = TokenStream.from_npy([Path(d) / TOKENS for d in shard_dirs])
    result = fit_clusters(stream, settings, threads=threads)
    record = {"dataset": spec["name"], "checkpoint_sha256": meta["checkpoint_sha256"],
              "manifest_sha256": meta["manifest_sha256"], "grid": meta["grid"], "side": meta["side"],
              **result.record()}
    write_json(out, record)
    log.info("%s: %d tokens in %d clusters, restart %d of %d, objective %.6g, %s Lloyd assignments", spec["name"],
             result.n_tokens, settings.k, result.restart + 1, settings.n_init, result.objective,
             "/".join(str(i) for i in result.iterations))
    return record


def predict(*, fit_file: str | os.PathLike, shard_dir: str | os.PathLike, out_dir: str | os.PathLike) -> list[Path]:
    """Each image's cluster map of one shard (module docstring) into the folder `out_dir`; returns the PNGs."""
    from PIL import Image

    from evaluate.plumbing.atomic import read_json
    from evaluate.readings.features import IDS, META
    from evaluate.readings.tokens320 import TOKENS
    from evaluate.semseg import SemsegError
    from evaluate.semseg.cluster import ClusterFit
    from evaluate.semseg.matching import MAP_CLUSTERS, cluster_map

    record = read_json(fit_file)
    centres = ClusterFit.from_record(record).centres
    if centres.shape[0] > MAP_CLUSTERS:  # a fit file not written by `fit`
        raise SemsegError(f"{fit_file}: {centres.shape[0]} clusters do not fit an 8-bit map")
    meta, ids = read_json(Path(shard_dir) / META), read_json(Path(shard_dir) / IDS)
    if meta["checkpoint_sha256"] != record["checkpoint_sha256"]:
        raise SemsegError(f"{fit_file}: fitted on another checkpoint's tokens than {Path(shard_dir) / META}")
    grid, side = int(meta["grid"]), int(meta["side"])
    tokens = np.load(Path(shard_dir) / TOKENS, mmap_mode="r")
    out = Path(out_dir)
    tmp = out.with_name(out.name + TMP_SUFFIX)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for k, image_id in enumerate(ids):
        clusters = cluster_map(np.asarray(tokens[k * grid * grid: (k + 1) * grid * grid]), centres, side)
        Image.fromarray(clusters).save(tmp / f"{int(image_id)}.png", format="PNG")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return [out / f"{int(i)}.png" for i in ids]


def read_map(path: Path) -> np.ndarray:
    """A cluster map PNG back: (s, s) uint8 cluster ids."""
    from PIL import Image

    with Image.open(path) as img:
        return np.asarray(img, dtype=np.uint8)


def png_text(array: np.ndarray) -> str:
    """An (H, W) uint8 map as base64 PNG text, for a record's figure entries."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.asarray(array, dtype=np.uint8)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def text_png(text: str) -> np.ndarray:
    """`png_text` back: (H, W) uint8."""
    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(text))) as img:
        return np.asarray(img, dtype=np.uint8)


def score(scoring: Any, *, spec: dict, manifest_file: str | os.PathLike, fit_file: str | os.PathLike,
          map_dirs: Sequence[str | os.PathLike], resamples: int, seed: int, code: str,
          out_record: str | os.PathLike) -> dict:
    """The unsupervised measures of one checkpoint on one set: opens the labels once (or reuses the record of the
    same maps, fit, labels, code and bootstrap), writes the record and returns it."""
    from evaluate.datasets import open_dataset
    from evaluate.datasets.manifest import check_listed
    from evaluate.ledger.scoring import Scored, score_on_record
    from evaluate.plumbing.atomic import read_json
    from evaluate.readings.tokens320 import TOKENS320
    from evaluate.semseg.matching import cluster_confusion, score_set
    from evaluate.pixels.tokens320 import tokens320_labels

    manifest = read_json(manifest_file)
    record_of_fit = read_json(fit_file)
    k, side = int(record_of_fit["k"]), int(record_of_fit["side"])
    maps = [path for folder in map_dirs for path in sorted(Path(folder).glob("*.png"),
                                                           key=lambda p: int(p.stem))]
    ids = [int(p.stem) for p in maps]

    def score_labels(dataset: Any) -> Scored:
        dataset = check_listed(dataset, manifest, manifest_file)
        n_classes = len(dataset.class_names)
        confusions, figures = [], []
        for image_id, path in zip(ids, maps):
            clusters = read_map(path)
            labels = tokens320_labels(dataset.labels(image_id), side)
            confusions.append(cluster_confusion(clusters, labels, k, n_classes))
            if len(figures) < FIGURE_IMAGES:
                entry = {"id": image_id, "image": str(dataset.image_path(image_id)), "side": side,
                         "clusters": png_text(clusters)}
                if not scoring.sealed:  # the figures draw the truth of an unsealed set only
                    entry["truth"] = png_text(labels)
                figures.append(entry)
        scores = score_set(confusions, ids)
        fields = {"benchmark": spec.get("benchmark"), "class_names": list(dataset.class_names),
                  "confusion": scores.confusion.tolist(),
                  "cluster_to_class": scores.matching.cluster_to_class.tolist(),
                  "hungarian": scores.matching.hungarian.tolist(),
                  "class_iou": [None if np.isnan(v) else float(100.0 * v) for v in scores.iou],
                  "fit": {key: record_of_fit[key] for key in ("dataset", "setting", "k", "seed", "n_init",
                                                               "max_iter", "n_tokens", "objective", "restart",
                                                               "iterations", "sizes", "centres_sha256")},
                  "figure_images": figures}
        return Scored(measures=scores.measures(resamples=resamples, seed=seed), fields=fields)

    record, _ = score_on_record(
        scoring, kind=KIND, role="eval", purpose="eval", setting=record_of_fit["setting"], reading=TOKENS320.name,
        decoder=DECODER, n_images=len(ids), out_record=out_record, decided_by=[manifest_file, fit_file, *maps],
        settings={"code": code, "resamples": resamples, "seed": seed}, open_dataset=lambda: open_dataset(spec),
        score=score_labels,
    )
    values = {m["measure"]: m["value"] for m in record["measures"]}
    log.info("%s on %s: unsupervised mIoU %.2f, accuracy %.2f (%d images, %d clusters)", scoring.checkpoint,
             scoring.dataset, values["unsup_miou"], values["unsup_acc"], len(ids), k)
    return record
