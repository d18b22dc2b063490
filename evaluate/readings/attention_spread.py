"""The attention-spread reading (`attention`) through a network (docs/design.md §13), in the pass that gives tokens224.

For every block and head of the ViT family (plain, LayerScale, Aug-ViT; any patch p and width D, D / 64 heads) the
attention rows are softmax(q k^T / 8) over the N patches (backbone form: no class token; N = (224 / p)^2 at 224 px:
196 for p 16, 784 for p 8, 256 for p 14; N and the heads are read from the network's own queries). Each row's
entropy H (nats, below) is reduced per image to two numbers per (block, head): the mean over
rows of H, and the mean over rows of e^H / N (the share of the N patches the row is worth). The queries and keys
are those the network's own attention used (`VisionTransformer.tokens_tapped`), so the tokens that come out are
`tokens(x)` bit for bit.

XCiT-S12/16 has no such rows (its attention weighs channels against channels): `patch_attention` is False there and
`tokens_and_spread` gives the tokens with None for the reading, never an error.

The entropy of an attention row: H = -sum_j a_j ln a_j in nats, with 0 ln 0 = 0.

A row of N weights has H in [0, ln N]: 0 for a row on one patch, ln N for a uniform row (at 224 px ln 196 = 5.278
nats for p 16, ln 784 = 6.664 for p 8, ln 256 = 5.545 for p 14). e^H is the number of patches whose equal shares
would be as spread out.

From the logits s of a row (the scores q k^T / sqrt(d)) the entropy is taken as H = -sum_j a_j ln a_j with
ln a = log_softmax(s) and a = e^{ln a}: every term a_j ln a_j is <= 0, so nothing cancels, a weight that underflows
to 0 contributes exactly 0, and no logarithm of a rounded weight is taken. Three passes over the N x N logits
(log_softmax, exp, one dot product per row) after the one batched product that makes them.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from evaluate.plumbing.atomic import atomic_path
from evaluate.readings import ReadingError
from evaluate.readings.runner import Reading, Shard

# The reading keeps its definition in both forms: rows over the patch keys of a backbone forward, in float32
# (docs/design.md §11, §13); it is a property of the weights.
ATTENTION = Reading("attention", form="backbone", precision="float32")
log = logging.getLogger("evaluate.readings.attention_spread")


class QueryPatchError(ReadingError):
    """A query patch outside the network's grid (config `figures.attention_patch`)."""


ABSENT = ("the network's attention runs across channels, not patches (XCiT): there are no attention rows over "
          "patches to measure")


def row_entropy(weights: Tensor) -> Tensor:
    """H of rows of weights: (..., N) float, each row non-negative and summing to 1 -> (...) same dtype, nats.

    0 ln 0 = 0 (`torch.special.entr`), so a one-hot row gives exactly 0.
    """
    return torch.special.entr(weights).sum(-1)


def logit_row_entropy(logits: Tensor) -> Tensor:
    """H of softmax(logits) along the last axis: (..., N) float, finite -> (...) same dtype, nats."""
    log_weights = logits.log_softmax(-1)
    return -torch.linalg.vecdot(log_weights.exp(), log_weights)


def qk_row_entropy(q: Tensor, k: Tensor) -> Tensor:
    """H of every attention row softmax(q k^T / sqrt(d)), head by head.

    q: (B, heads, N, d), k: (B, heads, M, d) float (any float dtype; autocast's float16 included); M = N in the
    network. Returns (B, heads, N) float32, row i of a head being query i's weights over the M keys. Computed in
    float32 with autocast off, whatever the network ran in: the logits of all images and heads in one batched
    product (scaled by 1 / sqrt(d) in it), then `logit_row_entropy`. Holds three (B * heads, N, M) float32 arrays at
    a time.
    """
    batch, heads, n, d = q.shape
    with torch.autocast(q.device.type, enabled=False):
        q3 = q.float().reshape(batch * heads, n, d)
        k3 = k.float().reshape(batch * heads, k.shape[-2], d)
        logits = torch.baddbmm(q3.new_zeros(()), q3, k3.transpose(1, 2), beta=0.0, alpha=d**-0.5)
        return logit_row_entropy(logits).reshape(batch, heads, n)


@dataclass(frozen=True)
class AttentionSpread:
    """Per image and (block, head), means over the attention rows.

    entropy: (B, blocks, heads) float32, the mean over rows of H in nats, in [0, ln N].
    spread: (B, blocks, heads) float32, the mean over rows of e^H / N, in [1 / N, 1].
    """

    entropy: Tensor
    spread: Tensor


def gives_attention_spread(model: nn.Module) -> bool:
    """Whether `model` has attention rows over patches (the ViT family: True; XCiT: False)."""
    return bool(getattr(model, "patch_attention", False))


def image_row_means(row_entropy: Tensor) -> tuple[Tensor, Tensor]:
    """(mean over rows of H, mean over rows of e^H / N): row_entropy (B, heads, N) float32 nats -> two (B, heads)."""
    n = row_entropy.shape[-1]
    return row_entropy.mean(-1), (row_entropy.exp() / n).mean(-1)


class _SpreadTap:
    """Collects each block's per-image row means, block by block (an `evaluate.networks.vit.AttentionTap`)."""

    def __init__(self) -> None:
        self.entropy: list[Tensor] = []
        self.spread: list[Tensor] = []

    def __call__(self, block: int, q: Tensor, k: Tensor) -> None:
        if block != len(self.entropy):
            raise ReadingError(f"attention tap: block {block} arrived after {len(self.entropy)} blocks")
        entropy, spread = image_row_means(qk_row_entropy(q, k))
        self.entropy.append(entropy)
        self.spread.append(spread)

    def result(self, blocks: int) -> AttentionSpread:
        if len(self.entropy) != blocks:
            raise ReadingError(f"attention tap: {len(self.entropy)} blocks seen, the network has {blocks}")
        return AttentionSpread(torch.stack(self.entropy, 1), torch.stack(self.spread, 1))


def tokens_and_spread(model: nn.Module, x: Tensor) -> tuple[Tensor, AttentionSpread | None]:
    """Block 12's output and the attention-spread reading from one forward pass.

    x: (B, 3, H, W) float32, sides multiples of p (224 x 224 for tokens224). Returns (tokens (B, N, D) float32,
    equal bit for bit to `model.tokens(x)`; the reading, entropy and spread each (B, blocks, heads) float32), or
    (tokens, None) for a network without patch attention (XCiT).
    """
    if not gives_attention_spread(model):
        return model.tokens(x), None
    tap = _SpreadTap()
    tokens = model.tokens_tapped(x, tap)
    return tokens, tap.result(len(model.blocks))


def query_patch(patch: int | None, n_patches: int, size: tuple[int, int]) -> int:
    """The query's index, row by row, in the (gh, gw) grid of square patches that cuts an input of `size` (H, W) into
    `n_patches`: `patch` checked against that grid, or its centre patch (row gh // 2, column gw // 2) for None (at
    224 px: 105 for p 16, 406 for p 8, 136 for p 14). ReadingError for an index outside the grid."""
    height, width = (int(v) for v in size)
    p = math.isqrt(height * width // max(1, int(n_patches)))
    gh, gw = (height // p, width // p) if p else (0, 0)
    if gh * gw != n_patches:
        raise ReadingError(f"{n_patches} patches do not cut a {width} x {height} input into square patches")
    if patch is None:
        return (gh // 2) * gw + gw // 2
    if isinstance(patch, bool) or int(patch) != patch or not 0 <= patch < n_patches:
        raise QueryPatchError(f"patch {patch!r} out of range for {n_patches} patches (the {gh} x {gw} grid of "
                             f"{p}-px patches: 0 .. {n_patches - 1})")
    return int(patch)


def attention_rows(model: nn.Module, x: Tensor, patch: int | None, block: int = -1) -> Tensor:
    """The attention weights of one query patch in one block, per head: what a head looks at from `patch`.

    x: (B, 3, H, W) float32; patch: the query's index in the grid, row by row (0 .. N - 1), or None for the grid's
    centre patch (`query_patch`: at 224 px (7, 7) = 105 for p 16, (14, 14) = 406 for p 8, (8, 8) = 136 for p 14);
    block: 0-based, negative from the end (default the last). Returns (B, heads, N) float32, each row
    softmax(q_patch k^T / sqrt(d)) over the N patches, summing to 1; N and the heads are the network's own.
    """
    if not gives_attention_spread(model):
        raise ReadingError(f"{type(model).__name__} has no attention over patches (its attention runs across "
                             "channels): there are no attention rows to show")
    depth = len(model.blocks)
    index = block + depth if block < 0 else block
    if not 0 <= index < depth:
        raise ReadingError(f"attention rows: block {block} out of range for {depth} blocks")
    rows: list[Tensor] = []

    def tap(i: int, q: Tensor, k: Tensor) -> None:
        if i == index:
            at = query_patch(patch, q.shape[-2], tuple(x.shape[-2:]))
            with torch.autocast(q.device.type, enabled=False):
                query = q[:, :, at : at + 1].float() * q.shape[-1] ** -0.5
                rows.append((query @ k.float().transpose(-2, -1)).softmax(-1)[:, :, 0])

    with torch.inference_mode():
        model.tokens_tapped(x, tap)
    return rows[0]


def write_spread(shard: Shard, out: str | os.PathLike, *, inputs_folder: str | os.PathLike, workers: int) -> dict:
    """The runner's body: the per-image reading of the shard's images, from the shard's decoded 224-px inputs
    (`inputs_folder`; decoded here, to the same bytes, where `features.keep: false` dropped it), into the .npz `out`:
    `image_ids` (n,) int64, `entropy` and `spread` (n, blocks, heads) float32; for a network without patch attention
    (XCiT) the ids alone. Returns what the meta says of it (`patch_attention`: whether the reading exists)."""
    from evaluate.pixels.images import normalise_pixels
    from evaluate.readings.inputs import open_shard_inputs

    arrays: dict[str, np.ndarray] = {"image_ids": np.asarray(shard.units, np.int64)}
    if gives_attention_spread(shard.model):
        inputs = open_shard_inputs(Path(inputs_folder), shard.units,
                                   annotations_sha256=shard.manifest["annotations_sha256"],
                                   open_dataset=lambda: shard.dataset, workers=workers)
        entropy, spread, done = [], [], 0
        with torch.inference_mode():
            for ids, _, pixels224 in inputs.batches(int(shard.features["batch_size"])):
                _, reading = tokens_and_spread(shard.model, normalise_pixels(pixels224).to(shard.device))
                entropy.append(reading.entropy.cpu().numpy())
                spread.append(reading.spread.cpu().numpy())
                done += len(ids)
                log.info("attention of %d / %d images", done, len(shard.units))
        arrays["entropy"] = np.concatenate(entropy).astype(np.float32)
        arrays["spread"] = np.concatenate(spread).astype(np.float32)
    else:
        log.info("%s: %s", shard.loaded.path, ABSENT)
    with atomic_path(out) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    return {"n_images": len(shard.units), "patch_attention": "entropy" in arrays}


def write_rows(shard: Shard, out: str | os.PathLike, *, patch: int | None) -> dict:
    """The runner's body for the per-patch figure: the shard's one image's last-block attention rows of one query
    patch, per head, into the .npz `out`: `image_id`, `patch` (the index used), `rows` (heads, N) float32 summing to
    1 per head, `pixels224` (224, 224, 3) uint8; no `rows` for XCiT. patch: the query's index in the network's
    g x g grid at 224 px, row by row; None, the grid's centre patch (`query_patch`)."""
    from evaluate.pixels.images import normalise_pixels
    from evaluate.readings.inputs import decode_pixels

    (image_id,) = shard.units
    _, pixels224 = decode_pixels(shard.dataset, image_id)
    arrays = {"image_id": np.int64(image_id), "patch": np.int64(-1 if patch is None else patch),
              "pixels224": pixels224}
    if gives_attention_spread(shard.model):
        rows = attention_rows(shard.model, normalise_pixels(pixels224[None]).to(shard.device), patch)
        arrays["rows"] = rows[0].cpu().numpy().astype(np.float32)
        arrays["patch"] = np.int64(query_patch(patch, rows.shape[-1], pixels224.shape[:2]))
    with atomic_path(out) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    return {"image_id": int(image_id), "patch_attention": "rows" in arrays}
