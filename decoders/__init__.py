"""Label-free decoders on keys, by name (docs/design.md §5).

`decoders.registry` says what a decoder is (`Decoder`) and holds the table of decoders by name; `masks` turns grid
masks into image-size masks and COCO results; `shards` runs a shard of keys480 through a decoder. Each decoder is
one module (or package) that registers itself when imported; `ncut` is the mean-centred normalized cut
(keys480 -> masks); `tokencut` and `lost` are the object-discovery decoders (keys-native -> boxes, §15), whose
shared box rule and fixed settings are `boxes`.

Adding a decoder = one file, `decoders/<name>.py` (the members of `decoders.registry.Decoder`, ending with
`register(sys.modules[__name__])`), plus its import line below. `decoder.name` in config.yaml then accepts it.
"""

from __future__ import annotations

from decoders.registry import (
    DECODERS,
    Decoder,
    DecoderError,
    SettingsError,
    decoders_that,
    get_decoder,
    load_selected,
    square_grid,
    sweep_settings,
)

# The decoders, one line each: importing a decoder's module registers it.
from decoders import ncut  # noqa: F401
from decoders import tokencut  # noqa: F401
from decoders import lost  # noqa: F401

__all__ = ["DECODERS", "Decoder", "DecoderError", "SettingsError", "decoders_that", "get_decoder", "load_selected",
           "square_grid", "sweep_settings"]
