"""The measures of a ledger record: per-image statistics, their reducer, value and bootstrap interval.

docs/design.md §6-7. A measure with a `reducer` keeps the unit-free per-image inputs of `evaluate.scores.bootstrap`
(Jaccard in [0, 1], [num, den] pairs, sparse confusions [[true, pred, count], ...]) and reports value and interval
in percent (PERCENT x reducer), so tables and paired bootstraps are rebuilt from records alone. A measure without a
reducer (mask AP) carries its value only. A measure whose unit is not a percentage (the attention entropy, in nats:
docs/design.md §13) is reported as `scale` x reducer and says so in its entry's `scale` field; every other entry has
no such field and its scale is PERCENT (`measure_scale`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from evaluate.plumbing.atomic import plain_json
from evaluate.scores import ScoreError, catalogue
from evaluate.scores.bootstrap import bootstrap_ci

MEASURE_FIELDS = (
    "measure", "value", "ci_low", "ci_high", "n_images", "n_left_out", "reducer", "image_ids", "per_image",
)
REDUCERS = ("mean", "ratio", "miou", "max-mean")
PERCENT = 100.0  # bootstrappable measures are reported as PERCENT x the unit-free reducer of their per_image stats


class MeasureError(ScoreError):
    """A measure entry cannot be built from what was given; the message names the measure."""


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def make_measure(
    measure: str,
    *,
    image_ids: Sequence[int],
    per_image: Sequence[Any],
    reducer: str | None,
    n_left_out: int = 0,
    value: float | None = None,
    resamples: int | None = None,
    seed: int | None = None,
    level: float = 0.95,
    scale: float = PERCENT,
) -> dict:
    """A record's measure entry. `measure`: its name, an entry of `evaluate.scores.catalogue`.

    With a `reducer` the per-image statistics are the unit-free inputs of `evaluate.scores.bootstrap` ("mean": per-image
    float, e.g. Jaccard in [0, 1]; "ratio": per-image [num, den]; "miou": per-image sparse confusion
    [[true, pred, count], ...]) and value, ci_low, ci_high are PERCENT x `bootstrap_ci` (every bootstrappable
    measure is reported in percent; an undefined interval is null). `value` must then be None. Without a reducer
    (e.g. mask AP) `value` is required, the interval is null and `per_image` may be empty.
    scale: what the reducer is multiplied by (PERCENT unless the per-image values are already in the measure's unit,
    e.g. 1.0 for an entropy in nats); any other scale is recorded in the entry as `scale`.
    """
    catalogue.measure(measure)  # one entry of the catalogue per measure: a name without one is refused here
    lo = hi = None
    if reducer is not None:
        if reducer not in REDUCERS:
            raise MeasureError(f"measure {measure}: unknown reducer {reducer!r} (one of {', '.join(REDUCERS)})")
        if value is not None:
            raise MeasureError(f"measure {measure}: with reducer {reducer!r} the value comes from per_image; "
                              "pass value=None")
        if len(per_image) != len(image_ids):
            raise MeasureError(f"measure {measure}: {len(per_image)} per_image entries for {len(image_ids)} images")
        if resamples is None or seed is None:
            raise MeasureError(f"measure {measure}: a bootstrapped measure needs the run's bootstrap resamples and "
                               "seed (config.yaml: bootstrap)")
        if len(image_ids):
            stats, scores_reducer = stats_array(per_image, reducer)
            v, lo, hi = (scale * x for x in bootstrap_ci(stats, scores_reducer, resamples=resamples, seed=seed,
                                                        level=level))
            value, lo, hi = _finite_or_none(v), _finite_or_none(lo), _finite_or_none(hi)
    elif value is None:
        raise MeasureError(f"measure {measure}: a measure without a reducer needs its value")
    entry = {
        "measure": measure, "value": value, "ci_low": lo, "ci_high": hi, "n_images": len(image_ids),
        "n_left_out": n_left_out, "reducer": reducer, "image_ids": list(image_ids), "per_image": list(per_image),
    }
    if scale != PERCENT:
        entry["scale"] = float(scale)
    return plain_json(entry)


def measure_scale(entry: dict) -> float:
    """What a measure entry's reducer is multiplied by to give its value: its `scale` field, else PERCENT."""
    return float(entry.get("scale", PERCENT))


def stats_array(per_image: Sequence[Any], reducer: str, n_classes: int | None = None) -> tuple[np.ndarray, str]:
    """Per-image statistics as stored in a record -> (array, reducer name) for `evaluate.scores.bootstrap`.

    mean -> float64 (n,), "mean"; ratio -> float64 (n, 2), "ratio"; max-mean -> float64 (n, T) per-image curves,
    "max-mean" (the value is the largest over T of the mean over images: a saliency maxF); miou -> int64 (n, 3, K) counts
    [intersection, true, predicted] per class from the sparse [[true, pred, count], ...] lists, "miou-counts"
    (K = `n_classes` or one more than the largest label seen; classes no image has are left out by the reducer).
    """
    if reducer == "mean":
        return np.asarray(per_image, dtype=np.float64).reshape(-1), "mean"
    if reducer == "ratio":
        return np.asarray(per_image, dtype=np.float64).reshape(-1, 2), "ratio"
    if reducer == "max-mean":
        return np.asarray(per_image, dtype=np.float64).reshape(len(per_image), -1), "max-mean"
    if reducer == "miou":
        labels = [max(int(t), int(p)) for entries in per_image for t, p, _ in entries]
        k = n_classes if n_classes is not None else (max(labels) + 1 if labels else 1)
        counts = np.zeros((len(per_image), 3, k), dtype=np.int64)
        for i, entries in enumerate(per_image):
            for t, p, c in entries:
                t, p, c = int(t), int(p), int(c)
                if t == p:
                    counts[i, 0, t] += c
                counts[i, 1, t] += c
                counts[i, 2, p] += c
        return counts, "miou-counts"
    raise MeasureError(f"unknown reducer {reducer!r} (one of {', '.join(REDUCERS)})")


def decoder_measures(dataset: Any, results: Sequence[dict], *, resamples: int, seed: int) -> list[dict]:
    """The decoder's measures of one eval data set: Jaccard and CorLoc (per image, bootstrapped), AP, AP50, AR@10.

    dataset: the opened `CocoDataset`; results: COCO results (RLE masks, scores) of its images.
    """
    from evaluate.scores.masks import coco_mask_ap, corloc_hits, jaccard_per_image

    boot = {"resamples": resamples, "seed": seed}
    jac = jaccard_per_image(dataset, results)
    cor = corloc_hits(dataset, results)
    ap = coco_mask_ap(dataset.coco, results)
    measures = [
        make_measure("jaccard", image_ids=jac.image_ids, per_image=jac.values.tolist(), reducer="mean",
                     n_left_out=jac.n_left_out, **boot),
        make_measure("corloc", image_ids=cor.image_ids, per_image=cor.values.tolist(), reducer="mean",
                     n_left_out=cor.n_left_out, **boot),
    ]
    for name in ("ap", "ap50", "ar10"):
        measures.append(make_measure(name, image_ids=list(dataset.image_ids), per_image=[], reducer=None,
                                     value=ap[name]))
    return measures
