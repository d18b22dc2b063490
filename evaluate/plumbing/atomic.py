"""Outputs appear whole or not at all: write to a temporary name beside the target, then rename.

A job killed halfway leaves only a `.tmp-*` file that no reader trusts, never a truncated output.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success fsync and rename it onto `path`.

    On any exception the temporary file is removed and the target is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{target.name}.", dir=target.parent)
    os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs follow the umask like any other file
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write UTF-8 `text` to `path` atomically."""
    write_bytes(path, text.encode("utf-8"))


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and fixed separators: equal objects give equal bytes (and equal hashes)."""
    return json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write `obj` as canonical JSON to `path` atomically."""
    write_text(path, canonical_json(obj))


def plain_json(obj: Any) -> Any:
    """`obj` as plain JSON types (numpy scalars/arrays -> Python, tuples -> lists, keys -> str).

    NaN or infinity raises ValueError (JSON has no such number): a value that does not exist is None.
    """
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {str(k): plain_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return plain_json(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        if not math.isfinite(value):
            raise ValueError(f"value {value!r} is not finite; use null for a measure that has no value")
        return value
    if obj is None or isinstance(obj, str):
        return obj
    raise ValueError(f"holds a {type(obj).__name__}, which has no JSON form")


def read_json(path: str | os.PathLike) -> Any:
    """The JSON object in a file written by this package (its own outputs: manifests, shard ids, masks)."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
