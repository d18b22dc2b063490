"""The attention-spread stage (docs/design.md §13): how widely each head of each block looks, with no label at all.
The reading itself (entropy of the rows, the network's tap) is `evaluate.readings.attention_spread`.

    summary.py   per checkpoint and data set: the block-12 measures `attention_spread` and `attention_entropy` with
                 bootstrap intervals over images, and the full (blocks x heads) tables
    shards.py    the workflow's entries: one checkpoint's reading of one shard (its own job, on the decoded 224-px
                 inputs), the label-free `attention` record of a checkpoint on a data set, one image's rows
"""

from __future__ import annotations

from evaluate.readings import ReadingError


class AttentionError(ReadingError):
    """The attention-spread reading cannot be taken or summarised as asked; the message says what and where."""
