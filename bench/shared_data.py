"""Where the benches' real data lies, and the clean skip of a bench that needs it where it is absent.

Some benches time real photos: coco2017-mini and davis2016-mini, in `../shared/data` beside the checkout (the
project's development machines have it; a clone of the repository alone does not). A bench that needs one and
finds it absent prints one line saying so and exits 0, so `make bench` goes on with the next.

    from bench.shared_data import COCO_MINI, skip_unless
    skip_unless(COCO_MINI / "annotations.json", "bench/scale.py")
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
COCO_MINI = SHARED_DATA / "coco2017-mini"
DAVIS_MINI = SHARED_DATA / "davis2016-mini"


def skip_unless(needed: Path, bench: str) -> None:
    """Exit 0 with one line, `<bench>: skipped: needs <needed> (absent here)`, where `needed` does not exist."""
    if not Path(needed).exists():
        print(f"{bench}: skipped: needs {needed} (absent here; it lies in ../shared/data beside a development "
              "checkout)")
        sys.exit(0)
