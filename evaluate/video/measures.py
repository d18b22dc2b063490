"""The official semi-supervised DAVIS measures (docs/design.md §12): J, F, their mean, recall and decay, J&F.

Per object and scored frame (the first and last frame of a sequence are not scored; `evaluate.video.score`):
- J (`jaccard`): |P and G| / |P or G|, 1 when both are empty.
- F (`boundary_f`): the boundary F-measure. Boundary maps as DAVIS's `seg2bmap` (`boundary_map`: a pixel whose
  right, lower or lower-right neighbour differs; neighbours outside the image do not count); tolerance radius
  r = ceil(0.008 * sqrt(H^2 + W^2)) (`boundary_radius`, 8 at 854 x 480); a boundary pixel of one map matches when a
  boundary pixel of the other lies within r (dx^2 + dy^2 <= r^2: DAVIS's dilation with a disk); precision = matched
  pixels of P's boundary / P's boundary pixels, recall the other way; both boundaries empty -> P = R = 1, P's only
  -> P = 1, R = 0, G's only -> P = 0, R = 1; F = 2PR / (P + R), 0 when P + R = 0.
Per object over its n scored frames (`statistics`): mean; recall = share of frames > 0.5; decay = mean of bin 1 -
mean of bin 4, ids = round(linspace(1, n, 5)) - 1 (halves rounded up, as the official code's + 1e-10 does) and bins
[ids[i], ids[i + 1]] inclusive, in 64-bit indices (the official code's uint8 cast wraps beyond 256 frames).
Over a data set (`VideoScores`): J-Mean, F-Mean, recalls and decays average over OBJECTS (not sequences);
J&F-Mean = (J-Mean + F-Mean) / 2; all in percent. `VideoScores.per_sequence(measure)` keeps, per sequence, the sum of
its objects' unit-free values and its object count: the `ratio` reducer of the ledger (`evaluate.scores.masks`) on
those pairs gives the measure, and a bootstrap over them resamples sequences (an object's frames and a sequence's
objects stay together).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

BOUNDARY_FRACTION = 0.008  # of the image diagonal: the boundary tolerance
RECALL_THRESHOLD = 0.5
DECAY_BINS = 4
PERCENT = 100.0

# the data-set measures, in DAVIS's order, and their names as DAVIS prints them
MEASURES = ("jf_mean", "j_mean", "j_recall", "j_decay", "f_mean", "f_recall", "f_decay")
TITLES = {
    "jf_mean": "J&F-Mean", "j_mean": "J-Mean", "j_recall": "J-Recall", "j_decay": "J-Decay",
    "f_mean": "F-Mean", "f_recall": "F-Recall", "f_decay": "F-Decay",
}
OBJECT_STATISTICS = ("mean", "recall", "decay")


def jaccard(pred: np.ndarray, truth: np.ndarray) -> float:
    """J of two bool masks (H, W): |P and G| / |P or G|; 1 when both are empty."""
    union = int(np.count_nonzero(pred | truth))
    if union == 0:
        return 1.0
    return int(np.count_nonzero(pred & truth)) / union


def boundary_map(mask: np.ndarray) -> np.ndarray:
    """DAVIS's `seg2bmap` of a bool mask (H, W): True where the right, lower or lower-right neighbour differs.

    Neighbours outside the image do not count, so the image's border is never a boundary by itself; the
    bottom-right pixel never is one. bool (H, W).
    """
    mask = np.asarray(mask, dtype=bool)
    out = np.zeros_like(mask)
    out[:, :-1] |= mask[:, :-1] != mask[:, 1:]
    out[:-1, :] |= mask[:-1, :] != mask[1:, :]
    out[:-1, :-1] |= mask[:-1, :-1] != mask[1:, 1:]
    return out


def boundary_radius(height: int, width: int) -> int:
    """The boundary tolerance in pixels: ceil(0.008 * sqrt(H^2 + W^2)); 8 at 854 x 480."""
    return int(np.ceil(BOUNDARY_FRACTION * np.linalg.norm((float(height), float(width)))))


def _matched(points: np.ndarray, other: np.ndarray, radius: int) -> int:
    """How many True pixels of `points` lie within `radius` (Euclidean) of a True pixel of `other` (both non-empty).

    Computed on the box that holds both maps: every pixel of `other` is inside it, so the distances are exact.
    """
    rows, cols = np.nonzero(points | other)
    box = (slice(rows.min(), rows.max() + 1), slice(cols.min(), cols.max() + 1))
    distance = ndimage.distance_transform_edt(~other[box])
    return int(np.count_nonzero(points[box] & (distance <= radius)))


def boundary_f(pred: np.ndarray, truth: np.ndarray, radius: int) -> float:
    """F of two bool masks (H, W) with tolerance `radius` (see the module docstring for the empty cases)."""
    bp, bg = boundary_map(pred), boundary_map(truth)
    n_pred, n_truth = int(np.count_nonzero(bp)), int(np.count_nonzero(bg))
    if n_pred == 0 and n_truth == 0:
        precision, recall = 1.0, 1.0
    elif n_pred == 0:
        precision, recall = 1.0, 0.0
    elif n_truth == 0:
        precision, recall = 0.0, 1.0
    else:
        precision = _matched(bp, bg, radius) / n_pred
        recall = _matched(bg, bp, radius) / n_truth
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def frame_scores(pred: np.ndarray, truth: np.ndarray, n_objects: int) -> tuple[np.ndarray, np.ndarray]:
    """J and F of objects 1..n_objects in one frame: pred, truth (H, W) integer ids -> (J, F), each (M,) float64."""
    if pred.shape != truth.shape:
        raise ValueError(f"prediction {pred.shape} and truth {truth.shape} differ in size")
    radius = boundary_radius(*truth.shape)
    j = np.empty(n_objects)
    f = np.empty(n_objects)
    for k in range(1, n_objects + 1):
        p, g = pred == k, truth == k
        j[k - 1] = jaccard(p, g)
        f[k - 1] = boundary_f(p, g, radius)
    return j, f


def decay_bins(n: int) -> list[tuple[int, int]]:
    """The decay's four inclusive frame-index bins over n scored frames (int64 indices, no wrap)."""
    ids = (np.round(np.linspace(1, n, DECAY_BINS + 1) + 1e-10) - 1).astype(np.int64)
    return [(int(ids[i]), int(ids[i + 1])) for i in range(DECAY_BINS)]


def statistics(values: Sequence[float]) -> dict[str, float]:
    """Mean, recall (share > 0.5) and decay (bin 1 - bin 4) of one object's per-frame J or F: unit-free floats."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no scored frames")
    bins = [x[lo : hi + 1] for lo, hi in decay_bins(x.size)]
    return {
        "mean": float(x.mean()),
        "recall": float(np.mean(x > RECALL_THRESHOLD)),
        "decay": float(bins[0].mean() - bins[-1].mean()),
    }


@dataclass(frozen=True)
class ObjectScores:
    """One object's per-frame J and F over its sequence's scored frames: (n,) float64 each, in [0, 1]."""

    sequence: str
    object_id: int
    frames: tuple[str, ...]
    j: np.ndarray
    f: np.ndarray

    @property
    def name(self) -> str:
        """DAVIS's name of the object: `<sequence>_<id>`."""
        return f"{self.sequence}_{self.object_id}"

    def values(self) -> dict[str, float]:
        """The object's unit-free measures: j_mean, j_recall, j_decay, f_mean, f_recall, f_decay, jf_mean."""
        out = {f"j_{key}": value for key, value in statistics(self.j).items()}
        out.update({f"f_{key}": value for key, value in statistics(self.f).items()})
        out["jf_mean"] = (out["j_mean"] + out["f_mean"]) / 2
        return out


@dataclass(frozen=True)
class VideoScores:
    """A data set's scores: every object of every scored sequence, in sequence order, then object id."""

    objects: tuple[ObjectScores, ...]

    @property
    def sequences(self) -> list[str]:
        return list(dict.fromkeys(obj.sequence for obj in self.objects))

    def summary(self) -> dict[str, float]:
        """Each of MEASURES in percent, averaged over objects."""
        values = [obj.values() for obj in self.objects]
        return {m: PERCENT * float(np.mean([v[m] for v in values])) for m in MEASURES}

    def per_sequence(self, measure: str) -> list[list[float]]:
        """Per sequence (in `sequences` order): [sum of its objects' unit-free `measure`, its object count]."""
        if measure not in MEASURES:
            raise ValueError(f"unknown measure {measure!r}; one of {', '.join(MEASURES)}")
        sums: dict[str, list[float]] = {name: [0.0, 0.0] for name in self.sequences}
        for obj in self.objects:
            sums[obj.sequence][0] += obj.values()[measure]
            sums[obj.sequence][1] += 1
        return [sums[name] for name in self.sequences]

    def per_object(self) -> list[dict]:
        """One row per object: sequence, object, name, frames (scored), and each measure in percent."""
        rows = []
        for obj in self.objects:
            values = obj.values()
            rows.append({"sequence": obj.sequence, "object": obj.object_id, "name": obj.name,
                         "frames": len(obj.frames), **{m: PERCENT * values[m] for m in MEASURES}})
        return rows
