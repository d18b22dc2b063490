"""What the box decoders share (docs/design.md §15): the box of a component, and their fixed settings.

The box decoders (`tokencut`, `lost`) reproduce a published protocol: their settings are fixed constants, recorded
with every result and never swept. `FixedSettings` is the settings type they derive from (a frozen dataclass whose
fields all have their protocol's value as default); `box_of` turns the object's component on the patch grid into a
box in pixels of the original image, as both papers' `detect_box` does.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

import numpy as np

from decoders.registry import DecoderError, SettingsError

_NAME_CHARS = re.compile(r"^[A-Za-z0-9._=,-]+$")


def box_of(component, patch: int, height: int, width: int) -> tuple[int, int, int, int] | None:
    """The box of a component: its rows and columns [min, max + 1) in patches, times `patch`, x clipped to `width`
    and y to `height` -> (x0, y0, x1, y1) ints in pixels of the original image; None for an empty component.

    component: bool (gh, gw) on the padded patch grid (row-major); patch: p; height, width: the image's own size."""
    grid = np.asarray(component, dtype=bool)
    if grid.ndim != 2:
        raise DecoderError(f"a component must be a 2-D grid (rows, columns), got shape {grid.shape}")
    if int(patch) < 1 or int(height) < 1 or int(width) < 1:
        raise DecoderError(f"patch, height and width must be positive, got {patch}, {height}, {width}")
    rows = np.flatnonzero(grid.any(axis=1))
    cols = np.flatnonzero(grid.any(axis=0))
    if rows.size == 0:
        return None
    p = int(patch)
    x0, x1 = int(cols[0]) * p, min((int(cols[-1]) + 1) * p, int(width))
    y0, y1 = int(rows[0]) * p, min((int(rows[-1]) + 1) * p, int(height))
    return x0, y0, x1, y1


@dataclass(frozen=True)
class FixedSettings:
    """A reproduced protocol's settings: every field defaults to the protocol's value and only that value is valid.

    Subclasses are frozen dataclasses with a class attribute DECODER (the decoder's name, for messages). `.name` is
    'field=value,...' in declaration order (floats by repr), `from_name`, `to_dict`, `from_dict` its inverses."""

    DECODER = "fixed"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not type(f.default) or value != f.default:
                raise SettingsError(f"{self.DECODER} reproduces its paper: setting '{f.name}' is fixed at "
                                    f"{f.default!r}, got {value!r}")

    @property
    def name(self) -> str:
        """e.g. 'tau=0.2,eps=1e-05' (stable: file names and the ledger's `setting` column)."""
        name = ",".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        assert _NAME_CHARS.match(name), name
        return name

    @classmethod
    def from_name(cls, name: str) -> "FixedSettings":
        """Inverse of `.name`; anything else raises SettingsError quoting it."""
        if str(name) != cls().name:
            raise SettingsError(f"not a {cls.DECODER} setting name: {name!r} (its only setting is {cls().name!r})")
        return cls()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FixedSettings":
        if not isinstance(data, Mapping):
            raise SettingsError(f"{cls.DECODER} settings must be a mapping, got {type(data).__name__}")
        known = [f.name for f in fields(cls)]
        if sorted(data) != sorted(known):
            raise SettingsError(f"{cls.DECODER} settings name exactly {', '.join(known)}; got {', '.join(map(str, data))}")
        return cls(**dict(data))


def fixed_grid(settings_type: type, spec: Any) -> list:
    """`settings_grid` of a reproduced protocol: an empty spec (or one listing only the fixed values) -> the single
    setting; anything else raises SettingsError (these protocols are not swept)."""
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise SettingsError(f"settings grid must be a mapping of field -> list of values, got {type(spec).__name__}")
    fixed = settings_type()
    for field_name, values in spec.items():
        allowed = getattr(fixed, str(field_name), None)
        if str(field_name) not in fixed.to_dict() or list(values) != [allowed]:
            raise SettingsError(f"{settings_type.DECODER} is reproduced, not swept: its settings are fixed at "
                                f"{fixed.name}; got {field_name}: {values!r}")
    return [fixed]
