"""Where a number came from: file hashes, the code that computed it, the libraries it ran on.

`source_hash` hashes the *syntax tree* of Python files, so editing a comment or reformatting leaves it unchanged
while any change to what the code does changes it. The workflow puts it in each rule's `params:`, so Snakemake
re-runs exactly the jobs whose code changed.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

from evaluate.plumbing.atomic import atomic_path, canonical_json

REPO_ROOT = Path(__file__).resolve().parents[2]
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
    return _normalised(path.read_text(encoding="utf-8"), path.suffix)


def _normalised(text: str, suffix: str) -> str:
    """`_normalised_source` of a file's text: a Python file's normalised tree, any other file's text as it is."""
    return text if suffix != ".py" else _normalised_text(text)


@lru_cache(maxsize=None)
def _normalised_text(text: str) -> str:
    """`_normalised_source` of a Python file's text (cached by the text: every rule's code hash shares the modules
    it has in common with the others, and parsing them once per process saves seconds per Snakemake start)."""
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


KEPT_VERSION = "1"  # bump when what a kept value means changes (`_normalised_text`, the import scan): older
# entries are then never read


def kept_folder() -> Path:
    """Where the code hashes' parsed facts are kept between processes: `$XDG_CACHE_HOME/labelfree-seg-eval/`
    (default `~/.cache/...`). Every entry is keyed by the sha256 of a file's bytes, so it can never be stale."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "labelfree-seg-eval" / f"code-facts-v{KEPT_VERSION}"


def _kept(kind: str, key: str, compute: Callable[[], Any]) -> Any:
    """`compute()` (a JSON value), kept under `kept_folder()/kind/key` and read from there the next time, by any
    process: each job that records its code version, and each Snakemake start (the rules' code hashes), then reads
    about a hundred small files instead of parsing a hundred modules, about a second per process. A folder that
    cannot be read or written (a read-only HOME on a cluster node) only costs that second."""
    if (kind, key) in _KEPT:
        return _KEPT[kind, key]
    entry = kept_folder() / kind / key
    try:
        value = json.loads(entry.read_text(encoding="utf-8"))["value"]
    except (OSError, ValueError, KeyError, TypeError):
        value = compute()
        with contextlib.suppress(OSError):
            with atomic_path(entry) as tmp:
                Path(tmp).write_text(json.dumps({"value": value}), encoding="utf-8")
    _KEPT[kind, key] = value
    return value


_KEPT: dict[tuple[str, str], Any] = {}  # this process's reads of `_kept`, by the same keys


def normalised_digest(path: Path) -> str:
    """sha256 (hex) of `_normalised_source(path)`, kept by the file's bytes (`_kept`)."""
    data = path.read_bytes()
    return _kept("normalised", sha256_bytes(data),
                 lambda: sha256_bytes(_normalised(data.decode("utf-8"), path.suffix).encode("utf-8")))


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
        digest.update(normalised_digest(f).encode("ascii"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


PACKAGES = ("evaluate", "decoders")  # the project's own packages: what a code hash follows


def module_file(name: str) -> Path | None:
    """The file of one of the project's modules (`evaluate.readings.features` -> evaluate/readings/features.py), or None."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = REPO_ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _named_modules(nodes: Iterable[ast.AST], package: str) -> list[str]:
    """Every dotted name the import statements among `nodes` could load (relative imports resolved; `from pkg
    import x` names both pkg and pkg.x, since x may be a module): sorted, and not yet checked against the tree."""
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return sorted(found)


def _project_modules(names: Iterable[str]) -> set[str]:
    """The names that are the project's modules in today's tree (checked each time, never kept: a module added
    later turns a name into one)."""
    return {name for name in names if module_file(name) is not None}


def _with_parents(name: str) -> list[str]:
    """`a.b.c` -> [a, a.b, a.b.c]: importing a module runs its packages' __init__ first."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def module_closure(names: Iterable[str]) -> list[Path]:
    """Every project module that importing `names` can execute: their imports anywhere in the file (function
    bodies included), transitively, with their packages' __init__ files. Sorted paths."""
    seen: set[str] = set()
    todo = [parent for name in names for parent in _with_parents(name)]
    while todo:
        name = todo.pop()
        if name in seen or module_file(name) is None:
            continue
        seen.add(name)
        path = module_file(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for imported in _file_imports(path, package):
            todo.extend(_with_parents(imported))
    return sorted(module_file(name) for name in seen)


def _file_imports(path: Path, package: str) -> set[str]:
    """The project's modules a file imports anywhere in it (function bodies included)."""
    data = path.read_bytes()
    names = _kept("imports", f"{sha256_bytes(data)}-{package}",
                  lambda: _named_modules(ast.walk(ast.parse(data, filename=str(path))), package))
    return _project_modules(names)


def _job_imports(data: bytes, path: Path, job: str, function: str, package: str) -> list[str]:
    """The names imported by the job module's top level (its bytes `data`, read from `path`), the job function and
    the module's helper functions it calls, transitively (not yet checked against the tree)."""
    tree = ast.parse(data, filename=str(path))
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if function not in functions:
        raise ValueError(f"job {job!r}: {path} defines no function {function!r}")
    reached, todo = set(), [function]
    while todo:  # the job function and the module's own functions it names, transitively
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo.extend(n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name) and n.id in functions)
    nodes = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for name in reached:
        nodes.extend(ast.walk(functions[name]))
    return _named_modules(nodes, package)


def job_modules(job: str) -> list[Path]:
    """The files a rule's job executes: `"evaluate.jobs.decoder:decode"` -> the job module, and the closure of the
    modules its module-level imports, the job function and the module's helper functions it calls import."""
    module, _, function = job.partition(":")
    path = module_file(module)
    if path is None or not function:
        raise ValueError(f"job {job!r}: expected 'package.module:function' of a module of {', '.join(PACKAGES)}")
    package = module.rpartition(".")[0]
    data = path.read_bytes()
    names = _kept("job-imports", f"{sha256_bytes(data)}-{function}-{package}",
                  lambda: _job_imports(data, path, job, function, package))
    parents = _with_parents(package) if package else []
    return sorted(set(module_closure([*parents, *_project_modules(names)])) | {path})


def module_code_hash(module: str) -> str:
    """`source_hash` of what importing one of the project's modules can execute (`module_closure`): the part of a
    job's code the job reaches by a name it is handed rather than by an import (a data set's kind)."""
    if module_file(module) is None:
        raise ValueError(f"{module!r} is not a module of {', '.join(PACKAGES)}")
    return source_hash(module_closure([module]))


def job_code_hash(job: str, *extra: str | os.PathLike) -> str:
    """`source_hash` of what a rule's job executes (`job_modules`), plus `extra` files (its script adapter)."""
    return source_hash([*extra, *job_modules(job)])


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


# the libraries whose arithmetic the numbers depend on: module -> its distribution
LIBRARIES = {"torch": "torch", "numpy": "numpy", "scipy": "scipy", "PIL": "pillow", "pycocotools": "pycocotools",
             "sklearn": "scikit-learn"}


def library_version(name: str) -> str | None:
    """The version of one of LIBRARIES (by module name): the imported module's `__version__`, else its
    distribution's installed version (the same string, without importing torch, scipy or scikit-learn into a job
    that never uses them); None when it is not installed."""
    version = getattr(sys.modules.get(name), "__version__", None)
    if version is not None:
        return str(version)
    try:
        return importlib.metadata.version(LIBRARIES[name])
    except importlib.metadata.PackageNotFoundError:
        return None


def library_versions() -> dict[str, str]:
    """Versions of the libraries whose arithmetic the numbers depend on (`library_version`); a library that is not
    installed is left out."""
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        if (version := library_version(name)) is not None:
            versions[name] = version
    return versions


def config_hash(config: dict) -> str:
    """First 16 hex digits of the sha256 of the config's canonical JSON."""
    return sha256_json(config)[:16]
