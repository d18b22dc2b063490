"""The published benchmarks: their sizes and the numbers published on them (evaluate/datasets/benchmarks.yaml,
their one home), below every stage that uses them: a data set declaring a benchmark is checked against its size when
it is listed (`evaluate.datasets.manifest`), and the tables set its published rows beside the measured ones.

The file: `sources` (key -> {text}), `benchmarks` (name -> {images, text}; images null where no size is known here)
and `rows`, each {method, architecture, measure, source, values: {benchmark: value}, and `protocol` where the number
was measured by another protocol than this tool's}. A new method, measure or benchmark is a new entry, never code:
`published_rows(architecture, benchmark)` returns the rows a measured column of that benchmark stands beside (never
one of another protocol), `protocol_rows(architectures)` the others, which the tables set apart in a table of their
own, and `benchmark_size(name)` the size a data set declaring that benchmark is checked against (None: unknown).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from evaluate import EvaluationError

FILE = Path(__file__).with_name("benchmarks.yaml")


class PublishedError(EvaluationError):
    """benchmarks.yaml is malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class PublishedRow:
    """One published number: `method` (e.g. TokenCut), `architecture`, `benchmark`, `measure`, `value` (percent),
    `source` (its citation text)."""

    method: str
    architecture: str
    benchmark: str
    measure: str
    value: float
    source: str
    protocol: str | None = None


@lru_cache(maxsize=None)
def load_published(path: str = str(FILE)) -> tuple[tuple[PublishedRow, ...], dict]:
    """(every row, benchmarks table) of the file; PublishedError names a malformed entry."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    try:
        sources = {key: str(entry["text"]) for key, entry in data["sources"].items()}
        benchmarks = {key: dict(entry) for key, entry in data["benchmarks"].items()}
        rows = []
        for index, entry in enumerate(data["rows"]):
            if entry["source"] not in sources:
                raise PublishedError(f"{path}: rows[{index}] cites unknown source {entry['source']!r}")
            for benchmark, value in entry["values"].items():
                if benchmark not in benchmarks:
                    raise PublishedError(f"{path}: rows[{index}] names unknown benchmark {benchmark!r}")
                rows.append(PublishedRow(str(entry["method"]), str(entry["architecture"]), str(benchmark),
                                         str(entry["measure"]), float(value), sources[entry["source"]],
                                         None if entry.get("protocol") is None else str(entry["protocol"])))
    except (KeyError, TypeError, AttributeError) as exc:
        raise PublishedError(f"{path}: malformed ({exc!r}); see its header for the layout") from None
    return tuple(rows), benchmarks


def published_rows(architecture: str | None, benchmark: str | None) -> list[PublishedRow]:
    """The published rows of this tool's protocol for one architecture on one benchmark, in the file's order."""
    rows, _ = load_published()
    return [r for r in rows if r.architecture == architecture and r.benchmark == benchmark and r.protocol is None]


def protocol_rows(architectures: set[str]) -> list[PublishedRow]:
    """The published rows of other protocols for the given architectures, in the file's order: never a column of
    a measured number."""
    rows, _ = load_published()
    return [r for r in rows if r.architecture in architectures and r.protocol is not None]


def benchmark_size(benchmark: str) -> int | None:
    """The image count of a published benchmark (the file's `benchmarks`), None where the file knows none."""
    _, benchmarks = load_published()
    images = benchmarks[benchmark].get("images")
    return None if images is None else int(images)
