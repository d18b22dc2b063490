"""The probe's scores on eval images (docs/design.md §6), and its IoU per class.

Per image: logits (N224, K+1) -> (g, g) (g = sqrt(N224) = 224 / p: 14, 28, 16 for p 16, 8, 14) -> bilinear
upsample to 224 x 224 (`torch.nn.functional.interpolate`, align_corners=False) -> argmax (first maximum) ->
confusion against the label map224, 255 pixels left out. mIoU (%) from the pooled confusion over classes with
nonzero union (background included). Patch accuracy (%) = correct / valid patches, from per-image [correct,
valid] ("ratio"), the patch labels on the same grid (p = 224 / g, read from the tokens).
95% percentile bootstrap intervals over images as for Jaccard: `probe_measures` hands the per-image statistics to
`evaluate.scores.measures.make_measure` (reducers "miou" and "ratio" of `evaluate.scores.bootstrap.bootstrap_ci`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

from evaluate.probe import ProbeError
from evaluate.probe.labels import IGNORE, SIZE, label_map, label_map224, patch_labels

if TYPE_CHECKING:  # the tables job reads per-class IoU from records here and never runs a probe: no torch import
    from evaluate.probe.linear import LinearProbe


def confusion(true: np.ndarray, pred: np.ndarray, n_classes: int) -> np.ndarray:
    """Confusion matrix int64 (C, C), rows true, columns predicted; pixels whose true label is 255 are left out."""
    t = np.asarray(true).ravel().astype(np.int64)
    p = np.asarray(pred).ravel().astype(np.int64)
    keep = t != IGNORE
    t, p = t[keep], p[keep]
    if t.size and (t.max() >= n_classes or p.max() >= n_classes or p.min() < 0):
        raise ProbeError(f"confusion: labels must lie in 0..{n_classes - 1}, found true {t.max()}, pred {p.max()}")
    return np.bincount(t * n_classes + p, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def sparse_confusion(conf: np.ndarray) -> list[list[int]]:
    """Nonzero entries of a confusion matrix as [true, pred, count] triples (row-major order)."""
    t, p = np.nonzero(conf)
    return [[int(a), int(b), int(conf[a, b])] for a, b in zip(t, p)]


def token_grid(n_patches: int) -> int:
    """g of a tokens224 reading of N224 = g^2 patches (14 for 196, 28 for 784, 16 for 256), with g dividing 224; a
    ProbeError otherwise."""
    g = math.isqrt(int(n_patches))
    if g < 1 or g * g != n_patches or SIZE % g:
        raise ProbeError(f"{n_patches} tokens are not a square grid of patches tiling the {SIZE}-px crop")
    return g


def predict_map224(logits: np.ndarray) -> np.ndarray:
    """Patch logits (N224, C) -> predicted classes int64 (224, 224): the (g, g) grid bilinearly upsampled
    (align_corners=False), argmax."""
    import torch  # noqa: PLC0415 (see the module's imports)

    lg = torch.as_tensor(np.asarray(logits, dtype=np.float32))
    if lg.ndim != 2:
        raise ProbeError(f"predict_map224: expected logits (N224, C), got {tuple(lg.shape)}")
    g = token_grid(lg.shape[0])
    grid = lg.reshape(g, g, -1).permute(2, 0, 1)[None]
    up = torch.nn.functional.interpolate(grid, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    return up[0].argmax(dim=0).numpy()


@dataclass
class ImageProbeStats:
    """One eval image: sparse pixel confusion [[true, pred, count], ...], correct and valid patch counts."""

    confusion: list[list[int]]
    correct: int
    valid: int


def score_image(probe: LinearProbe, tokens: np.ndarray, map224: np.ndarray) -> ImageProbeStats:
    """Score one image: tokens float (N224, D), map224 uint8 (224, 224) label map in the tokens224 geometry; the
    patch labels are on the tokens' own grid (p = 224 / sqrt(N224))."""
    logits = probe.logits(tokens)
    pred_pixels = predict_map224(logits)
    conf = confusion(map224, pred_pixels, probe.n_classes)
    labels = patch_labels(map224, SIZE // token_grid(len(logits)))
    valid = labels != IGNORE
    correct = int(np.count_nonzero(logits.argmax(axis=1)[valid] == labels[valid]))
    return ImageProbeStats(sparse_confusion(conf), correct, int(valid.sum()))


def probe_measures(
    probe: LinearProbe,
    items: Iterable[tuple[int, np.ndarray, np.ndarray]],
    *,
    resamples: int,
    seed: int,
    level: float = 0.95,
) -> list[dict[str, Any]]:
    """Score the probe on eval images -> the ledger measures [probe_miou, probe_accuracy].

    items yield (image_id, tokens (N224, D), map224 uint8 (224, 224)). Each measure keeps the per-image
    statistics (sparse confusions; [correct, valid]) and its value and interval in percent, drawn from them by
    `evaluate.scores.measures.make_measure`, so the pipeline and a paired bootstrap read the same numbers.
    """
    from evaluate.plumbing.memory import keep_large_blocks_mapped
    from evaluate.scores.measures import make_measure

    keep_large_blocks_mapped()  # else each image's temporaries stay resident under its kept statistics
    ids: list[int] = []
    stats: list[ImageProbeStats] = []
    for image_id, tokens, map224 in items:
        ids.append(int(image_id))
        stats.append(score_image(probe, tokens, map224))
    boot = {"resamples": resamples, "seed": seed, "level": level}
    return [
        make_measure("probe_miou", image_ids=ids, per_image=[s.confusion for s in stats], reducer="miou", **boot),
        make_measure("probe_accuracy", image_ids=ids, per_image=[[s.correct, s.valid] for s in stats],
                     reducer="ratio", **boot),
    ]


def eval_items(reader: Any, source: Any,
               class_of_category: dict[int, int]) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(image_id, tokens float32 (N224, D), map224) for every image of a FeatureReader, one shard at a time."""
    for shard_ids, array in reader.iter_shards("tokens224"):
        for row, image_id in enumerate(shard_ids):
            map224 = label_map224(label_map(source, int(image_id), class_of_category))
            yield int(image_id), np.asarray(array[row], dtype=np.float32), map224



def per_class_iou(
    per_image: Iterable[Iterable[Iterable[int]]], n_classes: int, *, resamples: int, seed: int,
    level: float = 0.95,
) -> list[dict[str, Any]]:
    """IoU of each class over the pooled per-image confusions, with a percentile bootstrap interval over images.

    per_image: the probe record's sparse confusions, one [[true, pred, count], ...] list per image. Class c's IoU
    is sum I / sum (T + P - I) over images (I, T, P: its intersection, true and predicted pixels), i.e. the
    "ratio" reducer on per-image [I, T + P - I], so the pooled value equals the per-class term of mIoU. Returns
    one entry per label 0..n_classes-1: {"label", "n_images" (images whose truth holds the class), "value",
    "ci_low", "ci_high"} in [0, 1]; all None for a class with no true or predicted pixel anywhere.
    """
    from evaluate.scores.bootstrap import bootstrap_ci

    rows = list(per_image)
    inter = np.zeros((len(rows), n_classes), dtype=np.int64)
    true = np.zeros_like(inter)
    pred = np.zeros_like(inter)
    for i, entries in enumerate(rows):
        for t, p, c in entries:
            t, p, c = int(t), int(p), int(c)
            if not (0 <= t < n_classes and 0 <= p < n_classes):
                raise ProbeError(f"per_class_iou: image {i} has label {max(t, p)} outside 0..{n_classes - 1}")
            if t == p:
                inter[i, t] += c
            true[i, t] += c
            pred[i, p] += c
    union = true + pred - inter
    out = []
    for label in range(n_classes):
        entry = {"label": label, "n_images": int(np.count_nonzero(true[:, label])), "value": None,
                 "ci_low": None, "ci_high": None}
        if rows and union[:, label].sum() > 0:
            stats = np.stack([inter[:, label], union[:, label]], axis=1)
            v, lo, hi = bootstrap_ci(stats, "ratio", resamples=resamples, seed=seed, level=level)
            entry.update(value=v, ci_low=None if np.isnan(lo) else lo, ci_high=None if np.isnan(hi) else hi)
        out.append(entry)
    return out
