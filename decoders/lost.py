"""LOST's decoder for object discovery (docs/design.md §15), registered as `lost`: keys-native -> boxes.

Per image, the last block's patch keys K (N, D) on the padded grid (gh, gw), N = gh * gw, raw (not normalised):
A = K K^T (float64); degree_i = #{j != i : A_ij > 0}; patches sorted by degree ascending, ties by patch index
(LOST's own `argsort` leaves ties in an undefined order); seed = the first; similars = those of the first k
(k = 100, fixed) whose A[seed, j] > 0; M = the sum of the rows A[j] over the similars; the object is the
4-connected component of M > 0 holding the seed; its box is `decoders.boxes.box_of`.

The seed is always in M > 0 when its key is not zero (A[seed, seed] > 0 makes it a similar, and every similar j
adds A[j, seed] > 0). A zero seed key (never met on a real network) gives an empty component: no box, a miss;
`LostStats.empty` counts it. A is decided in float64 on the stored keys (LOST computes it in float32 on the GPU:
dot products within float32's rounding of 0 may fall on the other side there).
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, fields as dc_fields
from typing import Sequence

import numpy as np
import scipy.ndimage

from decoders.boxes import FixedSettings, fixed_grid
from decoders.ncut.cut import GridMask, check_keys
from decoders.registry import register

NAME = "lost"
READS = "keys-native"
GIVES = "boxes"


@dataclass(frozen=True)
class LostSettings(FixedSettings):
    """LOST's published setting: k = 100 (how many of the lowest-degree patches may join the seed)."""

    DECODER = "lost"
    k: int = 100


Settings = LostSettings


@dataclass
class LostStats:
    """images: decoded; tied_seeds: images whose lowest degree is shared (the seed is the lowest index among them);
    empty: images whose seed key is zero (empty component, no box)."""

    images: int = 0
    tied_seeds: int = 0
    empty: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def add(self, other: "LostStats") -> None:
        for f in dc_fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


Stats = LostStats


def settings_grid(spec) -> list[LostSettings]:
    """The single fixed setting (see `decoders.boxes.fixed_grid`)."""
    return fixed_grid(LostSettings, spec)


def component(keys, grid: Sequence[int], *, k: int = 100, stats: LostStats | None = None) -> np.ndarray:
    """The seed's 4-connected component of M > 0 of one image: keys float (gh * gw, D), grid (gh, gw) ->
    bool (gh, gw). Pure; `stats` counts tied seeds and empty components."""
    keys64, (gh, gw) = check_keys(keys, grid)
    stats = stats if stats is not None else LostStats()
    affinity = keys64 @ keys64.T
    positive = affinity > 0
    np.fill_diagonal(positive, False)
    degree = positive.sum(axis=1)
    order = np.argsort(degree, kind="stable")  # ascending, ties by patch index
    seed = int(order[0])
    stats.images += 1
    if degree.size > 1 and degree[order[1]] == degree[seed]:
        stats.tied_seeds += 1
    potentials = order[: int(k)]
    similars = potentials[affinity[seed, potentials] > 0]
    scores = affinity[similars].sum(axis=0)
    labels, _ = scipy.ndimage.label((scores > 0).reshape(gh, gw))  # default structure: 4-connectivity
    label = labels.ravel()[seed]
    if label == 0:
        stats.empty += 1
        return np.zeros((gh, gw), dtype=bool)
    return labels == label


def decode(keys, settings: LostSettings, grid: Sequence[int], *, stats: LostStats | None = None) -> list:
    """One GridMask: the object's component (score 1.0: LOST ranks nothing), none when the component is empty."""
    mask = component(keys, grid, k=settings.k, stats=stats)
    return [GridMask(mask=mask, score=1.0, ncut=float("nan"))] if mask.any() else []


def sweep(keys, settings_list: Sequence[LostSettings], grid: Sequence[int], *,
          stats: LostStats | None = None) -> list[list[GridMask]]:
    """decode per setting (there is only one)."""
    return [decode(keys, settings, grid, stats=stats) for settings in settings_list]


register(sys.modules[__name__])
