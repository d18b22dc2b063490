"""Spherical k-means on a set's tokens, exactly as DESIGN 16 writes it, streamed (docs/design.md §17).

X = every token of the set in image order, then row-major, float64, each divided by its norm (a zero token stays 0).
`rng = numpy.random.default_rng(seed)`; `n_init` restarts, drawn from that one generator in turn. Per restart:

- Seeding: the first centre X[rng.integers(N)], d = max(0, 1 - X c); each next centre X[i],
  i = min(searchsorted(q, rng.random() * q[-1], side="right"), N - 1), q = cumsum(d) (sequential), then
  d = min(d, max(0, 1 - X c_new)); K centres in all.
- Lloyd: a = argmax_k X c_k (first on ties); stop if a repeats the previous a, else c_k = normalise(sum of X_i with
  a_i = k) (an empty cluster keeps its centre; a cluster whose tokens sum to zero gets the zero centre, as a zero
  token stays 0); at most `max_iter` assignments.
- Objective: sum_i max_k X_i c_k with the final centres.

The best restart wins (the larger objective; the earlier on ties). Its clusters are renumbered by first appearance
(argmax with the final centres) in X's order; token-less clusters follow in their order.

Streaming. The tokens come from a `TokenStream`: chunks of (n_i, D) float arrays in a fixed order (one per shard or
image), read again for every pass, so a set whose tokens take gigabytes is clustered in the memory of a few blocks
plus, per token, d (float64, the seeding's distance) and a (its cluster, one or two bytes). Every pass regroups the
chunks into fixed blocks of BLOCK_ROWS tokens counted from the set's start, so every product and sum sees the same
rows whatever the chunking: chunks of any sizes give the same centres, bit for bit. The per-cluster sums add the
tokens one by one in X's order (`numpy.add.at`), q's running sum is carried from block to block, and the objective
adds each block's maxima (pairwise within the block) to a running total. A new centre is read by `TokenStream.row`:
cheap where the chunks are lazy (`TokenStream.from_npy`: memory-mapped shards), else a partial pass.

Products X c are float64 BLAS products: on one machine the fit is bit-reproducible; across BLAS libraries their last
bits may differ, which moves an assignment only where two centres lie within about 1e-15 of a token's best.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluate.plumbing.provenance import sha256_bytes
from evaluate.semseg import SemsegError

BLOCK_ROWS = 4096  # tokens per block of every pass (part of the arithmetic: the blocks are fixed from X's start)
SUM_BLOCK = 1 << 16  # entries of d per step of q's carried running sum


@dataclass(frozen=True)
class ClusterSettings:
    """K clusters, the generator's seed, the restarts and the cap on Lloyd's assignments per restart."""

    k: int
    seed: int = 0
    n_init: int = 5
    max_iter: int = 100

    def __post_init__(self) -> None:
        for name, low in (("k", 1), ("seed", 0), ("n_init", 1), ("max_iter", 1)):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise SemsegError(f"clustering setting {name} must be an integer >= {low}, got {value!r}")

    @property
    def setting(self) -> str:
        """The ledger's setting: "k=27,seed=0,n_init=5,iter=100"."""
        return f"k={self.k},seed={self.seed},n_init={self.n_init},iter={self.max_iter}"


class TokenStream:
    """A set's tokens in a fixed order, read as chunks.

    open_chunks: returns a fresh iterable of (n_i, D) float arrays (float32 as stored), the same rows in the same
    order on every call (one chunk per shard or image; empty chunks are skipped). The stream learns N and D from the
    chunks' shapes on first need (a pass that reads no values where the chunks are lazy, e.g. memory-mapped).
    """

    def __init__(self, open_chunks: Callable[[], Iterable[np.ndarray]]):
        self._open = open_chunks
        self._shape: tuple[int, int] | None = None

    @classmethod
    def from_arrays(cls, arrays: Sequence[np.ndarray]) -> TokenStream:
        """Chunks held in memory (tests, small sets)."""
        held = list(arrays)
        return cls(lambda: iter(held))

    @classmethod
    def from_npy(cls, paths: Sequence[str | os.PathLike]) -> TokenStream:
        """Chunks in .npy files, each memory-mapped while it is read and released after: a pass holds one file's
        pages at a time, and reading one row touches one file."""
        files = [Path(p) for p in paths]

        def chunks() -> Iterator[np.ndarray]:
            for path in files:
                try:
                    yield np.load(path, mmap_mode="r", allow_pickle=False)
                except (OSError, ValueError) as exc:
                    raise SemsegError(f"{path}: cannot read the tokens ({exc})") from None

        return cls(chunks)

    def chunks(self) -> Iterator[np.ndarray]:
        """The chunks in order, each checked: 2-D, floating, the width of the first."""
        width = None
        for index, chunk in enumerate(self._open()):
            if not isinstance(chunk, np.ndarray) or chunk.ndim != 2 or chunk.dtype.kind != "f":
                shape = getattr(chunk, "shape", None)
                raise SemsegError(f"token chunk {index}: expected a (n, D) float array, got {type(chunk).__name__} "
                                  f"{shape}")
            if width is None:
                width = chunk.shape[1]
            elif chunk.shape[1] != width:
                raise SemsegError(f"token chunk {index} is {chunk.shape[1]} wide; the first chunk is {width}")
            if chunk.shape[0]:
                yield chunk

    @property
    def shape(self) -> tuple[int, int]:
        """(N, D): tokens and width."""
        if self._shape is None:
            n, width = 0, None
            for chunk in self.chunks():
                n += chunk.shape[0]
                width = chunk.shape[1]
            if not n:
                raise SemsegError("no tokens to cluster (every chunk is empty)")
            self._shape = (n, int(width))
        return self._shape

    def row(self, index: int) -> np.ndarray:
        """Token `index` as stored, float64 (D,)."""
        offset = 0
        for chunk in self.chunks():
            if index < offset + chunk.shape[0]:
                return np.array(chunk[index - offset], dtype=np.float64)
            offset += chunk.shape[0]
        raise SemsegError(f"token {index} asked of a stream of {offset} tokens")

    def unit_row(self, index: int) -> np.ndarray:
        """X[index]: the token divided by its norm (zero stays 0), float64 (D,), by the blocks' very arithmetic."""
        row = self.row(index)[None, :]
        return unit_rows(row, f"token {index}")[0]

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(start, X[start:start + b]) for the fixed blocks of BLOCK_ROWS tokens from X's start: float64 unit rows.
        The block's array is reused by the next block: use it before advancing."""
        n, width = self.shape
        buffer = np.empty((min(BLOCK_ROWS, n), width), dtype=np.float64)
        fill = start = 0
        for chunk in self.chunks():
            pos = 0
            while pos < chunk.shape[0]:
                take = min(buffer.shape[0] - fill, chunk.shape[0] - pos)
                buffer[fill: fill + take] = chunk[pos: pos + take]
                fill += take
                pos += take
                if fill == buffer.shape[0]:
                    yield start, unit_rows(buffer, f"tokens {start}..{start + fill - 1}")
                    start += fill
                    fill = 0
            del chunk  # release a memory-mapped chunk before the next is opened
        if fill:
            yield start, unit_rows(buffer[:fill], f"tokens {start}..{start + fill - 1}")
            start += fill
        if start != n:
            raise SemsegError(f"the token stream gave {start} tokens on this pass and {n} before; its chunks must "
                              "be the same on every pass")


def unit_rows(x: np.ndarray, where: str) -> np.ndarray:
    """x (b, D) float64, in place: each row divided by its norm sqrt(sum of squares) (zero rows stay 0); returned.
    A row with a non-finite value is refused."""
    norms = np.sqrt(np.add.reduce(x * x, axis=1))
    if not np.isfinite(norms).all():
        bad = int(np.flatnonzero(~np.isfinite(norms))[0])
        raise SemsegError(f"{where}: row {bad} holds a non-finite value")
    np.divide(x, norms[:, None], out=x, where=norms[:, None] > 0)
    return x


def _carried_cumsum(d: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(start, q[start:start + b]) of q = cumsum(d) (sequential: q_i = q_(i-1) + d_i), step by step with the
    running sum carried, so q is never held whole."""
    carry = 0.0
    step = np.empty(min(SUM_BLOCK, d.shape[0]) + 1, dtype=np.float64)
    for start in range(0, d.shape[0], SUM_BLOCK):
        part = d[start: start + SUM_BLOCK]
        step[0] = carry
        step[1: part.shape[0] + 1] = part
        q = np.cumsum(step[: part.shape[0] + 1])[1:]
        carry = float(q[-1])
        yield start, q


def _seed_index(d: np.ndarray, u: float) -> int:
    """min(searchsorted(q, u * q[-1], side="right"), N - 1), q = cumsum(d) (sequential)."""
    total = 0.0
    for _, q in _carried_cumsum(d):
        total = float(q[-1])
    target = u * total
    for start, q in _carried_cumsum(d):
        if q[-1] > target:
            return start + int(np.searchsorted(q, target, side="right"))
    return d.shape[0] - 1


def _seed(stream: TokenStream, rng: np.random.Generator, k: int, d: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """The restart's K seed centres (K, D) float64 and the tokens they are; `d` (N,) is the working distance."""
    n, width = stream.shape
    centres = np.empty((k, width), dtype=np.float64)
    chosen = [int(rng.integers(n))]
    centres[0] = stream.unit_row(chosen[0])
    for start, x in stream.blocks():
        np.maximum(0.0, 1.0 - x @ centres[0], out=d[start: start + x.shape[0]])
    for j in range(1, k):
        chosen.append(_seed_index(d, rng.random()))
        centres[j] = stream.unit_row(chosen[j])
        for start, x in stream.blocks():
            part = d[start: start + x.shape[0]]
            np.minimum(part, np.maximum(0.0, 1.0 - x @ centres[j]), out=part)
    return centres, chosen


def _normalised(sums: np.ndarray, counts: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """c_k = sum_k / |sum_k| where cluster k has tokens (a zero sum gives 0), else the previous centre."""
    centres = previous.copy()
    filled = counts > 0
    centres[filled] = unit_rows(sums[filled].copy(), "cluster sums")
    return centres


def _lloyd(stream: TokenStream, centres: np.ndarray, a: np.ndarray, max_iter: int) -> tuple[np.ndarray, int]:
    """Lloyd from the seed centres: (final centres, assignments made). `a` (N,) holds the assignments."""
    k = centres.shape[0]
    a[:] = k  # no previous assignment: the first never repeats
    for iteration in range(1, max_iter + 1):
        sums = np.zeros_like(centres)
        counts = np.zeros(k, dtype=np.int64)
        changed = False
        for start, x in stream.blocks():
            labels = np.argmax(x @ centres.T, axis=1)  # the first of equal maxima
            previous = a[start: start + x.shape[0]]
            changed = changed or not np.array_equal(previous, labels)
            previous[:] = labels
            np.add.at(sums, labels, x)  # token by token, in X's order
            counts += np.bincount(labels, minlength=k)
        if not changed:
            return centres, iteration
        centres = _normalised(sums, counts, centres)
    return centres, max_iter


def _objective(stream: TokenStream, centres: np.ndarray) -> tuple[float, list[int], np.ndarray]:
    """(sum_i max_k X_i c_k, clusters in order of first appearance, tokens per cluster (K,) int64)."""
    k = centres.shape[0]
    total = 0.0
    first: list[int] = []
    seen = np.zeros(k, dtype=bool)
    sizes = np.zeros(k, dtype=np.int64)
    for _, x in stream.blocks():
        scores = x @ centres.T
        labels = np.argmax(scores, axis=1)
        total += float(np.add.reduce(scores[np.arange(labels.shape[0]), labels]))
        sizes += np.bincount(labels, minlength=k)
        if not seen.all():
            present, at = np.unique(labels, return_index=True)
            for cluster in present[np.argsort(at)]:
                if not seen[cluster]:
                    seen[cluster] = True
                    first.append(int(cluster))
    return total, first, sizes


@dataclass(frozen=True)
class ClusterFit:
    """A fit's outcome: `centres` (K, D) float64 unit rows, renumbered (cluster j = centres[j]); the chosen
    restart's `objective`; per restart its `objectives`, `iterations` (Lloyd's assignments) and `seeds` (the tokens
    its centres started from); `restart` (0-based, the chosen); `sizes` (K,) tokens per renumbered cluster; N, D."""

    settings: ClusterSettings
    centres: np.ndarray
    objective: float
    restart: int
    objectives: tuple[float, ...]
    iterations: tuple[int, ...]
    seeds: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]
    n_tokens: int
    width: int
    block_rows: int = field(default=BLOCK_ROWS)

    @property
    def centres_sha256(self) -> str:
        """sha256 of the centres' float64 little-endian C-order bytes."""
        return sha256_bytes(np.ascontiguousarray(self.centres, dtype="<f8").tobytes())

    def record(self) -> dict[str, Any]:
        """The fit as plain JSON: settings, sizes, per-restart outcomes, the centres (exact float64 values) and
        their sha256."""
        s = self.settings
        return {
            "setting": s.setting, "k": s.k, "seed": s.seed, "n_init": s.n_init, "max_iter": s.max_iter,
            "n_tokens": self.n_tokens, "width": self.width, "block_rows": self.block_rows,
            "objective": self.objective, "restart": self.restart, "objectives": list(self.objectives),
            "iterations": list(self.iterations), "seeds": [list(x) for x in self.seeds], "sizes": list(self.sizes),
            "centres_sha256": self.centres_sha256, "centres": self.centres.tolist(),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ClusterFit:
        """The fit a `record()` wrote; its centres are checked against their sha256."""
        fit = cls(
            settings=ClusterSettings(int(record["k"]), int(record["seed"]), int(record["n_init"]),
                                     int(record["max_iter"])),
            centres=np.asarray(record["centres"], dtype=np.float64), objective=float(record["objective"]),
            restart=int(record["restart"]), objectives=tuple(float(v) for v in record["objectives"]),
            iterations=tuple(int(v) for v in record["iterations"]),
            seeds=tuple(tuple(int(i) for i in x) for x in record["seeds"]),
            sizes=tuple(int(v) for v in record["sizes"]), n_tokens=int(record["n_tokens"]),
            width=int(record["width"]), block_rows=int(record["block_rows"]))
        if fit.centres_sha256 != record["centres_sha256"]:
            raise SemsegError("the fit's centres do not match their recorded sha256")
        return fit


def fit_clusters(stream: TokenStream, settings: ClusterSettings) -> ClusterFit:
    """Spherical k-means of the stream's tokens (module docstring)."""
    n, width = stream.shape
    k = settings.k
    if n < k:
        raise SemsegError(f"{n} tokens cannot make {k} clusters")
    rng = np.random.default_rng(settings.seed)
    d = np.empty(n, dtype=np.float64)
    a = np.empty(n, dtype=np.min_scalar_type(k))  # k itself marks "no assignment yet"
    objectives, iterations, seeds = [], [], []
    best: tuple[float, int, np.ndarray, list[int], np.ndarray] | None = None
    for restart in range(settings.n_init):
        centres, chosen = _seed(stream, rng, k, d)
        centres, made = _lloyd(stream, centres, a, settings.max_iter)
        objective, first, sizes = _objective(stream, centres)
        objectives.append(objective)
        iterations.append(made)
        seeds.append(tuple(chosen))
        if best is None or objective > best[0]:
            best = (objective, restart, centres, first, sizes)
    objective, restart, centres, first, sizes = best
    appeared = set(first)
    order = first + [c for c in range(k) if c not in appeared]
    return ClusterFit(settings=settings, centres=centres[order], objective=objective, restart=restart,
                      objectives=tuple(objectives), iterations=tuple(iterations), seeds=tuple(seeds),
                      sizes=tuple(int(sizes[c]) for c in order), n_tokens=n, width=width)
