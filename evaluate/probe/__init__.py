"""The linear probe on tokens224 (docs/design.md §6): its labels (`labels`: classes by name, label maps, patch
labels), the probe and its fit (`linear`), its scores on eval images (`scores`), and the entries of its jobs, trained
and scored on the record (`protocol`).
"""

from evaluate import EvaluationError


class ProbeError(EvaluationError):
    """Labels, features or a probe file the probe cannot use; the message names the image, array or file."""
