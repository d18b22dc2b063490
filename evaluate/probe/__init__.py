"""The linear probe on tokens224 (docs/design.md §6): its labels (`labels`: classes by name, label maps, patch
labels), the probe and its fit (`linear`) and its scores on eval images (`scores`).
"""

from evaluate import EvaluationError


class ProbeError(EvaluationError):
    """Labels, features or a probe file the probe cannot use; the message names the image, array or file."""
