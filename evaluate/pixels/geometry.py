"""The geometry of the readings (docs/design.md §3, §11), written once: input sizes, patch grids, feature width.

Every size a reading has follows from the network's patch p and width D (`Geometry`):

    keys480     s x s input, s = p * round(480 / p)  -> (s / p)^2 patches   keys480   (N480, D)
    tokens224   224 x 224 input                      -> (224 / p)^2 patches tokens224 (N224, D)
    frames480   short side 480 (p 8, 16: DINO's rule) or 476 (p 14)          frames480 (h/p * w/p, D)

    network          p   D     keys480 grid (side)   tokens224 grid
    ViT-S/16, B/16   16  384+  30 x 30  (480)        14 x 14
    ViT-S/8, B/8     8   384+  60 x 60  (480)        28 x 28
    DINOv2 /14       14  384+  34 x 34  (476)        16 x 16

The seed's network (ViT-S/16, `SEED`) gives (900, 384) and (196, 384). A shard's meta.json records its geometry
(`Geometry.as_meta`); a shard written before the geometry was recorded is the seed's (`Geometry.from_meta`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

KEYS480_TARGET = 480  # the keys480 reading's nominal input side (MaskCut's), rounded to the patch multiple
TOKENS224_SIZE = 224  # the tokens224 reading's input side (the centre crop)
FRAMES_LONG_MULTIPLE = 64  # DINO's video rule rounds the long side down to a multiple of this (p 8 and 16)
HEAD_DIM = 64  # every ViT of the family has heads of 64 channels: D / 64 heads
GEOMETRY_FIELDS = ("patch", "width", "depth", "registers")


@dataclass(frozen=True)
class Geometry:
    """What sizes a network's readings have: patch p (pixels per side), width D, depth (blocks), registers R."""

    patch: int = 16
    width: int = 384
    depth: int = 12
    registers: int = 0

    @property
    def heads(self) -> int:
        """D / 64: the attention heads of every ViT of the family (XCiT's 8 x 48 is its registry entry's)."""
        return self.width // HEAD_DIM

    @property
    def keys480_side(self) -> int:
        """s = p * round(480 / p): 480 for p 8 and 16, 476 for p 14."""
        return self.patch * round(KEYS480_TARGET / self.patch)

    @property
    def keys480_grid(self) -> int:
        """Patches per side of keys480: 30 (p 16), 60 (p 8), 34 (p 14)."""
        return self.keys480_side // self.patch

    @property
    def tokens224_grid(self) -> int:
        """Patches per side of tokens224: 14 (p 16), 28 (p 8), 16 (p 14)."""
        if TOKENS224_SIZE % self.patch:
            raise ValueError(f"patch {self.patch} does not divide the {TOKENS224_SIZE}-px crop")
        return TOKENS224_SIZE // self.patch

    @property
    def kinds(self) -> dict[str, tuple[int, int]]:
        """The per-image array of each feature kind: (rows = patches, row by row; D)."""
        return {
            "keys480": (self.keys480_grid**2, self.width),
            "tokens224": (self.tokens224_grid**2, self.width),
        }

    def frames480_size(self, width: int, height: int, short: int) -> tuple[int, int]:
        """(new_w, new_h) of a `width` x `height` video frame read at short side `short` (docs/design.md §10, §11).

        p 8 and 16, DINO's rule in integers: the short side becomes `short` (a multiple of p) and the long side
        floor(short * long / short_side / 64) * 64, never below `short` (854 x 480 at 480 -> (832, 480)).
        p 14 (DINOv2): the short side is `short` rounded down to a multiple of 14 (480 -> 476) and the long side its
        proportional length rounded down to a multiple of 14, never below the short side (854 x 480 -> (840, 476)).
        """
        width, height = int(width), int(height)
        if width < 1 or height < 1:
            raise ValueError(f"frame size must be positive, got {width} x {height}")
        portrait = height > width
        long_px, short_px = (height, width) if portrait else (width, height)
        if FRAMES_LONG_MULTIPLE % self.patch == 0:
            side = short
            multiple = FRAMES_LONG_MULTIPLE
        else:
            side = short // self.patch * self.patch
            multiple = self.patch
        long = max(side, side * long_px // (short_px * multiple) * multiple)
        return (side, long) if portrait else (long, side)

    def as_meta(self) -> dict[str, Any]:
        """What meta.json records: patch, width, depth, registers and both grids."""
        return {**asdict(self), "keys480_grid": [self.keys480_grid] * 2, "tokens224_grid": [self.tokens224_grid] * 2}

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> "Geometry":
        """The geometry a meta.json records; the seed's (ViT-S/16) for one written before it was recorded."""
        if "patch" not in meta:
            return SEED
        return cls(**{field: int(meta[field]) for field in GEOMETRY_FIELDS})


SEED = Geometry()  # the seed's ViT-S/16 (docs/design.md §1): keys480 (900, 384), tokens224 (196, 384)

# The seed's sizes, for the code and tests that speak of the seed's network alone.
PATCH = SEED.patch  # pixels per patch side
WIDTH = SEED.width  # the seed's width
KEYS480_SIZE = SEED.keys480_side  # the seed's keys480 input side
KEYS480_GRID = SEED.keys480_grid  # patches per side of the seed's keys480
TOKENS224_GRID = SEED.tokens224_grid  # patches per side of the seed's tokens224
KINDS = SEED.kinds
