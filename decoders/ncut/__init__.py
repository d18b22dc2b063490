"""The mean-centred normalized-cut decoder (docs/design.md §5), registered as `ncut`.

Its modules: `settings` (NcutSettings, the TokenCut and MaskCut presets, the sweep grid), `cut` (keys -> masks: the
affinity, the bipartition, several masks per image) and `solver` (the cut's eigenvector: Lanczos, the dense
reference). This file is the decoder as the registry sees it (`decoders.registry.Decoder`).
"""

from __future__ import annotations

import sys

from decoders.ncut.cut import ncut_decode, ncut_sweep
from decoders.ncut.settings import NcutSettings, settings_grid
from decoders.ncut.solver import SolverStats
from decoders.registry import register

NAME = "ncut"
READS = "keys480"
GIVES = "masks"
Settings = NcutSettings
Stats = SolverStats
decode = ncut_decode
sweep = ncut_sweep
__all__ = ["NAME", "READS", "GIVES", "Settings", "Stats", "decode", "settings_grid", "sweep"]

register(sys.modules[__name__])
