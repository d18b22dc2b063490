"""Verification of the whole ledger, and its command: `python -m evaluate.ledger verify [results/ledger]`.

docs/design.md §7. Checks the openings chain, every record's hash, and that each record's opening row is in
openings.csv (so no score exists whose labels were never recorded as opened); a record of a label-free kind
(`LABEL_FREE_KINDS`: the attention spread), or of a reading its network lacks (`absent`), cites no opening.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from evaluate import EvaluationError
from evaluate.ledger import LedgerError
from evaluate.ledger.openings import openings_path, read_openings
from evaluate.ledger.records import opens_no_labels, read_record
from evaluate.ledger.scores_table import rebuild_scores
from evaluate.plumbing.paths import LEDGER, RECORDS_IN_LEDGER


def verify_ledger(ledger_dir: str | os.PathLike) -> dict:
    """Check the openings chain, every record's hash, and that each record's opening row is in openings.csv.

    Returns {"openings": rows, "records": records, "measures": measure rows}; LedgerError on the first problem.
    """
    ledger_dir = Path(ledger_dir)
    if not ledger_dir.is_dir():
        raise LedgerError(f"{ledger_dir}: no ledger folder there")
    rows = read_openings(openings_path(ledger_dir))
    by_hash = {r["row_sha256"]: r for r in rows}
    records_dir = ledger_dir / RECORDS_IN_LEDGER
    paths = sorted(p for p in records_dir.rglob("*.json") if not p.name.startswith(".tmp-")) \
        if records_dir.is_dir() else []
    n_measures = 0
    for p in paths:
        rec = read_record(p)
        n_measures += len(rec["measures"])
        if opens_no_labels(rec):
            continue  # a reading that needs no label (the attention spread), or one the network lacks: no opening
        row = by_hash.get(rec["opening_row_sha256"])
        if row is None:
            raise LedgerError(f"{p}: its opening_row_sha256 {str(rec['opening_row_sha256'])[:12]}… is not in "
                              f"{openings_path(ledger_dir)} - the labels it was scored on were never recorded as opened")
        if row["dataset"] != rec["dataset"]:
            raise LedgerError(f"{p}: its opening row seq {row['seq']} is for data set {row['dataset']!r}, "
                              f"not {rec['dataset']!r}")
    return {"openings": len(rows), "records": len(paths), "measures": n_measures}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.ledger", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_verify = sub.add_parser("verify", help="check the openings hash chain and every record's hash")
    p_verify.add_argument("ledger_dir", nargs="?", default=LEDGER)
    p_rebuild = sub.add_parser("rebuild", help="rebuild scores.csv (and .parquet) from the records")
    p_rebuild.add_argument("ledger_dir", nargs="?", default=LEDGER)
    p_rebuild.add_argument("--csv", default=None, help="default: <ledger_dir>/scores.csv")
    p_rebuild.add_argument("--parquet", default=None, help="also write a Parquet copy here")
    args = parser.parse_args(argv)
    try:
        if args.command == "verify":
            summary = verify_ledger(args.ledger_dir)
            print(f"ledger {args.ledger_dir} OK: {summary['openings']} openings rows (hash chain intact), "
                  f"{summary['records']} records ({summary['measures']} measures), every record's hash and "
                  "opening verified")
        else:
            out = args.csv or str(Path(args.ledger_dir) / "scores.csv")
            n = rebuild_scores(Path(args.ledger_dir) / RECORDS_IN_LEDGER, out, args.parquet)
            print(f"wrote {out}: {n} rows" + (f" (and {args.parquet})" if args.parquet else ""))
    except EvaluationError as exc:
        print(f"ledger {args.command} failed: {exc}", file=sys.stderr)
        return 1
    return 0
