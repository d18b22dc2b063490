"""`make bench` runs every bench of bench/, and a bench that needs ../shared/data, where it is absent, ends with one
line saying so and exits 0 (so `make bench` goes on)."""

from __future__ import annotations

import importlib
import re
import sys

import pytest
from sources import REPO

HELPERS = {"machine", "shared_data"}  # modules of bench/ that are no bench
NEEDS_SHARED = {  # bench -> the constant naming its data (patched to a missing folder here), its own argv
    "scale": "COCO_MINI", "memory": "COCO_MINI", "precision": "COCO_MINI", "saliency": "DAVIS_MINI",
    "video": "DAVIS_MINI", "attention_masks": "COCO_MINI",
}


def test_make_bench_runs_every_bench_of_the_folder():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    listed = set(re.search(r"^BENCHES := (.*)$", makefile, re.MULTILINE).group(1).split())
    scripts = {p.stem for p in (REPO / "bench").glob("*.py")} - HELPERS
    assert listed == scripts


@pytest.mark.parametrize("bench", sorted(NEEDS_SHARED))
def test_a_bench_without_its_shared_data_says_so_and_exits_zero(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(REPO))
    module = importlib.import_module(f"bench.{bench}")
    absent = tmp_path / "absent"
    monkeypatch.setattr(module, NEEDS_SHARED[bench], absent)
    monkeypatch.setattr(sys, "argv", [f"bench/{bench}.py", *(["--root", str(absent)] if bench == "video" else [])])
    with pytest.raises(SystemExit) as stopped:
        module.main()  # its arguments from sys.argv, as on the command line
    assert stopped.value.code in (0, None)
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith(f"bench/{bench}.py: skipped: needs {absent}")  # its last line
