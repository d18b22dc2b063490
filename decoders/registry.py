"""The decoder registry: what a decoder is, its errors, and the table of decoders by name (docs/design.md §5).

A decoder turns one image's keys (N, C) on a (gh, gw) patch grid into masks on that grid. It declares what it
READS (a reading of `READINGS`: `keys480`, §3, or `keys-native`, the image at its own size, §15) and what it GIVES
(`masks`, scored as §6's masks, or `boxes`, the box of its first mask, scored as §15's `corloc_box`); the jobs pick
decoders by those two attributes (`decoders_that`), never by name. It is a module (or any
object) with the members of `Decoder` below, and it registers itself with `register` when imported; the package's
`decoders/__init__.py` imports every decoder module, one line each. Nothing outside a decoder's own module knows its
settings' fields: the workflow reaches them through `get_decoder(name).Settings`, and the config's
`decoder.sweep` (field -> list of values) is handed to the decoder's `settings_grid`, which checks it.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, Sequence

from evaluate import EvaluationError


class DecoderError(EvaluationError, ValueError):
    """Bad input to a decoder (keys, grid, settings): the message names the field or array and what is wrong."""


class SettingsError(DecoderError):
    """An invalid decoder setting; the message names the field, the value given and what is allowed."""


def square_grid(n_patches: int) -> tuple[int, int]:
    """The square patch grid (g, g) of N = g^2 keys: keys480's grid of any network (30 x 30 for p 16, 60 x 60 for
    p 8, 34 x 34 for p 14), read from the keys rather than from a constant; DecoderError if N is not a square."""
    n = int(n_patches)
    side = math.isqrt(n) if n >= 0 else 0
    if n < 4 or side * side != n:
        raise DecoderError(f"keys have {n_patches} rows, not a square grid of at least 2 x 2 patches: "
                           "pass the grid (rows, columns) explicitly")
    return side, side


class Decoder(Protocol):
    """What the workflow asks of a decoder.

    NAME:      its registry name (config `decoder.name`).
    READS:     the reading it decodes, one of READINGS ("keys480", "keys-native").
    GIVES:     what the workflow makes of its masks, one of GIVES ("masks": every mask; "boxes": the box of the
               first mask, `decoders.boxes.box_of`). Box decoders reproduce a paper: one fixed setting.
    Settings:  a frozen, validated settings type with the fields `centre` (bool) and `masks` (int, at most this
               many masks per image) among its own; `.name` a stable text identity made of [A-Za-z0-9._=,-] (file
               names, the ledger's `setting` column), `Settings.from_name(name)` its inverse, `.to_dict()` every
               field, `Settings.from_dict(d)` its inverse.
    Stats:     a counter type the decoder fills while decoding (`stats=`); its text goes to the job logs.
    settings_grid(spec) -> list[Settings]: the Cartesian product of `spec` (field -> list of values, every field
               named), in a fixed order; a SettingsError names an unknown field, a missing one or a bad value.
    decode(keys, settings, grid, *, stats) -> list[GridMask]: one image's keys float (N, C) -> its masks, objects
               with `.mask` bool (gh, gw) and `.score` float in [0, 1] (decoders.masks turns them into COCO results).
               grid: (gh, gw) with gh * gw = N (keys480's is `square_grid(N)`; decoders.shards passes it).
    sweep(keys, settings_list, grid, *, stats) -> list[list[GridMask]]: decode per setting, sharing work.
    """

    NAME: str
    READS: str
    GIVES: str
    Settings: type
    Stats: type

    def settings_grid(self, spec: Any) -> list: ...

    def decode(self, keys: Any, settings: Any, grid: Sequence[int], *, stats: Any) -> list: ...

    def sweep(self, keys: Any, settings_list: Sequence[Any], grid: Sequence[int], *, stats: Any) -> list[list]: ...


DECODERS: dict[str, Decoder] = {}
READINGS = ("keys480", "keys-native")
GIVES = ("masks", "boxes")
_MEMBERS = ("NAME", "READS", "GIVES", "Settings", "Stats", "settings_grid", "decode", "sweep")


def register(decoder: ModuleType | Any) -> None:
    """Add a decoder (its module, usually: `register(sys.modules[__name__])` as its last line) under its NAME."""
    missing = [member for member in _MEMBERS if not hasattr(decoder, member)]
    if missing:
        raise DecoderError(f"decoder {getattr(decoder, '__name__', decoder)!r} lacks {', '.join(missing)} "
                           "(see decoders.registry.Decoder)")
    name = decoder.NAME
    if decoder.READS not in READINGS or decoder.GIVES not in GIVES:
        raise DecoderError(f"decoder {name!r} reads {decoder.READS!r} and gives {decoder.GIVES!r}: it must read one "
                           f"of {', '.join(READINGS)} and give one of {', '.join(GIVES)}")
    if name in DECODERS and DECODERS[name] is not decoder:
        raise DecoderError(f"two decoders are named {name!r}")
    DECODERS[name] = decoder


def get_decoder(name: str) -> Decoder:
    """The decoder registered under `name`; an unknown name raises DecoderError listing the known ones."""
    try:
        return DECODERS[name]
    except (KeyError, TypeError):
        raise DecoderError(f"unknown decoder {name!r}; known decoders: {', '.join(sorted(DECODERS))}") from None


def decoders_that(*, reads: str | None = None, gives: str | None = None) -> list[str]:
    """The names of the registered decoders that read `reads` and give `gives` (None: any), sorted."""
    return sorted(name for name, decoder in DECODERS.items()
                  if (reads is None or decoder.READS == reads) and (gives is None or decoder.GIVES == gives))


def sweep_settings(decoder_config: dict) -> list:
    """The settings a sweep tries, from config.yaml's `decoder` section as the schema fills it in: the decoder's
    grid of `sweep` with the run's single `centre` and `masks`. The swept decoder must read keys480 and give masks
    (the box decoders run beside it, each with its fixed setting)."""
    decoder = get_decoder(decoder_config["name"])
    if (decoder.READS, decoder.GIVES) != ("keys480", "masks"):
        swept = ", ".join(decoders_that(reads="keys480", gives="masks"))
        raise DecoderError(f"decoder.name {decoder.NAME!r} reads {decoder.READS} and gives {decoder.GIVES}: the "
                           f"swept decoder reads keys480 and gives masks ({swept}); the box decoders run on every "
                           "data set of kind voc or coco-boxes by themselves")
    spec = dict(decoder_config["sweep"])
    spec["centre"] = [bool(decoder_config["centre"])]
    spec["masks"] = [int(decoder_config["masks"])]
    return decoder.settings_grid(spec)


def load_selected(path: str) -> tuple[Decoder, Any]:
    """(decoder, its settings) from `results/decoder/selected.yaml`, written by the select_setting job."""
    import yaml

    selected = yaml.safe_load(Path(path).read_text())
    decoder = get_decoder(selected["decoder"])
    return decoder, decoder.Settings.from_dict(selected["settings"])
