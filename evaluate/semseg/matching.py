"""Clusters to classes, once for the whole set, and the published measures (docs/design.md §18, DESIGN 16).

Per image (tokens320: a g x g grid, the s x s scored square):
- `cluster_map`: logits = T C^T (the raw tokens T (g * g, D), the unit centres C (K, D), in float64), viewed
  (K, g, g), `torch.nn.functional.interpolate(mode="bilinear", align_corners=False)` to s x s, argmax over K (the
  first on ties): (s, s) cluster ids.
- `cluster_confusion`: M_i[k, c] (int64) counts the pixels of cluster k labelled c, over pixels labelled < C (255,
  ignore, counts nowhere).

The set (`score_set`): M = sum of the M_i; `scipy.optimize.linear_sum_assignment(M, maximize=True)` once (STEGO's
`UnsupervisedMetrics`); with K > C a cluster the assignment leaves out counts as its majority class, the lower on
ties (PriMaPs' metrics.py). H[c', c] = pixels predicted c' (through their cluster's class) of class c;
IoU_c = H_cc / (sum_j H_cj + sum_j H_jc - H_cc), a class with 0 / 0 left out of the mean (an absent class whose
cluster holds pixels counts 0); mIoU and accuracy trace(H) / sum(H), in percent.

Intervals (`UnsupervisedScores.measures`): section 6's bootstrap over images with the matching held fixed (it is part
of the prediction), by the ledger's reducers: "miou" on each image's sparse class confusion [[true, pred, count], ...]
(its pooled value is exactly the mIoU above: a class whose pooled union is 0 is left out, an absent class predicted
somewhere counts 0) and "ratio" on each image's [correct, labelled] pixels. An image without a labelled pixel adds
nothing to either: it is left out and counted (n_left_out), as section 6 leaves out an image without truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import torch

from evaluate.scores.measures import make_measure
from evaluate.semseg import SemsegError

MEASURES = ("unsup_miou", "unsup_acc")
MAP_CLUSTERS = 256  # a cluster map is 8-bit: K above it is refused before the fit (`protocol.cluster_settings`)


def cluster_map(tokens: np.ndarray, centres: np.ndarray, side: int) -> np.ndarray:
    """One image's clusters on its s x s square: tokens (g * g, D) float (raw, as read), centres (K, D) float64 unit
    rows, K <= MAP_CLUSTERS -> (side, side) uint8: the argmax of the bilinearly upsampled logits T C^T."""
    tokens = np.asarray(tokens)
    centres = np.asarray(centres, dtype=np.float64)
    g = round(tokens.shape[0] ** 0.5) if tokens.ndim == 2 else 0
    if tokens.ndim != 2 or g * g != tokens.shape[0] or tokens.shape[1] != centres.shape[1]:
        raise SemsegError(f"cluster_map: tokens {tokens.shape} are not a square grid of the centres' width "
                          f"{centres.shape[1]}")
    logits = tokens.astype(np.float64) @ centres.T  # (g * g, K)
    grid = torch.from_numpy(np.ascontiguousarray(logits.T.reshape(1, -1, g, g)))
    upsampled = torch.nn.functional.interpolate(grid, size=(int(side), int(side)), mode="bilinear",
                                                align_corners=False)[0].numpy()
    return np.argmax(upsampled, axis=0).astype(np.uint8)


def cluster_confusion(clusters: np.ndarray, labels: np.ndarray, n_clusters: int, n_classes: int) -> np.ndarray:
    """M_i (K, C) int64: pixels of cluster k labelled c, over pixels labelled < C; clusters and labels (s, s)."""
    clusters, labels = np.asarray(clusters), np.asarray(labels)
    if clusters.shape != labels.shape:
        raise SemsegError(f"cluster map {clusters.shape} and label map {labels.shape} differ in size")
    stray = (labels >= n_classes) & (labels != 255)
    if stray.any():
        raise SemsegError(f"label value {int(labels[stray].min())} is neither a class (0..{n_classes - 1}) nor 255")
    if clusters.size and int(clusters.max()) >= n_clusters:
        raise SemsegError(f"cluster id {int(clusters.max())} out of range for {n_clusters} clusters")
    keep = labels < n_classes
    index = clusters[keep].astype(np.int64) * n_classes + labels[keep]
    return np.bincount(index, minlength=n_clusters * n_classes).reshape(n_clusters, n_classes).astype(np.int64)


@dataclass(frozen=True)
class Matching:
    """cluster_to_class (K,) int64: each cluster's class; hungarian (K,) bool: matched by the assignment (else its
    majority class, K > C)."""

    cluster_to_class: np.ndarray
    hungarian: np.ndarray


def match_clusters(confusion: np.ndarray) -> Matching:
    """The one matching of a set: `linear_sum_assignment(M, maximize=True)` on M (K, C), K >= C; a cluster left out
    goes to its majority class (the lower on ties)."""
    confusion = np.asarray(confusion)
    if confusion.ndim != 2 or confusion.shape[0] < confusion.shape[1]:
        raise SemsegError(f"the confusion must be (K, C) with K >= C clusters, got {confusion.shape}")
    rows, cols = scipy.optimize.linear_sum_assignment(confusion, maximize=True)
    to_class = np.argmax(confusion, axis=1).astype(np.int64)  # the majority class, the lower on ties
    to_class[rows] = cols
    hungarian = np.zeros(confusion.shape[0], dtype=bool)
    hungarian[rows] = True
    return Matching(to_class, hungarian)


def class_confusion(confusion: np.ndarray, cluster_to_class: np.ndarray, n_classes: int) -> np.ndarray:
    """H (C, C) int64, rows predicted class, columns true class: the rows of M (K, C) summed by cluster's class."""
    h = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(h, np.asarray(cluster_to_class, dtype=np.int64), np.asarray(confusion, dtype=np.int64))
    return h


def class_scores(h: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(IoU (C,) float64, NaN for 0 / 0; mIoU over the classes with a union, percent; accuracy, percent) of H."""
    h = np.asarray(h, dtype=np.int64)
    tp = np.diag(h).astype(np.float64)
    union = h.sum(axis=1) + h.sum(axis=0) - np.diag(h)
    iou = np.full(h.shape[0], np.nan)
    np.divide(tp, union, out=iou, where=union > 0)
    total = h.sum()
    miou = 100.0 * float(np.nanmean(iou)) if (union > 0).any() else float("nan")
    accuracy = 100.0 * float(np.trace(h)) / float(total) if total else float("nan")
    return iou, miou, accuracy


def sparse_confusion(h: np.ndarray) -> list[list[int]]:
    """An image's H (C, C) (rows predicted) as the "miou" reducer's [[true, pred, count], ...] of nonzero counts."""
    pred, true = np.nonzero(h)
    return [[int(t), int(p), int(h[p, t])] for p, t in zip(pred, true)]


@dataclass(frozen=True)
class UnsupervisedScores:
    """A set's outcome: M (K, C), the matching, H (C, C), per-class IoU (NaN for 0 / 0), mIoU and accuracy in
    percent; and per image (image_ids order) its sparse class confusion and [correct, labelled] pixels."""

    confusion: np.ndarray
    matching: Matching
    class_confusion: np.ndarray
    iou: np.ndarray
    miou: float
    accuracy: float
    image_ids: tuple[int, ...]
    per_image_confusion: tuple[list[list[int]], ...]
    per_image_pixels: tuple[tuple[int, int], ...]

    def measures(self, *, resamples: int, seed: int) -> list[dict]:
        """The record's two measures, `unsup_miou` and `unsup_acc` (percent), with 95% bootstrap intervals over the
        images that hold a labelled pixel (the others left out and counted)."""
        kept = [i for i, (_, labelled) in enumerate(self.per_image_pixels) if labelled > 0]
        ids = [self.image_ids[i] for i in kept]
        left_out = len(self.image_ids) - len(kept)
        boot = {"resamples": resamples, "seed": seed, "n_left_out": left_out}
        return [
            make_measure("unsup_miou", image_ids=ids, per_image=[self.per_image_confusion[i] for i in kept],
                         reducer="miou", **boot),
            make_measure("unsup_acc", image_ids=ids, per_image=[list(self.per_image_pixels[i]) for i in kept],
                         reducer="ratio", **boot),
        ]


def score_set(confusions: Sequence[np.ndarray], image_ids: Sequence[int]) -> UnsupervisedScores:
    """Match and score a set from its images' M_i (K, C) int64, in image order."""
    if not confusions or len(confusions) != len(image_ids):
        raise SemsegError(f"{len(confusions)} confusions for {len(image_ids)} images")
    stacked = [np.asarray(m, dtype=np.int64) for m in confusions]
    shapes = {m.shape for m in stacked}
    if len(shapes) != 1:
        raise SemsegError(f"the images' confusions differ in shape: {sorted(shapes)}")
    total = np.sum(stacked, axis=0)
    n_classes = total.shape[1]
    matching = match_clusters(total)
    h = class_confusion(total, matching.cluster_to_class, n_classes)
    iou, miou, accuracy = class_scores(h)
    per_h = [class_confusion(m, matching.cluster_to_class, n_classes) for m in stacked]
    return UnsupervisedScores(
        confusion=total, matching=matching, class_confusion=h, iou=iou, miou=miou, accuracy=accuracy,
        image_ids=tuple(int(i) for i in image_ids), per_image_confusion=tuple(sparse_confusion(x) for x in per_h),
        per_image_pixels=tuple((int(np.trace(x)), int(x.sum())) for x in per_h))
