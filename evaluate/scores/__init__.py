"""A pure library of measures: masks against labels (`masks`: Jaccard, CorLoc, mask AP), boxes against boxes
(`boxes`), bootstrap intervals over images (`bootstrap`), the measure entries of a ledger record with their
intervals (`measures`), the agreement of two readings' rankings (`agreement`), and the one catalogue of every
measure the tool reports (`catalogue`: names, units, display names, order, which way is better). Nothing here opens
labels or writes a record: the stages do (`evaluate.decoding`, `evaluate.probe`, ...).
"""

from evaluate import EvaluationError


class ScoreError(EvaluationError):
    """Predictions or per-image statistics that cannot be scored; the message says which image or array and why."""
