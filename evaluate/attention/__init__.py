"""The attention-spread reading (docs/design.md §13): how widely each head of each block looks, with no label at all.

    entropy.py   the entropy (nats) of an attention row: from its weights, from its logits, from queries and keys
    network.py   the reading through a network, in the pass that gives tokens224: per image and (block, head), the
                 mean over rows of H and of e^H / N; absent (None) for XCiT, whose attention runs across channels
    summary.py   per checkpoint and data set: the block-12 measures `attention_spread` and `attention_entropy` with
                 bootstrap intervals over images, and the full (blocks x heads) tables
    shards.py    the workflow's entries: one checkpoint's reading of one shard (its own job, on the decoded 224-px
                 inputs), the label-free `attention` record of a checkpoint on a data set, one image's rows
"""

from __future__ import annotations

from evaluate import EvaluationError


class AttentionError(EvaluationError):
    """The attention-spread reading cannot be taken or summarised as asked; the message says what and where."""
