"""The openings ledger (`results/ledger/openings.csv`): one hash-chained row each time labels are read.

docs/design.md §7.

Chain
    `row_sha256` is the sha256 of the canonical JSON of the row's other fields (as the strings written in the CSV,
    `prev_row_sha256` included); the first row's `prev_row_sha256` is 64 zeros. `openings.head.json` holds the
    last row's seq and hash, so deleting the *last* row is detected too.

Locks
    Rows are appended under an exclusive `fcntl.flock` on `openings.csv.lock` by rewriting the file atomically, so
    concurrent jobs never lose or duplicate a row.

Failed and interrupted openings
    A job that fails after opening the labels still gets its row (the labels were read): `result_sha256` is empty
    and `setting` carries the suffix `!failed`. A job killed without a chance to clean up leaves an in-flight
    reservation (`inflight/`); the next opening on the same host turns a reservation whose process is gone into a
    row with the suffix `!interrupted`.

Budgets
    A sealed data set may be opened `budget` times. Openings counted: all rows of that data set name but "budget"
    and "propagate" ones (failed and interrupted ones included) plus in-flight reservations. `propagate` (a video's
    first-frame masks, the protocol's given input, docs/design.md §12) is recorded but neither counted nor refused. When the configured budget differs from the
    last recorded one, a row with purpose `budget` and setting `budget=<n>` (or `budget=unlimited` when a data set
    is unsealed) is appended first, so raising a budget is on the record.

A scoring job, in short::

    with opening(ledger_dir, dataset=..., role="eval", purpose="eval", checkpoint=..., setting=...,
                 n_images=..., annotations_sha256=ds.annotations_sha256, sealed=..., budget=...) as op:
        measures = [...]
        op.result_sha256 = sha256_json(measures)
    record = make_record(..., opening_row_sha256=op.row_sha256, ...)
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from evaluate.plumbing.atomic import write_bytes, write_json
from evaluate.ledger import BudgetExceeded, LedgerError
from evaluate.ledger.records import iso_time
from evaluate.plumbing.paths import OPENINGS
from evaluate.plumbing.provenance import sha256_json

ZERO_HASH = "0" * 64
OPENING_COLUMNS = (
    "seq", "time", "dataset", "role", "purpose", "checkpoint", "setting", "n_images", "annotations_sha256",
    "result_sha256", "prev_row_sha256", "row_sha256",
)
PURPOSES = ("select", "eval", "probe-train", "probe-eval", "propagate", "video-eval", "budget")
UNCOUNTED = ("budget", "propagate")  # purposes that do not count against a sealed data set's budget
FAILED_SUFFIX = "!failed"
INTERRUPTED_SUFFIX = "!interrupted"


def openings_path(ledger_dir: str | os.PathLike) -> Path:
    return Path(ledger_dir) / Path(OPENINGS).name


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
    row["time"] = fields.get("time") or iso_time(time.time())
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
        raise LedgerError(f"opening of {dataset}: purpose {purpose!r} is not one of "
                          f"{', '.join(p for p in PURPOSES if p != 'budget')}")
    if sealed and (budget is None or int(budget) < 0):
        raise LedgerError(f"opening of {dataset}: the data set is sealed but has no budget (set its budget, in the "
                          "experiment file, to the number of openings allowed)")
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
        if sealed and purpose not in UNCOUNTED:
            used = sum(1 for r in rows if r["dataset"] == dataset and r["purpose"] not in UNCOUNTED)
            in_flight = sum(1 for _, res in _reservations(ledger_dir)
                            if res["row"]["dataset"] == dataset and res["row"]["purpose"] not in UNCOUNTED)
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
