"""Ledger records (`results/ledger/records/{kind}/{checkpoint}/{dataset}.json`): one immutable JSON per scoring job.

docs/design.md §7. A record is written once as canonical JSON with a `record_sha256` field: the sha256 of the
canonical JSON of the record without that field. It holds the per-image statistics of every measure
(`evaluate.scores.measures`), so tables and paired comparisons are rebuilt from records alone, never from features.
Overwrite policy: writing identical content again is a no-op; a record with different content at an existing path
is refused unless `replace=True`, and even then only by a record of the *same job* (same kind, checkpoint, data set
and role), i.e. a re-run of that job. The workflow passes `replace=True` (Snakemake has already removed the old
output before a re-run); two different jobs colliding on one path is always an error.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evaluate.plumbing.atomic import plain_json, write_json
from evaluate.ledger import LedgerError
from evaluate.scores import catalogue
from evaluate.scores.measures import MEASURE_FIELDS, REDUCERS
from evaluate.plumbing.paths import RECORD_IN_LEDGER
from evaluate.plumbing.provenance import code_version as _code_version
from evaluate.plumbing.provenance import library_version, sha256_json

# sweep on select, the others on eval; beside these, each box decoder's name is the kind of its CorLoc records (§15)
KINDS = ("sweep", "decoder", "probe", "video", "attention")
# kinds that read no label: their records cite no opening (`opening_row_sha256` null) and verify asks for none
LABEL_FREE_KINDS = ("attention",)


def opens_no_labels(record: dict) -> bool:
    """Whether a record cites no opening by right: a label-free kind's, or one whose reading the network does not
    have (`absent`: no measure, nothing scored, no label opened)."""
    return record["opening_row_sha256"] is None and (
        record["kind"] in LABEL_FREE_KINDS or (not record["measures"] and bool(record.get("absent"))))
RECORD_FIELDS = (
    "kind", "checkpoint", "run", "epoch", "checkpoint_sha256", "dataset", "role", "setting", "code_version",
    "config_hash", "torch_version", "started", "finished", "wall_s", "max_rss_mb", "opening_row_sha256",
    "measures",
)


def _plain(obj: Any) -> Any:
    try:
        return plain_json(obj)
    except ValueError as exc:
        raise LedgerError(f"record {exc}") from None


def record_hash(record: dict) -> str:
    """sha256 of the canonical JSON of `record` without its `record_sha256` field."""
    return sha256_json({k: v for k, v in record.items() if k != "record_sha256"})


def record_path(ledger_dir: str | os.PathLike, kind: str, checkpoint: str, dataset: str) -> Path:
    """Where the workflow keeps a job's record (`evaluate.plumbing.paths.RECORD` below `ledger_dir`)."""
    return Path(ledger_dir) / RECORD_IN_LEDGER.format(kind=kind, checkpoint=checkpoint, dataset=dataset)


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

    Every measure must have an entry in the measure catalogue (`evaluate.scores.catalogue`). An existing identical
    record is left alone. An existing different record is refused (LedgerError) unless
    `replace` is true and it belongs to the same job (same kind, checkpoint, dataset and role).
    """
    path = Path(path)
    body = _plain({k: v for k, v in record.items() if k != "record_sha256"})
    _check_record(body, str(path))
    unknown = [m["measure"] for m in body["measures"] if not catalogue.known(m["measure"])]
    if unknown:  # a record read back may be older than today's catalogue; a new one speaks its language
        raise LedgerError(f"{path}: measure(s) {', '.join(unknown)} not in the measure catalogue "
                          "(evaluate/scores/catalogue.py): add each measure's entry there")
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

def iso_time(t: float) -> str:
    """A `time.time()` value as ISO 8601 UTC with microseconds."""
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def max_rss_mb() -> float:
    """Peak resident memory of this process or its largest finished child, in MiB (ru_maxrss: KiB on Linux)."""
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    per_mib = 1024 * 1024 if sys.platform == "darwin" else 1024
    return round(peak / per_mib, 1)


def _torch_version() -> str:
    """torch's version (`library_version`: a job that only scores from files does not import torch for it)."""
    return library_version("torch") or "none"


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
    reading: str,
    decoder: str | None,
    config_hash: str,
    opening_row_sha256: str,
    measures: list[dict],
    started: float,
    finished: float | None = None,
    **extra: Any,
) -> dict:
    """A record dict for `write_record`: fills code_version, torch_version, times (ISO 8601 UTC), wall_s and
    max_rss_mb. `started`/`finished` are `time.time()` values; `finished` defaults to now. reading, decoder: what made
    its numbers (the reading the network gave, e.g. keys480 or keys-native, and the decoder that turned it into
    predictions, e.g. ncut, lost, tokencut; None where nothing decodes it, as for the attention spread), so a row of
    scores.csv says which without the settings' shapes. `extra`: further record-level fields (the architecture
    fields, ARCHITECTURE_FIELDS, which records before them lack)."""
    finished = time.time() if finished is None else finished
    return _plain({
        "kind": kind, "checkpoint": checkpoint, "run": run, "epoch": epoch,
        "checkpoint_sha256": checkpoint_sha256, **extra, "dataset": dataset, "role": role, "setting": setting,
        "reading": reading, "decoder": decoder, "code_version": _code_version(), "config_hash": config_hash, "torch_version": _torch_version(),
        "started": iso_time(started), "finished": iso_time(finished), "wall_s": round(finished - started, 3),
        "max_rss_mb": max_rss_mb(), "opening_row_sha256": opening_row_sha256, "measures": measures,
    })


# ------------------------------------------------------------------------------------------------ scores.csv
