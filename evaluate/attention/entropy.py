"""The entropy of an attention row (docs/design.md §13): H = -sum_j a_j ln a_j in nats, with 0 ln 0 = 0.

A row of N weights has H in [0, ln N]: 0 for a row on one patch, ln N for a uniform row (at 224 px ln 196 = 5.278
nats for p 16, ln 784 = 6.664 for p 8, ln 256 = 5.545 for p 14). e^H is the number of patches whose equal shares
would be as spread out.

From the logits s of a row (the scores q k^T / sqrt(d)) the entropy is taken as H = -sum_j a_j ln a_j with
ln a = log_softmax(s) and a = e^{ln a}: every term a_j ln a_j is <= 0, so nothing cancels, a weight that underflows
to 0 contributes exactly 0, and no logarithm of a rounded weight is taken. Three passes over the N x N logits
(log_softmax, exp, one dot product per row) after the one batched product that makes them.
"""

from __future__ import annotations

import torch
from torch import Tensor


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
