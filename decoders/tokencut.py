"""TokenCut's decoder for object discovery (docs/design.md §15), registered as `tokencut`: keys-native -> boxes.

Per image, the last block's patch keys F (N, D) on the padded grid (gh, gw), N = gh * gw:
keys L2-normalised per patch; A = F F^T; A = 1 where A > tau, else eps (diagonal included; tau 0.2, eps 1e-5,
fixed); D = diag(row sums); v = the second-smallest generalised eigenvector of (D - A) v = lambda D v;
foreground = v > mean(v); seed = argmax |v|; if the seed is not foreground, foreground = not foreground; the object
is the 4-connected component of the foreground holding the seed; its box is `decoders.boxes.box_of`.

This is §5's cut with centre off, split mean, the seed rule and one mask (`decoders.ncut.settings.TOKENCUT`), so
it runs on that cut's solver: Lanczos on the normalised affinity with the dense reference
`scipy.linalg.eigh(D - A, D, subset_by_index=[1, 2])` as fallback; tests/test_discovery_decoders.py checks the
component and box against the dense reference written from the text above.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from decoders.boxes import FixedSettings, fixed_grid
from decoders.ncut.cut import GridMask, ncut_decode
from decoders.ncut.settings import TOKENCUT
from decoders.ncut.solver import SolverStats
from decoders.registry import register

NAME = "tokencut"
READS = "keys-native"
GIVES = "boxes"
Stats = SolverStats


@dataclass(frozen=True)
class TokenCutSettings(FixedSettings):
    """TokenCut's published settings: tau 0.2 (affinity threshold on cosine), eps 1e-5 (affinity below it)."""

    DECODER = "tokencut"
    tau: float = 0.2
    eps: float = 1e-5


Settings = TokenCutSettings


def settings_grid(spec) -> list[TokenCutSettings]:
    """The single fixed setting (see `decoders.boxes.fixed_grid`)."""
    return fixed_grid(TokenCutSettings, spec)


def component(keys, grid: Sequence[int], *, tau: float = 0.2, eps: float = 1e-5,
              stats: SolverStats | None = None) -> np.ndarray:
    """The seed's 4-connected foreground component of one image: keys float (gh * gw, D), grid (gh, gw) ->
    bool (gh, gw). Pure (no state kept between calls); `stats` counts how the eigenproblem was solved."""
    settings = TOKENCUT.replace(tau=float(tau), eps=float(eps))
    (first,) = ncut_decode(keys, settings, grid, stats=stats)
    return first.mask


def decode(keys, settings: TokenCutSettings, grid: Sequence[int], *, stats: SolverStats | None = None) -> list:
    """One GridMask: the object's component on the grid (score 1 - ncut / 2 of that component)."""
    return ncut_decode(keys, TOKENCUT.replace(tau=settings.tau, eps=settings.eps), grid, stats=stats)


def sweep(keys, settings_list: Sequence[TokenCutSettings], grid: Sequence[int], *,
          stats: SolverStats | None = None) -> list[list[GridMask]]:
    """decode per setting (there is only one)."""
    return [decode(keys, settings, grid, stats=stats) for settings in settings_list]


register(sys.modules[__name__])
