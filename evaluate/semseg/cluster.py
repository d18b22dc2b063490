"""Spherical k-means on a set's tokens, exactly as DESIGN 16 writes it, streamed (docs/design.md §18).

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

How it runs (none of it changes a number):
- Fixed blocks. Every pass regroups the stream's chunks ((n_i, D) float arrays in a fixed order, one per shard or
  image: `TokenStream`) into blocks of BLOCK_ROWS tokens counted from X's start, so every product and sum sees the
  same rows whatever the chunking: chunks of any sizes give the same centres, bit for bit. A cluster's sum adds its
  tokens in X's order within a block (a sparse one-hot product), block after block; q's running sum is carried from
  block to block (q is never held whole); the objective adds each block's maxima (pairwise within the block).
- Restarts side by side. The generator's calls do not depend on the tokens (per restart: one integer, then K - 1
  uniforms), so they are drawn first, in the contract's order, and every pass serves all restarts: the seeding takes
  K passes, Lloyd as many as the slowest restart, not their sums. Each restart has its own products (x @ c_r, x @ C_r^T)
  and sums, so its bits depend neither on the others nor on `threads`, the restarts' work on a block running in a
  thread pool with BLAS held to one thread.
- Memory. A set whose float64 unit tokens take at most TOKENS_MEMORY bytes is normalised once and held; a larger one
  is streamed anew every pass (`TokenStream.from_npy`: memory-mapped shards, one at a time), so tokens taking
  gigabytes are clustered in the memory of a few blocks. Per token the fit keeps d (float64 per restart, while
  seeding) and a (one or two bytes per restart): in memory up to STATE_MEMORY bytes, else in an unlinked temporary
  file read and written a block at a time. A new centre is read by `unit_row` (a held block's row, or one file's).

Products X c are float64 BLAS products: on one machine the fit is bit-reproducible; across BLAS libraries their last
bits may differ, which moves an assignment only where two centres lie within about 1e-15 of a token's best.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

from evaluate.plumbing.provenance import sha256_bytes
from evaluate.plumbing.threads import one_blas_thread
from evaluate.semseg import SemsegError

BLOCK_ROWS = 4096  # tokens per block of every pass (part of the arithmetic: the blocks are fixed from X's start)
SUM_BLOCK = 1 << 16  # rows of d per step of q's carried running sum
STATE_MEMORY = 64 << 20  # bytes of per-token state (d, a) held in memory; past it, a temporary file
TOKENS_MEMORY = 256 << 20  # bytes of float64 unit tokens held for the whole fit; past it, they are streamed anew


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


class _TokenState:
    """(N, m) per-token working values of one dtype: in memory up to STATE_MEMORY bytes, else in an unlinked temporary
    file, read and written a block of rows at a time, so the fit's memory does not grow with N."""

    def __init__(self, n: int, m: int, dtype: Any, fill: float):
        self.shape = (int(n), int(m))
        self.dtype = np.dtype(dtype)
        self._row_bytes = self.shape[1] * self.dtype.itemsize
        self._file = None
        if self.shape[0] * self._row_bytes <= STATE_MEMORY:
            self._array = np.full(self.shape, fill, dtype=self.dtype)
            return
        self._array = None
        self._file = tempfile.TemporaryFile(prefix="semseg-state-")  # noqa: SIM115 (closed by close())
        block = np.full((BLOCK_ROWS, self.shape[1]), fill, dtype=self.dtype)
        for start in range(0, self.shape[0], BLOCK_ROWS):
            self.write(start, block[: min(BLOCK_ROWS, self.shape[0] - start)])

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows start..stop - 1: (stop - start, m), a copy."""
        if self._file is None:
            return self._array[start:stop].copy()
        out = np.empty((stop - start, self.shape[1]), dtype=self.dtype)
        view = memoryview(out).cast("B")
        done = 0
        while done < view.nbytes:
            got = os.preadv(self._file.fileno(), [view[done:]], start * self._row_bytes + done)
            if got <= 0:
                raise SemsegError("the clustering's temporary state file ended early")
            done += got
        return out

    def write(self, start: int, values: np.ndarray) -> None:
        """Rows start.. set to `values` (b, m)."""
        if self._file is None:
            self._array[start: start + values.shape[0]] = values
            return
        data = memoryview(np.ascontiguousarray(values, dtype=self.dtype)).cast("B")
        done = 0
        while done < data.nbytes:
            done += os.pwrite(self._file.fileno(), data[done:], start * self._row_bytes + done)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._array = None


class _UnitTokens:
    """X for the fit: the stream's fixed blocks of unit tokens, held once normalised where X takes at most
    TOKENS_MEMORY bytes (a small set: no pass reads or normalises its tokens again), else streamed anew every pass.
    Held or streamed, the blocks are the same arrays of the same bits."""

    def __init__(self, stream: TokenStream):
        self.stream = stream
        self.shape = stream.shape
        n, width = self.shape
        self._held = None
        if n * width * 8 <= TOKENS_MEMORY:
            self._held = [(start, x.copy()) for start, x in stream.blocks()]

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        return iter(self._held) if self._held is not None else self.stream.blocks()

    def unit_row(self, index: int) -> np.ndarray:
        if self._held is None:
            return self.stream.unit_row(index)
        start, block = self._held[index // BLOCK_ROWS]
        return block[index - start].copy()


def _carried_cumsum(d: _TokenState) -> Iterator[tuple[int, np.ndarray]]:
    """(start, q[start:start + b]) of q = cumsum(d) down each column (sequential: q_i = q_(i-1) + d_i), step by step
    with the running sums carried, so q is never held whole: (b, m) float64."""
    n, m = d.shape
    carry = np.zeros(m, dtype=np.float64)
    for start in range(0, n, SUM_BLOCK):
        part = d.read(start, min(n, start + SUM_BLOCK))
        step = np.empty((part.shape[0] + 1, m), dtype=np.float64)
        step[0] = carry
        step[1:] = part
        q = np.cumsum(step, axis=0)[1:]
        carry = q[-1].copy()
        yield start, q


def _seed_indices(d: _TokenState, draws: Sequence[float]) -> list[int]:
    """Per column r of d: min(searchsorted(q_r, draws[r] * q_r[-1], side="right"), N - 1), q_r = cumsum(d[:, r])."""
    n, m = d.shape
    totals = np.zeros(m, dtype=np.float64)
    for _, q in _carried_cumsum(d):
        totals = q[-1]
    targets = [float(u) * float(total) for u, total in zip(draws, totals)]
    found: list[int | None] = [None] * m
    for start, q in _carried_cumsum(d):
        for r in range(m):
            if found[r] is None and q[-1, r] > targets[r]:
                found[r] = start + int(np.searchsorted(q[:, r], targets[r], side="right"))
        if all(f is not None for f in found):
            break
    return [n - 1 if f is None else f for f in found]


def _distance(x: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """max(0, 1 - x c): (b,) float64."""
    y = x @ centre
    np.subtract(1.0, y, out=y)
    return np.maximum(y, 0.0, out=y)


Work = Callable[[Callable[[int], Any], Sequence[int]], list]


def _seed(stream: TokenStream | _UnitTokens, draws: Sequence[tuple[int, list[float]]], k: int,
          each: Work = lambda f, rs: [f(r) for r in rs]) -> tuple[np.ndarray, list[list[int]]]:
    """Every restart's K seed centres (R, K, D) float64 and the tokens they are, restart r from its draws (the first
    token, then the K - 1 uniforms). The restarts are seeded side by side, one pass per centre for all of them; each
    restart's product is its own (x @ c, computed by `each`, which may run them in threads), so its bits depend
    neither on how many run beside it nor on the threads."""
    n, width = stream.shape
    m = len(draws)
    centres = np.empty((m, k, width), dtype=np.float64)
    chosen = [[first] for first, _ in draws]
    d = _TokenState(n, m, np.float64, 0.0)
    try:
        for r in range(m):
            centres[r, 0] = stream.unit_row(chosen[r][0])
        for start, x in stream.blocks():
            d.write(start, np.stack(each(lambda r: _distance(x, centres[r, 0]), range(m)), axis=1))  # noqa: B023
        for j in range(1, k):
            for r, index in enumerate(_seed_indices(d, [uniforms[j - 1] for _, uniforms in draws])):
                chosen[r].append(index)
                centres[r, j] = stream.unit_row(index)
            for start, x in stream.blocks():
                part = d.read(start, start + x.shape[0])
                for r, distance in enumerate(each(lambda r: _distance(x, centres[r, j]), range(m))):  # noqa: B023
                    np.minimum(part[:, r], distance, out=part[:, r])
                d.write(start, part)
    finally:
        d.close()
    return centres, chosen


def _normalised(sums: np.ndarray, counts: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """c_k = sum_k / |sum_k| where cluster k has tokens (a zero sum gives 0), else the previous centre."""
    centres = previous.copy()
    filled = counts > 0
    centres[filled] = unit_rows(sums[filled].copy(), "cluster sums")
    return centres


def _cluster_sums(x: np.ndarray, labels: np.ndarray, k: int, counts: np.ndarray) -> np.ndarray:
    """(K, D) sums of a block's rows by cluster, each cluster's rows added in token order (a sparse one-hot
    product: scipy adds a row's entries in column order)."""
    order = np.argsort(labels, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(counts)])
    one_hot = scipy.sparse.csr_matrix((np.ones(labels.shape[0]), order, indptr), shape=(k, labels.shape[0]))
    return np.asarray(one_hot @ x)


@dataclass
class _Restart:
    """One restart's Lloyd: its centres (K, D), assignments made, phase ("assign", "objective" once max_iter is
    spent and the centres moved after the last assignment, "done"); once done its objective, clusters in order of
    first appearance and tokens per cluster (K,) (argmax with the final centres)."""

    centres: np.ndarray
    made: int = 0
    phase: str = "assign"
    objective: float = 0.0
    first: list[int] = field(default_factory=list)
    sizes: np.ndarray | None = None


@dataclass
class _BlockOutcome:
    """One restart on one block: labels (b,) (argmax, the first of equal maxima), counts (K,), the sum of the block's
    maxima (pairwise within the block), and while assigning the per-cluster sums (K, D)."""

    labels: np.ndarray
    counts: np.ndarray
    top: float
    sums: np.ndarray | None


def _assign_block(x: np.ndarray, centres: np.ndarray, assigning: bool) -> _BlockOutcome:
    k = centres.shape[0]
    scores = x @ centres.T
    labels = np.argmax(scores, axis=1)
    counts = np.bincount(labels, minlength=k)
    top = float(np.add.reduce(np.max(scores, axis=1)))
    return _BlockOutcome(labels, counts, top, _cluster_sums(x, labels, k, counts) if assigning else None)


class _Pass:
    """What one pass gathers for a restart, block after block in X's order: the assignments' change, per-cluster sums
    and counts, the objective's running total and the clusters' first appearances."""

    def __init__(self, k: int, width: int):
        self.changed = False
        self.sums = np.zeros((k, width), dtype=np.float64)
        self.sizes = np.zeros(k, dtype=np.int64)
        self.total = 0.0
        self.first: list[int] = []
        self._seen = np.zeros(k, dtype=bool)

    def add(self, block: _BlockOutcome) -> None:
        self.sizes += block.counts
        self.total += block.top
        if block.sums is not None:
            self.sums += block.sums
        if not self._seen.all():
            present, at = np.unique(block.labels, return_index=True)
            for cluster in present[np.argsort(at)]:
                if not self._seen[cluster]:
                    self._seen[cluster] = True
                    self.first.append(int(cluster))


def _lloyd(stream: TokenStream | _UnitTokens, centres: np.ndarray, max_iter: int,
           each: Work = lambda f, rs: [f(r) for r in rs]) -> list[_Restart]:
    """Lloyd from each restart's seed centres (R, K, D), the restarts side by side (one pass serves every restart
    still running; `each` may run their blocks in threads), each with its own products and sums, gathered in X's
    order; then each one's objective with its final centres."""
    n, width = stream.shape
    m, k = centres.shape[:2]
    restarts = [_Restart(centres[r].copy()) for r in range(m)]
    a = _TokenState(n, m, np.min_scalar_type(k), k)  # k marks "no assignment yet": the first never repeats
    try:
        while True:
            running = [r for r in range(m) if restarts[r].phase != "done"]
            if not running:
                return restarts
            passes = {r: _Pass(k, width) for r in running}
            assigning = {r for r in running if restarts[r].phase == "assign"}
            for start, x in stream.blocks():
                outcomes = each(lambda r: _assign_block(x, restarts[r].centres, r in assigning), running)  # noqa: B023
                previous = a.read(start, start + x.shape[0]) if assigning else None
                for r, block in zip(running, outcomes):
                    passes[r].add(block)
                    if r in assigning:
                        passes[r].changed = passes[r].changed or not np.array_equal(previous[:, r], block.labels)
                        previous[:, r] = block.labels
                if assigning:
                    a.write(start, previous)
            for r in running:
                restart, gathered = restarts[r], passes[r]
                if restart.phase == "assign":
                    restart.made += 1
                    if gathered.changed:
                        restart.centres = _normalised(gathered.sums, gathered.sizes, restart.centres)
                        if restart.made == max_iter:
                            restart.phase = "objective"
                        continue
                restart.phase = "done"  # a repeated assignment, or the objective pass after the last move
                restart.objective, restart.first, restart.sizes = gathered.total, gathered.first, gathered.sizes
    finally:
        a.close()


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


def fit_clusters(stream: TokenStream, settings: ClusterSettings, threads: int = 1) -> ClusterFit:
    """Spherical k-means of the stream's tokens (module docstring). threads: the restarts' work on each block runs in
    up to this many threads (BLAS held to one thread inside the fit); the fit is the same, bit for bit, whatever it
    is."""
    n, width = stream.shape
    k = settings.k
    if n < k:
        raise SemsegError(f"{n} tokens cannot make {k} clusters")
    rng = np.random.default_rng(settings.seed)
    # The generator's calls do not depend on the tokens: restart after restart, the first centre's integer and then
    # K - 1 uniforms. Drawn here in that order, they are what the restarts one after the other would draw.
    draws = []
    for _ in range(settings.n_init):
        first = int(rng.integers(n))
        draws.append((first, [float(rng.random()) for _ in range(k - 1)]))
    workers = max(1, min(int(threads), settings.n_init))
    with one_blas_thread(), ThreadPoolExecutor(workers) as pool:
        def each(work: Callable[[int], Any], restarts: Sequence[int]) -> list:
            return list(pool.map(work, restarts)) if workers > 1 else [work(r) for r in restarts]

        x = _UnitTokens(stream)
        seeds, chosen = _seed(x, draws, k, each)
        restarts = _lloyd(x, seeds, settings.max_iter, each)
        del x
    best = 0
    for r in range(1, len(restarts)):
        if restarts[r].objective > restarts[best].objective:
            best = r
    winner = restarts[best]
    appeared = set(winner.first)
    order = winner.first + [c for c in range(k) if c not in appeared]
    return ClusterFit(settings=settings, centres=winner.centres[order], objective=winner.objective, restart=best,
                      objectives=tuple(r.objective for r in restarts), iterations=tuple(r.made for r in restarts),
                      seeds=tuple(tuple(c) for c in chosen), sizes=tuple(int(winner.sizes[c]) for c in order),
                      n_tokens=n, width=width)
