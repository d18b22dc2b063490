"""Label-free decoders on keys, by name.

A decoder turns one image's keys (N, C) on a (gh, gw) patch grid into masks on that grid. It is a module (or any
object) with this protocol (`Decoder`):

    NAME: str                                   the registry name
    Settings: type                              frozen, validated settings: `.name`, `.to_dict()`, `from_dict()`
    decode(keys, settings, grid) -> list[GridMask]
    sweep(keys, settings_list, grid) -> list[list[GridMask]]   same as decode per setting, sharing work

`GridMask` (decoders.ncut) holds `mask` bool (gh, gw), `score` in [0, 1] and `ncut`. decoders.masks turns grid
masks into image-size masks and COCO results. Adding a decoder = one file (decoders/<name>.py) + one line in
`DECODERS` below.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Protocol, Sequence

from decoders import ncut
from decoders.settings import DecoderError, SettingsError


class Decoder(Protocol):
    NAME: str
    Settings: type

    def decode(self, keys: Any, settings: Any, grid: Sequence[int]) -> list: ...

    def sweep(self, keys: Any, settings_list: Sequence[Any], grid: Sequence[int]) -> list[list]: ...


DECODERS: dict[str, ModuleType] = {
    "ncut": ncut,
}


def get_decoder(name: str) -> Decoder:
    """The decoder registered under `name`; an unknown name raises DecoderError listing the known ones."""
    try:
        return DECODERS[name]  # type: ignore[return-value]
    except (KeyError, TypeError):
        raise DecoderError(f"unknown decoder {name!r}; known decoders: {', '.join(sorted(DECODERS))}") from None


__all__ = ["DECODERS", "Decoder", "DecoderError", "SettingsError", "get_decoder"]
