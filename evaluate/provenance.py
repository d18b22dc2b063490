"""Where a number came from: file hashes, the code that computed it, the libraries it ran on.

`source_hash` hashes the *syntax tree* of Python files, so editing a comment or reformatting leaves it unchanged
while any change to what the code does changes it. The workflow puts it in each rule's `params:`, so Snakemake
re-runs exactly the jobs whose code changed.
"""

from __future__ import annotations

import ast
import hashlib
import os
import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from evaluate.atomic import canonical_json

REPO_ROOT = Path(__file__).resolve().parent.parent
CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj` (sorted keys): the same object always gives the same hash."""
    return sha256_bytes(canonical_json(obj).encode("utf-8"))


def _normalised_source(path: Path) -> str:
    """The file's syntax tree without docstrings or comments; a file that does not parse is hashed as text."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def source_hash(paths: Iterable[str | os.PathLike]) -> str:
    """A short hash of what the given files or packages *do* (first 16 hex digits of a sha256).

    Each entry is a file or a folder (all `*.py` below it, sorted). Paths are relative to the repository root.
    Comments, docstrings and formatting do not count.
    """
    digest = hashlib.sha256()
    files: list[Path] = []
    for entry in paths:
        p = Path(entry)
        p = p if p.is_absolute() else REPO_ROOT / p
        files.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    for f in files:
        digest.update(str(f.relative_to(REPO_ROOT)).encode())
        digest.update(b"\0")
        digest.update(_normalised_source(f).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


@lru_cache(maxsize=1)
def code_version() -> str:
    """`<git commit>[+dirty]:<source hash of evaluate/ and decoders/>`; `nogit` outside a git checkout."""
    src = source_hash(["evaluate", "decoders"])
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "evaluate", "decoders"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
        commit = commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        commit = "nogit"
    return f"{commit}:{src}"


def library_versions() -> dict[str, str]:
    """Versions of the libraries whose arithmetic the numbers depend on."""
    versions = {"python": platform.python_version()}
    for name in ("torch", "numpy", "scipy", "PIL", "pycocotools", "sklearn"):
        module = sys.modules.get(name)
        if module is None:
            try:
                module = __import__(name)
            except ImportError:
                continue
        versions[name] = getattr(module, "__version__", "unknown")
    return versions


def config_hash(config: dict) -> str:
    """First 16 hex digits of the sha256 of the config's canonical JSON."""
    return sha256_json(config)[:16]
