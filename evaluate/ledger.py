"""The ledger (`results/ledger/`): immutable score records, the openings hash chain, and `scores.csv`.

DESIGN section 7. Three things live here:

Records (`records/{kind}/{checkpoint}/{dataset}.json`)
    One JSON record per scoring job, written once as canonical JSON with a `record_sha256` field: the sha256 of
    the canonical JSON of the record without that field. A record holds the per-image statistics of every
    measure, so tables and paired comparisons are rebuilt from records alone, never from features. A measure with
    a `reducer` keeps the unit-free per-image inputs of `evaluate.scores` (Jaccard in [0, 1], [num, den] pairs,
    sparse confusions [[true, pred, count], ...]) and reports value and interval in percent (PERCENT x reducer).
    Overwrite policy: writing identical content again is a no-op; a record with different content at an existing
    path is refused unless `replace=True`, and even then only by a record of the *same job* (same kind,
    checkpoint, data set and role), i.e. a re-run of that job. The workflow passes `replace=True` (Snakemake
    has already removed the old output before a re-run); two different jobs colliding on one path is always an
    error.

Openings (`openings.csv`)
    One row each time labels are read to score anything, chained by hashes: `row_sha256` is the sha256 of the
    canonical JSON of the row's other fields (as the strings written in the CSV, `prev_row_sha256` included);
    the first row's `prev_row_sha256` is 64 zeros. `openings.head.json` holds the last row's seq and hash, so
    deleting the *last* row is detected too. Rows are appended under an exclusive `fcntl.flock` on
    `openings.csv.lock` by rewriting the file atomically, so concurrent jobs never lose or duplicate a row.
    A job that fails after opening the labels still gets its row (the labels were read): `result_sha256` is
    empty and `setting` carries the suffix `!failed`. A job killed without a chance to clean up leaves an
    in-flight reservation (`inflight/`); the next opening on the same host turns a reservation whose process is
    gone into a row with the suffix `!interrupted`.

Budgets
    A sealed data set may be opened `budget` times. Openings counted: all non-"budget" rows of that data set
    name (failed and interrupted ones included) plus in-flight reservations. When the configured budget differs
    from the last recorded one, a row with purpose `budget` and setting `budget=<n>` (or `budget=unlimited` when
    a data set is unsealed) is appended first, so raising a budget is on the record.

A scoring job, in short::

    started = time.time()
    with opening(ledger_dir, dataset=..., role="eval", purpose="eval", checkpoint=..., setting=...,
                 n_images=..., annotations_sha256=ds.annotations_sha256, sealed=..., budget=...) as op:
        measures = [make_measure("jaccard", image_ids=ids, per_image=j, reducer="mean", n_left_out=k), ...]
        op.result_sha256 = sha256_json(measures)
    record = make_record(kind="decoder", ..., opening_row_sha256=op.row_sha256, measures=measures,
                         started=started)
    write_record(record_path(ledger_dir, "decoder", checkpoint, dataset), record, replace=True)

CLI: `python -m evaluate.ledger verify [results/ledger]` (exit 1 with the reason on failure) and
`python -m evaluate.ledger rebuild [results/ledger] [--csv PATH] [--parquet PATH]`.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import fcntl
import io
import json
import math
import os
import resource
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from evaluate import EvaluationError
from evaluate.atomic import write_bytes, write_json, write_text, atomic_path
from evaluate.provenance import code_version as _code_version
from evaluate.provenance import sha256_json

ZERO_HASH = "0" * 64

SCORE_COLUMNS = (
    "checkpoint", "run", "epoch", "checkpoint_sha256", "dataset", "role", "measure", "setting", "value",
    "ci_low", "ci_high", "n_images", "n_left_out", "code_version", "config_hash", "torch_version", "started",
    "finished", "wall_s", "max_rss_mb",
)
OPENING_COLUMNS = (
    "seq", "time", "dataset", "role", "purpose", "checkpoint", "setting", "n_images", "annotations_sha256",
    "result_sha256", "prev_row_sha256", "row_sha256",
)
PURPOSES = ("select", "eval", "probe-train", "probe-eval", "budget")
RECORD_FIELDS = (
    "kind", "checkpoint", "run", "epoch", "checkpoint_sha256", "dataset", "role", "setting", "code_version",
    "config_hash", "torch_version", "started", "finished", "wall_s", "max_rss_mb", "opening_row_sha256",
    "measures",
)
MEASURE_FIELDS = (
    "measure", "value", "ci_low", "ci_high", "n_images", "n_left_out", "reducer", "image_ids", "per_image",
)
REDUCERS = ("mean", "ratio", "miou")
PERCENT = 100.0  # bootstrappable measures are reported as PERCENT x the unit-free reducer of their per_image stats
FAILED_SUFFIX = "!failed"
INTERRUPTED_SUFFIX = "!interrupted"


class LedgerError(EvaluationError):
    """The ledger is inconsistent (edited record, broken chain) or a write would break it; names the file/row."""


class BudgetExceeded(LedgerError):
    """A sealed data set's labels were opened as often as its budget allows."""


# --------------------------------------------------------------------------------------------------- records


def _plain(obj: Any) -> Any:
    """`obj` as plain JSON types (numpy scalars/arrays -> Python, tuples -> lists); NaN/inf -> LedgerError."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        if not math.isfinite(value):
            raise LedgerError(f"record value {value!r} is not finite; use null for a measure that has no value")
        return value
    if obj is None or isinstance(obj, str):
        return obj
    raise LedgerError(f"record holds a {type(obj).__name__}, which has no JSON form")


def record_hash(record: dict) -> str:
    """sha256 of the canonical JSON of `record` without its `record_sha256` field."""
    return sha256_json({k: v for k, v in record.items() if k != "record_sha256"})


def record_path(ledger_dir: str | os.PathLike, kind: str, checkpoint: str, dataset: str) -> Path:
    """Where the workflow keeps a job's record: `{ledger_dir}/records/{kind}/{checkpoint}/{dataset}.json`."""
    return Path(ledger_dir) / "records" / kind / checkpoint / f"{dataset}.json"


def _check_record(record: dict, where: str) -> None:
    """Raise LedgerError naming `where` when `record` lacks a field or a measure is malformed."""
    missing = [k for k in RECORD_FIELDS if k not in record]
    if missing:
        raise LedgerError(f"{where}: record lacks field(s) {', '.join(missing)}")
    if not isinstance(record["measures"], list):
        raise LedgerError(f"{where}: 'measures' must be a list")
    for i, m in enumerate(record["measures"]):
        if not isinstance(m, dict):
            raise LedgerError(f"{where}: measures[{i}] is not an object")
        lacking = [k for k in MEASURE_FIELDS if k not in m]
        if lacking:
            raise LedgerError(f"{where}: measures[{i}] lacks field(s) {', '.join(lacking)}")
        if m["reducer"] is not None and m["reducer"] not in REDUCERS:
            raise LedgerError(f"{where}: measures[{i}] ({m['measure']}) has unknown reducer {m['reducer']!r}")
        if len(m["image_ids"]) != m["n_images"]:
            raise LedgerError(
                f"{where}: measures[{i}] ({m['measure']}) has n_images {m['n_images']} but "
                f"{len(m['image_ids'])} image_ids"
            )
        if m["reducer"] is not None and len(m["per_image"]) != len(m["image_ids"]):
            raise LedgerError(
                f"{where}: measures[{i}] ({m['measure']}) has {len(m['per_image'])} per_image entries for "
                f"{len(m['image_ids'])} image_ids"
            )


def write_record(path: str | os.PathLike, record: dict, *, replace: bool = False) -> str:
    """Write `record` (plus its `record_sha256`) as canonical JSON to `path` atomically; return the hash.

    An existing identical record is left alone. An existing different record is refused (LedgerError) unless
    `replace` is true and it belongs to the same job (same kind, checkpoint, dataset and role).
    """
    path = Path(path)
    body = _plain({k: v for k, v in record.items() if k != "record_sha256"})
    _check_record(body, str(path))
    digest = sha256_json(body)
    full = dict(body, record_sha256=digest)
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LedgerError(f"{path}: existing record cannot be read ({exc}); remove it by hand") from exc
        if old == full:
            return digest
        if not replace:
            raise LedgerError(
                f"{path}: a different record is already there (record_sha256 "
                f"{str(old.get('record_sha256'))[:12]}…); records are immutable - pass replace=True for a "
                "re-run of the same job"
            )
        same_job = all(old.get(k) == full[k] for k in ("kind", "checkpoint", "dataset", "role"))
        if not same_job:
            raise LedgerError(
                f"{path}: the record there belongs to another job (kind/checkpoint/dataset/role "
                f"{[old.get(k) for k in ('kind', 'checkpoint', 'dataset', 'role')]}); refusing to replace it"
            )
    write_json(path, full)
    return digest


def read_record(path: str | os.PathLike) -> dict:
    """One record, its hash verified: an edited or malformed record is a LedgerError naming the file."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LedgerError(f"{path}: not a readable JSON record ({exc})") from exc
    if not isinstance(record, dict) or "record_sha256" not in record:
        raise LedgerError(f"{path}: not a ledger record (no record_sha256)")
    if record_hash(record) != record["record_sha256"]:
        raise LedgerError(
            f"{path}: record_sha256 does not match its content - the record was edited after it was written; "
            "re-run the job that wrote it instead of editing records"
        )
    _check_record(record, str(path))
    return record


def read_records(records_dir: str | os.PathLike) -> list[dict]:
    """Every `*.json` record below `records_dir` (temporary `.tmp-*` files skipped), verified, in path order."""
    root = Path(records_dir)
    if not root.is_dir():
        return []
    paths = sorted(p for p in root.rglob("*.json") if not p.name.startswith(".tmp-"))
    return [read_record(p) for p in paths]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def max_rss_mb() -> float:
    """Peak resident memory of this process or its largest finished child, in MiB (ru_maxrss: KiB on Linux)."""
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    per_mib = 1024 * 1024 if sys.platform == "darwin" else 1024
    return round(peak / per_mib, 1)


def _torch_version() -> str:
    module = sys.modules.get("torch")
    if module is None:
        try:
            import torch as module  # noqa: PLC0415
        except ImportError:
            return "none"
    return str(module.__version__)


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def make_measure(
    measure: str,
    *,
    image_ids: Sequence[int],
    per_image: Sequence[Any],
    reducer: str | None,
    n_left_out: int = 0,
    value: float | None = None,
    resamples: int = 10000,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """A record's measure entry.

    With a `reducer` the per-image statistics are the unit-free inputs of `evaluate.scores` ("mean": per-image
    float, e.g. Jaccard in [0, 1]; "ratio": per-image [num, den]; "miou": per-image sparse confusion
    [[true, pred, count], ...]) and value, ci_low, ci_high are PERCENT x `bootstrap_ci` (every bootstrappable
    measure is reported in percent; an undefined interval is null). `value` must then be None. Without a reducer
    (e.g. mask AP) `value` is required, the interval is null and `per_image` may be empty.
    """
    lo = hi = None
    if reducer is not None:
        if reducer not in REDUCERS:
            raise LedgerError(f"measure {measure}: unknown reducer {reducer!r} (one of {', '.join(REDUCERS)})")
        if value is not None:
            raise LedgerError(f"measure {measure}: with reducer {reducer!r} the value comes from per_image; "
                              "pass value=None")
        if len(per_image) != len(image_ids):
            raise LedgerError(f"measure {measure}: {len(per_image)} per_image entries for {len(image_ids)} images")
        if len(image_ids):
            from evaluate.scores import bootstrap_ci  # noqa: PLC0415

            stats, scores_reducer = stats_array(per_image, reducer)
            v, lo, hi = (PERCENT * x for x in bootstrap_ci(stats, scores_reducer, resamples=resamples, seed=seed,
                                                          level=level))
            value, lo, hi = _finite_or_none(v), _finite_or_none(lo), _finite_or_none(hi)
    elif value is None:
        raise LedgerError(f"measure {measure}: a measure without a reducer needs its value")
    return _plain({
        "measure": measure, "value": value, "ci_low": lo, "ci_high": hi, "n_images": len(image_ids),
        "n_left_out": n_left_out, "reducer": reducer, "image_ids": list(image_ids), "per_image": list(per_image),
    })


def stats_array(per_image: Sequence[Any], reducer: str, n_classes: int | None = None) -> tuple[np.ndarray, str]:
    """Per-image statistics as stored in a record -> (array, reducer name) for `evaluate.scores`.

    mean -> float64 (n,), "mean"; ratio -> float64 (n, 2), "ratio"; miou -> int64 (n, 3, K) counts
    [intersection, true, predicted] per class from the sparse [[true, pred, count], ...] lists, "miou-counts"
    (K = `n_classes` or one more than the largest label seen; classes no image has are left out by the reducer).
    """
    if reducer == "mean":
        return np.asarray(per_image, dtype=np.float64).reshape(-1), "mean"
    if reducer == "ratio":
        return np.asarray(per_image, dtype=np.float64).reshape(-1, 2), "ratio"
    if reducer == "miou":
        labels = [max(int(t), int(p)) for entries in per_image for t, p, _ in entries]
        k = n_classes if n_classes is not None else (max(labels) + 1 if labels else 1)
        counts = np.zeros((len(per_image), 3, k), dtype=np.int64)
        for i, entries in enumerate(per_image):
            for t, p, c in entries:
                t, p, c = int(t), int(p), int(c)
                if t == p:
                    counts[i, 0, t] += c
                counts[i, 1, t] += c
                counts[i, 2, p] += c
        return counts, "miou-counts"
    raise LedgerError(f"unknown reducer {reducer!r} (one of {', '.join(REDUCERS)})")


def make_record(
    *,
    kind: str,
    checkpoint: str,
    run: str | None,
    epoch: int | None,
    checkpoint_sha256: str,
    dataset: str,
    role: str,
    setting: str,
    config_hash: str,
    opening_row_sha256: str,
    measures: list[dict],
    started: float,
    finished: float | None = None,
) -> dict:
    """A record dict for `write_record`: fills code_version, torch_version, times (ISO 8601 UTC), wall_s and
    max_rss_mb. `started`/`finished` are `time.time()` values; `finished` defaults to now."""
    finished = time.time() if finished is None else finished
    return _plain({
        "kind": kind, "checkpoint": checkpoint, "run": run, "epoch": epoch,
        "checkpoint_sha256": checkpoint_sha256, "dataset": dataset, "role": role, "setting": setting,
        "code_version": _code_version(), "config_hash": config_hash, "torch_version": _torch_version(),
        "started": _iso(started), "finished": _iso(finished), "wall_s": round(finished - started, 3),
        "max_rss_mb": max_rss_mb(), "opening_row_sha256": opening_row_sha256, "measures": measures,
    })


# ------------------------------------------------------------------------------------------------ scores.csv


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


# -------------------------------------------------------------------------------------------------- openings


def openings_path(ledger_dir: str | os.PathLike) -> Path:
    return Path(ledger_dir) / "openings.csv"


def row_hash(row: dict) -> str:
    """sha256 of the canonical JSON of the row's fields except row_sha256, as the strings in the CSV."""
    return sha256_json({c: str(row[c]) for c in OPENING_COLUMNS if c != "row_sha256"})


def _parse_openings(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise LedgerError(f"{path}: empty file (no header)") from None
    if tuple(header) != OPENING_COLUMNS:
        raise LedgerError(f"{path}: header is {header}, expected {list(OPENING_COLUMNS)}")
    rows = []
    for line_no, fields in enumerate(reader, start=2):
        if len(fields) != len(OPENING_COLUMNS):
            raise LedgerError(f"{path}: line {line_no} has {len(fields)} fields, expected {len(OPENING_COLUMNS)}")
        rows.append(dict(zip(OPENING_COLUMNS, fields)))
    return rows


def _check_chain(path: Path, rows: list[dict]) -> None:
    prev = ZERO_HASH
    for i, row in enumerate(rows):
        seq = row["seq"]
        if row["prev_row_sha256"] != prev:
            raise LedgerError(
                f"{path}: row seq {seq} (line {i + 2}): prev_row_sha256 does not match the row before it - a row "
                "before it was deleted, inserted or reordered"
            )
        if row_hash(row) != row["row_sha256"]:
            raise LedgerError(f"{path}: row seq {seq} (line {i + 2}): row_sha256 does not match its fields - the row "
                              "was edited")
        if seq != str(i + 1):
            raise LedgerError(f"{path}: row seq {seq} (line {i + 2}) should be seq {i + 1} - rows were renumbered")
        if row["purpose"] not in PURPOSES:
            raise LedgerError(f"{path}: row seq {seq}: unknown purpose {row['purpose']!r}")
        prev = row["row_sha256"]


def _head_path(path: Path) -> Path:
    return path.with_name(path.stem + ".head.json")


def read_openings(path: str | os.PathLike) -> list[dict]:
    """All rows of an openings file (dicts of strings), chain and head verified; [] when the file is absent."""
    path = Path(path)
    head = _head_path(path)
    if not path.exists():
        if head.exists():
            raise LedgerError(f"{path}: missing, but {head.name} says rows were written - the file was deleted")
        return []
    rows = _parse_openings(path)
    _check_chain(path, rows)
    if head.exists():
        try:
            h = json.loads(head.read_text(encoding="utf-8"))
            h_seq, h_hash = int(h["seq"]), str(h["row_sha256"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LedgerError(f"{head}: unreadable ({exc})") from exc
        last_seq = len(rows)
        if h_seq > last_seq:
            raise LedgerError(f"{path}: ends at row seq {last_seq} but {head.name} records row seq {h_seq} - "
                              f"the last row(s) were deleted")
        # a head behind the file is what a job killed between the two writes leaves; it catches up next append
        if h_seq and rows[h_seq - 1]["row_sha256"] != h_hash:
            raise LedgerError(f"{path}: row seq {h_seq} does not match {head.name} - rows were rewritten")
    elif rows:
        raise LedgerError(f"{path}: {head.name} is missing - the openings file was replaced")
    return rows


def verify_openings(path: str | os.PathLike) -> int:
    """Check the hash chain of an openings file; return its row count. LedgerError names the first bad row."""
    return len(read_openings(path))


@contextlib.contextmanager
def _locked(ledger_dir: Path) -> Iterator[None]:
    ledger_dir.mkdir(parents=True, exist_ok=True)
    with open(ledger_dir / "openings.csv.lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _append_row(ledger_dir: Path, rows: list[dict], fields: dict) -> dict:
    """Append one row (under the lock, `rows` = current verified rows); rewrite the file atomically."""
    path = openings_path(ledger_dir)
    row = {c: str(fields.get(c, "")) for c in OPENING_COLUMNS}
    row["seq"] = str(len(rows) + 1)
    row["time"] = fields.get("time") or _iso(time.time())
    row["prev_row_sha256"] = rows[-1]["row_sha256"] if rows else ZERO_HASH
    row["row_sha256"] = row_hash(row)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if not rows:
        writer.writerow(OPENING_COLUMNS)
    writer.writerow([row[c] for c in OPENING_COLUMNS])
    old = path.read_bytes() if path.exists() else b""
    write_bytes(path, old + buf.getvalue().encode("utf-8"))
    write_json(_head_path(path), {"seq": int(row["seq"]), "row_sha256": row["row_sha256"]})
    rows.append(row)
    return row


def _last_budget(rows: list[dict], dataset: str) -> str | None:
    for row in reversed(rows):
        if row["dataset"] == dataset and row["purpose"] == "budget":
            return row["setting"]
    return None


def _inflight_dir(ledger_dir: Path) -> Path:
    return ledger_dir / "inflight"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reservations(ledger_dir: Path) -> list[tuple[Path, dict]]:
    folder = _inflight_dir(ledger_dir)
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.glob("*.json")):
        try:
            out.append((p, json.loads(p.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as exc:
            raise LedgerError(f"{p}: unreadable in-flight reservation ({exc}); remove it if no job is running") from exc
    return out


def _reap_interrupted(ledger_dir: Path, rows: list[dict]) -> None:
    """Turn reservations of dead processes on this host into `!interrupted` rows (labels may have been read)."""
    host = socket.gethostname()
    for p, res in _reservations(ledger_dir):
        if res.get("host") == host and not _pid_alive(int(res.get("pid", -1))):
            fields = dict(res["row"])
            fields["setting"] = fields["setting"] + INTERRUPTED_SUFFIX
            fields["result_sha256"] = ""
            fields["time"] = ""
            _append_row(ledger_dir, rows, fields)
            p.unlink()


@dataclass
class Opening:
    """What `opening` yields: set `result_sha256` (sha256 of what was scored, e.g. the record body) before exit.

    After exit `row` holds the appended openings row (its `row_sha256` goes into the record).
    """

    dataset: str
    purpose: str
    result_sha256: str = ""
    row: dict = field(default_factory=dict)

    @property
    def row_sha256(self) -> str:
        if not self.row:
            raise LedgerError(f"opening of {self.dataset} ({self.purpose}) has no row yet: it is written on exit")
        return self.row["row_sha256"]


@contextlib.contextmanager
def opening(
    ledger_dir: str | os.PathLike,
    *,
    dataset: str,
    role: str,
    purpose: str,
    checkpoint: str,
    setting: str,
    n_images: int,
    annotations_sha256: str,
    sealed: bool = False,
    budget: int | None = None,
) -> Iterator[Opening]:
    """Open a data set's labels: budget check and reservation on entry, one openings row on exit.

    Raises BudgetExceeded (before the body runs) when a sealed data set's openings plus in-flight reservations
    already reach `budget`. On normal exit `result_sha256` must have been set on the handle; on an exception the
    row is written with an empty result and `setting + "!failed"` and the exception propagates.
    """
    ledger_dir = Path(ledger_dir)
    if purpose not in PURPOSES or purpose == "budget":
        raise LedgerError(f"opening of {dataset}: purpose {purpose!r} is not one of select, eval, probe-train, "
                          "probe-eval")
    if sealed and (budget is None or int(budget) < 0):
        raise LedgerError(f"config.yaml: datasets.{dataset} is sealed but has no budget (set datasets.{dataset}."
                          "budget to the number of openings allowed)")
    fields = {
        "dataset": dataset, "role": role, "purpose": purpose, "checkpoint": checkpoint, "setting": setting,
        "n_images": int(n_images), "annotations_sha256": annotations_sha256,
    }
    reservation = _inflight_dir(ledger_dir) / f"{uuid.uuid4().hex}.json"
    with _locked(ledger_dir):
        path = openings_path(ledger_dir)
        rows = read_openings(path)
        _reap_interrupted(ledger_dir, rows)
        wanted = f"budget={int(budget)}" if sealed else "budget=unlimited"
        last = _last_budget(rows, dataset)
        if last != wanted and (sealed or last is not None):
            _append_row(ledger_dir, rows, {
                "dataset": dataset, "role": role, "purpose": "budget", "checkpoint": checkpoint,
                "setting": wanted, "n_images": 0, "annotations_sha256": annotations_sha256, "result_sha256": "",
            })
        if sealed:
            used = sum(1 for r in rows if r["dataset"] == dataset and r["purpose"] != "budget")
            in_flight = sum(1 for _, res in _reservations(ledger_dir) if res["row"]["dataset"] == dataset)
            if used + in_flight >= int(budget):
                raise BudgetExceeded(
                    f"data set {dataset!r} is sealed with budget {budget} and its labels were opened {used} time(s)"
                    f"{f' (+{in_flight} in flight)' if in_flight else ''}; refusing to open it for {purpose} of "
                    f"{checkpoint} ({setting}). To allow more openings, raise datasets.{dataset}.budget in "
                    "config.yaml (the change is recorded in openings.csv)"
                )
        write_json(reservation, {"host": socket.gethostname(), "pid": os.getpid(), "row": fields})
    handle = Opening(dataset=dataset, purpose=purpose)
    failed: BaseException | None = None
    try:
        yield handle
    except BaseException as exc:
        failed = exc
        raise
    finally:
        result = handle.result_sha256 if failed is None else ""
        final = dict(fields, result_sha256=result)
        if failed is not None or not result:
            final["setting"] = setting + FAILED_SUFFIX
        with _locked(ledger_dir):
            rows = read_openings(openings_path(ledger_dir))
            handle.row = _append_row(ledger_dir, rows, final)
            with contextlib.suppress(FileNotFoundError):
                reservation.unlink()
        if failed is None and not result:
            raise LedgerError(f"opening of {dataset} for {purpose} of {checkpoint}: the job finished without "
                              "setting result_sha256 on the opening; recorded as failed")


# ------------------------------------------------------------------------------------------------------ verify


def verify_ledger(ledger_dir: str | os.PathLike) -> dict:
    """Check the openings chain, every record's hash, and that each record's opening row is in openings.csv.

    Returns {"openings": rows, "records": records, "measures": measure rows}; LedgerError on the first problem.
    """
    ledger_dir = Path(ledger_dir)
    if not ledger_dir.is_dir():
        raise LedgerError(f"{ledger_dir}: no ledger folder there")
    rows = read_openings(openings_path(ledger_dir))
    by_hash = {r["row_sha256"]: r for r in rows}
    records_dir = ledger_dir / "records"
    paths = sorted(p for p in records_dir.rglob("*.json") if not p.name.startswith(".tmp-")) \
        if records_dir.is_dir() else []
    n_measures = 0
    for p in paths:
        rec = read_record(p)
        row = by_hash.get(rec["opening_row_sha256"])
        if row is None:
            raise LedgerError(f"{p}: its opening_row_sha256 {rec['opening_row_sha256'][:12]}… is not in "
                              f"{openings_path(ledger_dir)} - the labels it was scored on were never recorded as opened")
        if row["dataset"] != rec["dataset"]:
            raise LedgerError(f"{p}: its opening row seq {row['seq']} is for data set {row['dataset']!r}, "
                              f"not {rec['dataset']!r}")
        n_measures += len(rec["measures"])
    return {"openings": len(rows), "records": len(paths), "measures": n_measures}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.ledger", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_verify = sub.add_parser("verify", help="check the openings hash chain and every record's hash")
    p_verify.add_argument("ledger_dir", nargs="?", default="results/ledger")
    p_rebuild = sub.add_parser("rebuild", help="rebuild scores.csv (and .parquet) from the records")
    p_rebuild.add_argument("ledger_dir", nargs="?", default="results/ledger")
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
            n = rebuild_scores(Path(args.ledger_dir) / "records", out, args.parquet)
            print(f"wrote {out}: {n} rows" + (f" (and {args.parquet})" if args.parquet else ""))
    except EvaluationError as exc:
        print(f"ledger {args.command} failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
