"""Saliency as the field publishes it (docs/design.md §16): ECSSD, DUTS-TE and DUT-OMRON read in their own layouts
(`data`), TokenCut's reading of one salient object per image (`reading`), Barron and Poole's fast bilateral solver
as TokenCut runs it (`bilateral`), and TokenCut's three measures beside PySODMetrics' four (`measures`).
"""

from evaluate import EvaluationError


class SaliencyError(EvaluationError):
    """A saliency data set, prediction or setting that cannot be used; the message names the file or value."""
