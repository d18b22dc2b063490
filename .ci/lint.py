"""`snakemake --lint` must find nothing but the per-rule software environment, which cannot be met honestly here.

No conda channel or container registry is reachable from this project's machines, so an environment file could
never be built or tested (docs/development.md, "Software environments"). Snakemake 9.27 prints its findings as text even with
`--lint json`; this parses that text. Exit 0 when the only findings are the environment one, else 1 with the rest.
Usage: python .ci/lint.py [snakemake executable]
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ALLOWED = "Specify a conda environment or container for each rule."


def findings(text: str) -> list[tuple[str, str]]:
    """(where, finding) for each `* finding:` line under a `Lints for ...:` heading."""
    out, where = [], None
    for line in text.splitlines():
        heading = re.match(r"^Lints for (.+):$", line)
        if heading:
            where = heading.group(1)
        item = re.match(r"^\s+\* (.+?):?$", line)
        if item and where:
            out.append((where, item.group(1).rstrip(":")))
    return out


def main(argv: list[str]) -> int:
    snakemake = argv[1] if len(argv) > 1 else str(Path(sys.executable).parent / "snakemake")
    proc = subprocess.run([snakemake, "--lint", "json"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    text = proc.stdout + proc.stderr
    found = findings(text)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not found):
        print(f"snakemake --lint failed to run (exit {proc.returncode}):\n{text[-3000:]}")
        return 1
    others = [(where, what) for where, what in found if what != ALLOWED.rstrip(".") and what != ALLOWED]
    allowed = len(found) - len(others)
    if others:
        print("snakemake --lint findings other than the software environment:")
        for where, what in others:
            print(f"  {where}: {what}")
        return 1
    print(f"snakemake --lint: clean apart from the per-rule software environment ({allowed} rules; see docs/development.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
