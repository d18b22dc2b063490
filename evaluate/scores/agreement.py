"""Do the readings agree? Kendall's tau between the checkpoints' rankings under two measures, from records alone.

For one eval data set and a pair of measures (a, b), each checkpoint that reports both is a point (a_c, b_c).
tau is Kendall's tau-b of the two rankings (`kendall_tau_b`: ties handled as scipy.stats.kendalltau's default,
undefined (NaN) when either ranking is all ties). Its 95% interval comes from resampling images:

- the images are those every one of these checkpoints scored under both measures (sorted ids), so every
  resample is one draw of images shared by all checkpoints and both measures: the pairing holds;
- each resample recomputes every checkpoint's a and b from the records' per-image statistics on the same drawn
  images (`evaluate.scores.bootstrap.bootstrap_values`: `numpy.random.default_rng(seed)`, the draws of every interval in
  the ledger), then tau of the two resampled rankings; the interval is the percentile interval of those taus
  (resamples where tau is undefined are left out, as `evaluate.scores.bootstrap` does for undefined values);
- the point tau uses a and b on all those images (equal to the records' values when each measure scored the
  same images, as on a data set where every image has ground truth).

A measure without per-image statistics (mask AP, AP50, AR@10: COCOeval's values over the whole data set) cannot
be resampled: a pair with one gets the point tau of the records' values and no interval (n_images None).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from evaluate import EvaluationError


class AgreementError(EvaluationError):
    """Inputs that cannot be ranked (mismatched shapes); names the measures."""


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of rankings x and y along the last axis: (..., C) each -> (...,) float64.

    tau_b = sum_{i<j} s_x s_y / sqrt(sum s_x^2 * sum s_y^2) with s = sign of the pair's difference; NaN where
    either side is all ties. Equals scipy.stats.kendalltau (variant "b") on every row.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim < 1:
        raise AgreementError(f"kendall_tau_b: rankings of shapes {x.shape} and {y.shape} must match")
    i, j = np.triu_indices(x.shape[-1], k=1)
    sx = np.sign(x[..., i] - x[..., j])
    sy = np.sign(y[..., i] - y[..., j])
    num = (sx * sy).sum(axis=-1)
    den = np.sqrt((sx * sx).sum(axis=-1) * (sy * sy).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _stats(measures: Sequence[dict], ids: list[int]) -> list[tuple[Any, str]]:
    """Per-image statistics of each measure on `ids` (in that order), as (array, reducer) for bootstrap_values;
    miou confusions of all measures share one class count so their classes line up."""
    from evaluate.scores.measures import stats_array

    n_classes = None
    if measures[0]["reducer"] == "miou":
        labels = [max(int(t), int(p)) for m in measures for entries in m["per_image"] for t, p, _ in entries]
        n_classes = max(labels) + 1 if labels else 1
    out = []
    for m in measures:
        pos = {int(i): k for k, i in enumerate(m["image_ids"])}
        arr, reducer = stats_array([m["per_image"][pos[i]] for i in ids], m["reducer"], n_classes)
        out.append((arr, reducer))
    return out


def pair_agreement(a: Mapping[str, dict], b: Mapping[str, dict], *, resamples: int, seed: int,
                   level: float = 0.95) -> dict[str, Any]:
    """tau between measures a and b: `a`, `b` map checkpoint -> the record's measure entry (MEASURE_FIELDS).

    Returns {"checkpoints": sorted names in both, "n_images": images resampled (None without per-image
    statistics), "tau", "ci_low", "ci_high" (None where undefined), "values_a", "values_b" (each checkpoint's
    value on those images in its measure's unit, `measure_scale`: percent, nats for the attention entropy, in
    checkpoint order)}.
    """
    from evaluate.scores.bootstrap import bootstrap_values
    from evaluate.scores.measures import measure_scale

    names = sorted(set(a) & set(b))
    out: dict[str, Any] = {"checkpoints": names, "n_images": None, "tau": None, "ci_low": None, "ci_high": None,
                           "values_a": [a[c]["value"] for c in names], "values_b": [b[c]["value"] for c in names]}
    if len(names) < 2:
        return out
    pairable = all(m[c]["reducer"] is not None for m in (a, b) for c in names)
    ids = sorted(set.intersection(*(set(int(i) for i in m[c]["image_ids"]) for m in (a, b) for c in names)))
    if not pairable or not ids:
        if all(v is not None for v in out["values_a"] + out["values_b"]):
            tau = float(kendall_tau_b(np.array(out["values_a"]), np.array(out["values_b"])))
            out["tau"] = None if np.isnan(tau) else tau
        return out
    stats = _stats([a[c] for c in names], ids) + _stats([b[c] for c in names], ids)
    values, resampled = bootstrap_values(stats, resamples=resamples, seed=seed)
    k = len(names)
    tau = float(kendall_tau_b(values[:k], values[k:]))
    taus = kendall_tau_b(resampled[:k].T, resampled[k:].T)
    finite = taus[~np.isnan(taus)]
    lo = hi = None
    if finite.size:
        lo, hi = (float(q) for q in np.percentile(finite, [100 * (1 - level) / 2, 100 * (1 + level) / 2]))
    out.update(n_images=len(ids), tau=None if np.isnan(tau) else tau, ci_low=lo, ci_high=hi,
               values_a=[measure_scale(a[c]) * float(v) for c, v in zip(names, values[:k])],
               values_b=[measure_scale(b[c]) * float(v) for c, v in zip(names, values[k:])])
    return out


def rank_agreement(measures: Mapping[str, Mapping[str, dict]], order: Sequence[str], *, resamples: int,
                   seed: int, level: float = 0.95) -> list[dict[str, Any]]:
    """Every pair of measures of one eval data set: `measures` maps measure column -> checkpoint -> measure entry;
    pairs (order[i], order[j]) for i < j. Each entry is `pair_agreement`'s dict plus "measure_a", "measure_b"."""
    out = []
    for i, name_a in enumerate(order):
        for name_b in order[i + 1:]:
            entry = pair_agreement(measures[name_a], measures[name_b], resamples=resamples, seed=seed, level=level)
            out.append({"measure_a": name_a, "measure_b": name_b, **entry})
    return out
