"""A scoring run again on the same inputs, code and settings reuses its record and opens no labels (docs/design.md
§7, Interpretations).

Snakemake re-runs a job whenever an input is rewritten, even with the same bytes: with `features.keep: false` a
re-decode re-extracts the shard, so every probe and decoder score of it would open the eval labels again for the
same numbers, and a forced re-selection would open the select labels again for the same choice. So each scoring's
record is also kept under its reuse key, the sha256 of everything that decides it (the bytes of its input files,
the job's code hash and settings, the checkpoint's identity); a job whose key is kept writes that record again,
byte for byte, and opens no labels.

What a scoring's opening row hashes (`result_sha256`) is its result: the record's measures for eval scoring; the
selection's sweep table rows, which its record does not hold, are kept beside it. A kept entry stands for a new
scoring only when the record's hash checks, it is the same job, the opening row it cites is in this ledger's
`openings.csv`, and that row's `result_sha256` is the kept result's hash.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from evaluate.plumbing.paths import OPENINGS, SCORE_REUSE, SCORE_REUSE_RESULT

log = logging.getLogger("evaluate.ledger.reuse")


def reuse_key(files: Iterable[str | os.PathLike], values: dict) -> str:
    """sha256 of what decides a record: the bytes of `files`, in order, and `values` (canonical JSON)."""
    from evaluate.plumbing.provenance import sha256_file, sha256_json

    return sha256_json({"files": [sha256_file(f) for f in files], "values": values})


@dataclass(frozen=True)
class Kept:
    """A scoring kept under its reuse key: its record, and its result (what its opening row's `result_sha256`
    hashes: the record's measures, or the result kept beside the record)."""

    record: dict
    result: Any


def kept_scoring(key: str, expected: dict, *, result_beside: bool) -> Kept | None:
    """The scoring kept under `key` when it can stand for a new one (module docstring), else None (absent, or
    why is logged).

    expected: record fields that must match (kind, checkpoint, dataset, role, and the setting where the job knows
    it beforehand). result_beside: the result is kept in a file beside the record (else it is the measures).
    """
    from evaluate.ledger import LedgerError
    from evaluate.ledger.openings import read_openings
    from evaluate.ledger.records import read_record
    from evaluate.plumbing.atomic import read_json
    from evaluate.plumbing.provenance import sha256_json

    path, result_path = Path(SCORE_REUSE.format(key=key)), Path(SCORE_REUSE_RESULT.format(key=key))
    if not path.is_file() or (result_beside and not result_path.is_file()):
        return None
    try:
        record = read_record(path)
        differs = [key for key, value in expected.items() if record.get(key) != value]
        if differs:
            log.warning("not reusing %s: its %s differ from this job's", path, ", ".join(differs))
            return None
        rows = {row["row_sha256"]: row for row in read_openings(OPENINGS)}
        result = read_json(result_path) if result_beside else record["measures"]
    except (LedgerError, ValueError) as exc:  # ValueError: a kept result that is not JSON
        log.warning("not reusing %s: %s", path, exc)
        return None
    row = rows.get(record["opening_row_sha256"])
    if row is None:
        log.warning("not reusing %s: the opening it cites is not in %s", path, OPENINGS)
        return None
    if row["result_sha256"] != sha256_json(result):
        log.warning("not reusing %s: its result is not the one its opening row in %s recorded", path, OPENINGS)
        return None
    return Kept(record=record, result=result)


def keep_scoring(key: str, record_file: str | os.PathLike, result: Any = None) -> None:
    """Keep a scoring under `key`: a copy of its record file, and `result` beside it unless None (the result
    being the record's measures). The result goes first, so a kept record always has its result. It is written
    in its own key order (the order of a table's columns), which its hash, over sorted keys, does not see."""
    import json

    from evaluate.plumbing.atomic import plain_json, write_bytes, write_text

    if result is not None:
        text = json.dumps(plain_json(result), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
        write_text(SCORE_REUSE_RESULT.format(key=key), text)
    write_bytes(SCORE_REUSE.format(key=key), Path(record_file).read_bytes())
