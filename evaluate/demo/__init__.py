"""The embedded demo: procedurally drawn scenes (`scenes`) and videos (`videos`), and seeded random checkpoints
(`checkpoints`); here, what the three share: their error and their commands' ending.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from evaluate import EvaluationError


class DemoError(EvaluationError):
    """Demo arguments that cannot work (e.g. a negative seed or no images)."""


def print_made(make: Callable[[], Path]) -> int:
    """A demo command's end: print the path `make()` wrote and return 0, or print its error and return 1."""
    try:
        path = make()
    except EvaluationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0
