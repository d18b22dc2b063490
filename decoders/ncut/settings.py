"""Settings of the normalized-cut decoder (docs/design.md §5): one frozen, validated value per way of cutting.

A setting's `name` is its identity everywhere outside Python: in file names under results/decoder/ and in the
ledger's `setting` column. It is built only from [A-Za-z0-9._=,-], lists every field in declaration order and
round-trips through `NcutSettings.from_name`.

Every field is given: the run's defaults (`decoder.centre`, `decoder.masks`, the sweep grid `decoder.sweep`) live
in workflow/schemas/config.schema.yaml alone. The presets are the published methods' own settings.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable, Mapping

from decoders.registry import SettingsError

SPLITS = ("mean", "zero", "median")
FOREGROUNDS = ("seed", "corners")
COMPONENTS = ("seed", "all")
MAX_MASKS = 50

# Short labels of the fields inside `.name` (stable: changing one renames every stored result).
_NAME_LABELS = {
    "centre": "centre",
    "tau": "tau",
    "eps": "eps",
    "split": "split",
    "foreground": "fg",
    "component": "cc",
    "masks": "masks",
}
_NAME_CHARS = re.compile(r"^[A-Za-z0-9._=,-]+$")


def _float_text(value: float) -> str:
    """Shortest round-trip text of a float in [0, 1): '0.2', '1e-05', '0.0' (never '+', never spaces)."""
    return repr(float(value))


@dataclass(frozen=True)
class NcutSettings:
    """One way of cutting (docs/design.md §5).

    centre:     subtract the image's mean key before normalising (False reproduces TokenCut / MaskCut).
    tau:        affinity threshold on cosine similarity, 0 <= tau < 1: A = 1 where S > tau, else eps.
    eps:        affinity below the threshold, 0 < eps < 1 (keeps the graph connected).
    split:      where the eigenvector x is cut: "mean", "zero" or "median" of x; foreground = x > threshold side
                or the other, chosen by `foreground`.
    foreground: "seed" (TokenCut: the side holding the patch of largest |x|) or "corners" (MaskCut: the seed rule,
                then flip when >= 3 of the grid's 4 corner patches are foreground).
    component:  "seed" (keep the 4-connected component holding the seed patch) or "all" (the whole side).
    masks:      how many masks per image at most (MaskCut style), 1 <= masks <= 50.
    """

    centre: bool
    tau: float
    eps: float
    split: str
    foreground: str
    component: str
    masks: int

    def __post_init__(self) -> None:
        if not isinstance(self.centre, bool):
            raise SettingsError(f"setting 'centre' must be true or false, got {self.centre!r}")
        for field_name, low_open in (("tau", False), ("eps", True)):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SettingsError(f"setting '{field_name}' must be a number, got {value!r}")
            value = float(value)
            if not math.isfinite(value):
                raise SettingsError(f"setting '{field_name}' must be finite, got {value!r}")
            if low_open and not 0.0 < value < 1.0:
                raise SettingsError(f"setting '{field_name}' must satisfy 0 < {field_name} < 1, got {value!r}")
            if not low_open and not 0.0 <= value < 1.0:
                raise SettingsError(f"setting '{field_name}' must satisfy 0 <= {field_name} < 1, got {value!r}")
            object.__setattr__(self, field_name, value + 0.0)  # -0.0 -> 0.0, int -> float
        for field_name, allowed in (("split", SPLITS), ("foreground", FOREGROUNDS), ("component", COMPONENTS)):
            value = getattr(self, field_name)
            if value not in allowed:
                raise SettingsError(f"setting '{field_name}' must be one of {', '.join(allowed)}; got {value!r}")
        if isinstance(self.masks, bool) or not isinstance(self.masks, int) or not 1 <= self.masks <= MAX_MASKS:
            raise SettingsError(f"setting 'masks' must be an integer from 1 to {MAX_MASKS}, got {self.masks!r}")

    @property
    def name(self) -> str:
        """Stable short identity, e.g. 'centre=1,tau=0.2,eps=1e-05,split=mean,fg=seed,cc=seed,masks=1'."""
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                text = "1" if value else "0"
            elif isinstance(value, float):
                text = _float_text(value)
            else:
                text = str(value)
            parts.append(f"{_NAME_LABELS[f.name]}={text}")
        name = ",".join(parts)
        assert _NAME_CHARS.match(name), name
        return name

    @classmethod
    def from_name(cls, name: str) -> "NcutSettings":
        """Inverse of `.name`; an unknown or malformed name raises SettingsError quoting it."""
        labels = {label: field_name for field_name, label in _NAME_LABELS.items()}
        values: dict[str, Any] = {}
        for part in str(name).split(","):
            label, sep, text = part.partition("=")
            if not sep or label not in labels or labels[label] in values:
                raise SettingsError(f"not an ncut setting name: {name!r} (bad part {part!r})")
            field_name = labels[label]
            try:
                if field_name == "centre":
                    if text not in ("0", "1"):
                        raise ValueError(text)
                    values[field_name] = text == "1"
                elif field_name in ("tau", "eps"):
                    values[field_name] = float(text)
                elif field_name == "masks":
                    values[field_name] = int(text)
                else:
                    values[field_name] = text
            except ValueError:
                raise SettingsError(f"not an ncut setting name: {name!r} (bad value in {part!r})") from None
        if set(values) != set(_NAME_LABELS):
            missing = sorted(set(_NAME_LABELS) - set(values))
            raise SettingsError(f"not an ncut setting name: {name!r} (missing {', '.join(missing)})")
        settings = cls(**values)
        if settings.name != name:
            raise SettingsError(f"not a canonical ncut setting name: {name!r} (canonical: {settings.name!r})")
        return settings

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "NcutSettings":
        """Build from a mapping (config, JSON) naming every field; a missing or unknown field is an error."""
        if not isinstance(data, Mapping):
            raise SettingsError(f"ncut settings must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in data if k not in known)
        if unknown:
            raise SettingsError(
                f"unknown ncut setting field(s) {', '.join(unknown)}; known: {', '.join(f.name for f in fields(cls))}"
            )
        missing = [f.name for f in fields(cls) if f.name not in data]
        if missing:
            raise SettingsError(f"ncut settings lack the field(s) {', '.join(missing)}")
        return cls(**dict(data))

    def replace(self, **changes: Any) -> "NcutSettings":
        """A copy with some fields changed (validated)."""
        return NcutSettings(**{**self.to_dict(), **changes})


TOKENCUT = NcutSettings(centre=False, tau=0.2, eps=1e-5, split="mean", foreground="seed", component="seed", masks=1)
MASKCUT = NcutSettings(centre=False, tau=0.15, eps=1e-5, split="mean", foreground="corners", component="seed", masks=3)


def settings_grid(spec: Mapping[str, Iterable]) -> list[NcutSettings]:
    """Cartesian product of the listed values: spec names every field with a list of its values.

    Order is fixed: fields vary in declaration order (centre, tau, eps, split, foreground, component, masks; the
    first outermost), each field's values in the order listed. An unknown or missing field, an empty list or a
    repeated value raises SettingsError. The workflow's spec is config.yaml's `decoder.sweep` with its `centre` and
    `masks` (`decoders.sweep_settings`; the schema's default grid has 144 settings).
    """
    if not isinstance(spec, Mapping):
        raise SettingsError(f"settings grid must be a mapping of field -> list of values, got {type(spec).__name__}")
    order = [f.name for f in fields(NcutSettings)]
    unknown = sorted(str(k) for k in spec if k not in order)
    if unknown:
        raise SettingsError(f"unknown ncut setting field(s) in grid: {', '.join(unknown)}; known: {', '.join(order)}")
    missing = [name for name in order if name not in spec]
    if missing:
        raise SettingsError(f"the ncut settings grid names no values for {', '.join(missing)}: every field needs "
                            "a list of values")
    axes: list[tuple[str, list]] = []
    for field_name in order:
        values = spec[field_name]
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise SettingsError(f"grid field '{field_name}' must be a list of values, got {values!r}")
        values = list(values)
        if not values:
            raise SettingsError(f"grid field '{field_name}' has no values")
        axes.append((field_name, values))
    grid: list[NcutSettings] = []
    seen: set[str] = set()
    for combo in itertools.product(*(values for _, values in axes)):
        settings = NcutSettings(**dict(zip((name for name, _ in axes), combo)))
        if settings.name in seen:
            raise SettingsError(f"settings grid repeats a value: {settings.name} appears twice")
        seen.add(settings.name)
        grid.append(settings)
    return grid
