"""The propagation's settings (docs/design.md §12), apart from the propagation itself: the workflow's own process
checks the config's `video:` section with them at every start, without importing torch."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from evaluate import ConfigError
from evaluate.readings.frames import check_height


@dataclass(frozen=True)
class PropagationSettings:
    """The propagation's settings (DINO's defaults: height 480, n_last_frames 7, topk 5, neighbourhood 12,
    temperature 0.1; given by the config, never defaulted here).

    height: the frames480 short side, a multiple of 16 (p 14 networks round it down to a multiple of 14);
    n_last_frames: previous frames in the context besides frame 0 (0: frame 0 alone); topk: weights kept per query;
    neighbourhood: the window's half-size in patches (0: the whole frame, as DINO's code treats 0); temperature: of
    exp(cos / temperature).
    """

    height: int
    n_last_frames: int
    topk: int
    neighbourhood: int
    temperature: float

    def __post_init__(self):
        try:
            check_height(self.height)
        except ValueError as exc:
            raise ConfigError(f"video propagation setting height: {exc}") from None
        for field, low in (("n_last_frames", 0), ("topk", 1), ("neighbourhood", 0)):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"video propagation setting {field} must be an integer >= {low}, got {value!r}")
        if isinstance(self.temperature, bool) or not (isinstance(self.temperature, (int, float))
                                                      and math.isfinite(self.temperature) and self.temperature > 0):
            raise ConfigError(f"video propagation setting temperature must be a positive number, "
                              f"got {self.temperature!r}")

    @property
    def name(self) -> str:
        """The settings in one token, e.g. `h480-n7-k5-r12-t0.1` (the ledger's setting)."""
        return (f"h{self.height}-n{self.n_last_frames}-k{self.topk}-r{self.neighbourhood}-"
                f"t{float(self.temperature):g}")

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of_config(cls, section: Mapping[str, Any]) -> PropagationSettings:
        """The settings of the config's `video:` section (validated: every setting present), whose other keys
        (e.g. `threads`) change no number and are left out."""
        return cls(**{f.name: section[f.name] for f in fields(cls)})
