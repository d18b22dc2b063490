"""The workflow follows Snakemake's conventions: `snakemake --lint` finds only the software environment, and
`snakefmt --check` passes (`make lint`, run by .ci/run)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from sources import REPO
SPEC = importlib.util.spec_from_file_location("ci_lint", REPO / ".ci" / "lint.py")
lint = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(lint)

SAMPLE = """Lints for snakefile /w/workflow/rules/probe.smk:
    * Mixed rules and functions in same snakefile.:
      Small one-liner functions used only once should be defined as lambda

Lints for rule extract (line 21, /w/workflow/rules/features.smk):
    * Specify a conda environment or container for each rule.:
      This way, the used software for each specific step is documented, and the
"""


def test_the_lint_parser_reads_every_finding_with_its_place():
    assert lint.findings(SAMPLE) == [
        ("snakefile /w/workflow/rules/probe.smk", "Mixed rules and functions in same snakefile."),
        ("rule extract (line 21, /w/workflow/rules/features.smk)", "Specify a conda environment or container for each rule."),
    ]


def test_snakemake_lint_finds_nothing_but_the_software_environment():
    proc = subprocess.run([sys.executable, str(REPO / ".ci" / "lint.py")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakefmt_check_passes_on_the_snakefile_and_rule_files():
    snakefmt = Path(sys.executable).parent / "snakefmt"
    files = [str(REPO / "Snakefile"), *map(str, sorted((REPO / "workflow" / "rules").glob("*.smk")))]
    proc = subprocess.run([str(snakefmt), "--check", *files], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
