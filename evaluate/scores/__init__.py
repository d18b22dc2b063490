"""Scores of masks against labels (`masks`), bootstrap intervals over images (`bootstrap`), the measures of a
ledger record with their intervals (`measures`), the decoder's setting chosen on the select split (`selection`) and
the agreement of two readings' rankings (`agreement`).
"""

from evaluate import EvaluationError


class ScoreError(EvaluationError):
    """Predictions or per-image statistics that cannot be scored; the message says which image or array and why."""
