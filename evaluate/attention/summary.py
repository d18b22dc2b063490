"""One checkpoint's attention-spread reading on one data set (docs/design.md §13), from its per-image arrays.

Input: the per-image (block, head) means of every image, in the data set's row order, as `network.tokens_and_spread`
gives them and the extract job would store them per shard:

    entropy   (n, blocks, heads) float32   mean over rows of H, nats
    spread    (n, blocks, heads) float32   mean over rows of e^H / N, a share of the patches in [1 / N, 1]

Output, for the ledger record:
- `attention_spread`: the last block's spread, averaged over its heads per image, then over images, in percent of
  the patches, with the bootstrap interval over images of every other measure (`make_measure`, reducer "mean");
- `attention_entropy`: the same for the last block's entropy, in nats (`scale` 1: the interval comes from the same
  draws, the value is not a percentage);
- the tables: the mean over images of both per (block, head), spread in percent, entropy in nats.
Means over images run in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluate.attention import AttentionError
from evaluate.scores.measures import PERCENT, make_measure

SPREAD = "attention_spread"  # measure: last block's mean e^H / N, percent of the patches
ENTROPY = "attention_entropy"  # measure: last block's mean H, nats
NATS = 1.0  # the entropy measure's scale: its per-image values are already nats


@dataclass(frozen=True)
class SpreadTables:
    """Means over images per (block, head): entropy (blocks, heads) float64 nats; spread (blocks, heads) float64,
    percent of the patches. Row b is block b + 1."""

    entropy: np.ndarray
    spread: np.ndarray

    def as_record(self) -> dict:
        """The record's `attention_tables`: {"blocks", "heads", "attention_entropy", "attention_spread"}, the last
        two as lists of `blocks` lists of `heads` floats (nats; percent)."""
        blocks, heads = self.entropy.shape
        return {"blocks": blocks, "heads": heads, ENTROPY: self.entropy.tolist(), SPREAD: self.spread.tolist()}


def check_reading(image_ids: Sequence[int], entropy: np.ndarray, spread: np.ndarray, where: str) -> None:
    """AttentionError naming `where` unless both arrays are (n, blocks, heads), n = len(image_ids), finite, the
    entropy >= 0 (up to float32 rounding) and the spread in (0, 1]."""
    entropy, spread = np.asarray(entropy), np.asarray(spread)
    if entropy.ndim != 3 or entropy.shape != spread.shape or entropy.shape[0] != len(image_ids):
        raise AttentionError(f"{where}: attention entropy {entropy.shape} and spread {spread.shape} must both be "
                             f"(images, blocks, heads) for {len(image_ids)} image ids")
    if entropy.shape[1] == 0 or entropy.shape[2] == 0:
        raise AttentionError(f"{where}: the attention reading has no blocks or no heads {entropy.shape}")
    if not (np.isfinite(entropy).all() and np.isfinite(spread).all()):
        raise AttentionError(f"{where}: the attention reading holds non-finite values")
    if (entropy < -1e-5).any() or (spread <= 0).any() or (spread > 1 + 1e-5).any():
        raise AttentionError(f"{where}: the attention reading is out of range (entropy must be >= 0 nats, spread "
                             f"in (0, 1]; found entropy >= {entropy.min():.4g}, spread in "
                             f"[{spread.min():.4g}, {spread.max():.4g}])")


def spread_tables(entropy: np.ndarray, spread: np.ndarray) -> SpreadTables:
    """Means over images: entropy, spread (n, blocks, heads) -> SpreadTables (blocks, heads) float64."""
    return SpreadTables(np.asarray(entropy, np.float64).mean(0),
                        PERCENT * np.asarray(spread, np.float64).mean(0))


def spread_measures(image_ids: Sequence[int], entropy: np.ndarray, spread: np.ndarray, *, resamples: int,
                    seed: int, where: str = "attention reading") -> list[dict]:
    """The record's two measure entries, `attention_spread` (percent) and `attention_entropy` (nats).

    image_ids: the n images in row order; entropy, spread: (n, blocks, heads). Per image the last block's values
    are averaged over its heads (float64); the measures are their means over images with percentile bootstrap
    intervals (`resamples`, `seed`: the config's `bootstrap`). No image is left out: the reading needs no label.
    """
    check_reading(image_ids, entropy, spread, where)
    ids = [int(i) for i in image_ids]
    boot = {"resamples": resamples, "seed": seed, "reducer": "mean", "image_ids": ids}
    last_spread = np.asarray(spread, np.float64)[:, -1].mean(-1)
    last_entropy = np.asarray(entropy, np.float64)[:, -1].mean(-1)
    return [
        make_measure(SPREAD, per_image=last_spread.tolist(), **boot),
        make_measure(ENTROPY, per_image=last_entropy.tolist(), scale=NATS, **boot),
    ]


def spread_summary(image_ids: Sequence[int], entropy: np.ndarray, spread: np.ndarray, *, resamples: int, seed: int,
                   where: str = "attention reading") -> tuple[list[dict], dict]:
    """(measures, tables) of a checkpoint on a data set: `spread_measures` and `spread_tables(...).as_record()`."""
    measures = spread_measures(image_ids, entropy, spread, resamples=resamples, seed=seed, where=where)
    return measures, spread_tables(entropy, spread).as_record()
