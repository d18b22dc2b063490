"""The geometry of the two readings (docs/design.md §2-§3), written once: input sizes, patch grids, feature width.

    keys480     480 x 480 input  -> 30 x 30 patches -> keys480   (900, 384)
    tokens224   224 x 224 input  -> 14 x 14 patches -> tokens224 (196, 384)

Every supported backbone (the ViT-S/16 family, XCiT-S12/16) cuts 16 x 16 patches and is 384 wide; its position
table (ViT) is trained for the tokens224 grid.
"""

from __future__ import annotations

PATCH = 16  # pixels per patch side
WIDTH = 384  # the backbone's width: every feature row has this many values

KEYS480_SIZE = 480  # the keys480 reading's input side
TOKENS224_SIZE = 224  # the tokens224 reading's input side
KEYS480_GRID = KEYS480_SIZE // PATCH  # patches per side of keys480
TOKENS224_GRID = TOKENS224_SIZE // PATCH  # patches per side of tokens224

# the per-image array of each feature kind: (rows = patches, row by row; WIDTH)
KINDS = {
    "keys480": (KEYS480_GRID * KEYS480_GRID, WIDTH),
    "tokens224": (TOKENS224_GRID * TOKENS224_GRID, WIDTH),
}
