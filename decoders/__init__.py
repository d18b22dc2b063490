"""Label-free decoders on keys, by name.

A decoder turns one image's keys (N, C) on a (gh, gw) patch grid into masks on that grid. It is a module (or any
object) with this protocol (`Decoder`):

    NAME: str                                   the registry name
    Settings: type                              frozen, validated settings: `.name`, `.to_dict()`, `from_dict()`
    DEFAULT_GRID_SPEC: dict                     the sweep grid used when config.yaml names none
    settings_grid(spec) -> list[Settings]       the grid of a spec (field -> list of values), in a fixed order
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
    DEFAULT_GRID_SPEC: dict

    def settings_grid(self, spec: Any) -> list: ...

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


def sweep_settings(decoder_config: dict) -> list:
    """The settings a sweep tries, from config.yaml's `decoder` section (defaults filled in by the schema):
    `sweep` (the decoder's own DEFAULT_GRID_SPEC when absent) with the run's `centre` and `masks`."""
    decoder = get_decoder(decoder_config["name"])
    spec = dict(decoder_config.get("sweep") or decoder.DEFAULT_GRID_SPEC)
    spec["centre"] = [bool(decoder_config["centre"])]
    spec["masks"] = [int(decoder_config["masks"])]
    return decoder.settings_grid(spec)


def load_selected(path: str) -> tuple[Decoder, Any]:
    """(decoder, its settings) from `results/decoder/selected.yaml`, written by the select_setting job."""
    from pathlib import Path

    import yaml

    selected = yaml.safe_load(Path(path).read_text())
    decoder = get_decoder(selected["decoder"])
    return decoder, decoder.Settings.from_dict(selected["settings"])


__all__ = ["DECODERS", "Decoder", "DecoderError", "SettingsError", "get_decoder", "load_selected", "sweep_settings"]
