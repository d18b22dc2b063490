"""`results/ledger/scores.csv` (and `scores.parquet`): one row per measure of every record, rebuilt, never edited.

docs/design.md §7. Every row names the reading and the decoder that made it (empty for a record written before
records named them).
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any, Sequence

from evaluate.plumbing.atomic import atomic_path, write_text
from evaluate.ledger.records import read_records
from evaluate.networks import IDENTITY_FIELDS

SCORE_COLUMNS = (
    "checkpoint", "run", "epoch", "checkpoint_sha256", *IDENTITY_FIELDS, "precision", "dataset", "role", "measure",
    "setting", "reading", "decoder", "value", "ci_low", "ci_high", "n_images", "n_left_out", "code_version",
    "config_hash", "torch_version", "started", "finished", "wall_s", "max_rss_mb",
)


def score_rows(records: Sequence[dict]) -> list[dict]:
    """One row per (record, measure) with SCORE_COLUMNS, sorted by run, epoch, checkpoint, dataset, role,
    measure, setting (then record hash, so the order never depends on the file system)."""
    rows = []
    for rec in records:
        for m in rec["measures"]:
            row = {c: rec.get(c) for c in SCORE_COLUMNS}
            row.update({c: m[c] for c in ("measure", "value", "ci_low", "ci_high", "n_images", "n_left_out")})
            rows.append((rec["record_sha256"], row))

    def key(item):
        digest, r = item
        epoch = r["epoch"] if r["epoch"] is not None else -1
        return (r["run"] or "", epoch, r["checkpoint"], r["dataset"], r["role"], r["measure"], r["setting"] or "",
                digest)

    return [row for _, row in sorted(rows, key=key)]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def rebuild_scores(records_dir: str | os.PathLike, out_csv: str | os.PathLike,
                   out_parquet: str | os.PathLike | None = None) -> int:
    """Rebuild `scores.csv` (and optionally a Parquet copy) from every verified record; return the row count."""
    rows = score_rows(read_records(records_dir))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(SCORE_COLUMNS)
    for r in rows:
        writer.writerow([_cell(r[c]) for c in SCORE_COLUMNS])
    write_text(out_csv, buf.getvalue())
    if out_parquet is not None:
        import pandas as pd  # noqa: PLC0415

        frame = pd.DataFrame(rows, columns=list(SCORE_COLUMNS))
        for c in ("value", "ci_low", "ci_high", "wall_s", "max_rss_mb"):
            frame[c] = frame[c].astype("float64")
        for c in ("epoch", "n_images", "n_left_out"):
            frame[c] = frame[c].astype("Int64")
        with atomic_path(out_parquet) as tmp:
            frame.to_parquet(tmp, index=False, engine="pyarrow")
    return len(rows)
