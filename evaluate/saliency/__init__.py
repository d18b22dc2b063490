"""Saliency as the field publishes it (docs/design.md §16): the stage's entries (`protocol`: the reading of a shard
through the one runner, the scoring on the record) and TokenCut's three measures beside PySODMetrics' four
(`measures`). The sets' layouts are a data-set kind (`evaluate.datasets.saliency`), TokenCut's reading a reading
(`evaluate.readings.saliency`) and the bilateral solver a refinement of the decoder (`decoders.bilateral`).
"""

from evaluate import EvaluationError


class SaliencyError(EvaluationError):
    """A saliency prediction or scoring that cannot be used; the message names the file or value."""
