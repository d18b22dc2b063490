"""Scores of masks against labels (`masks`), bootstrap intervals over images (`bootstrap`), the measures of a
ledger record with their intervals (`measures`), the decoder's setting chosen on the select split (`selection`, with
the select job's entry), the decoder's masks scored on an eval data set (`decoder`, the score_decoder job's entry)
and the agreement of two readings' rankings (`agreement`).
"""

from evaluate import EvaluationError


class ScoreError(EvaluationError):
    """Predictions or per-image statistics that cannot be scored; the message says which image or array and why."""
