"""Unsupervised segmentation's clustering (evaluate.semseg.cluster, DESIGN 16): its time against scikit-learn's
KMeans, and its peak memory against the set's size.

In one run:

1. Time. Stand-in tokens (--time-images x --time-tokens x --width float32: points around 40 random directions with
   noise, loosely clustered as a network's tokens are), our fit (K, --n-init restarts, --max-iter) against
   `sklearn.cluster.KMeans(K, n_init, max_iter, tol=0, algorithm="lloyd", random_state=0)` (k-means++ seeding,
   Lloyd until the labels repeat, as ours) on the same unit tokens held in memory in float64, both with --threads
   threads (KMeans' OpenMP threads; our restarts' thread pool); run in turn --repeats times, the ratio of the
   medians printed (target: <= 1, not slower). The objectives differ (ours: the sum of cosines to unit centres;
   KMeans: the inertia, squared distances to mean centres): each is printed with each one's iterations. Our fit is
   timed twice: held (the set's unit tokens fit TOKENS_MEMORY, normalised once) and streamed (as a set too large to
   hold is: read and normalised anew every pass), the same bits.
2. Memory. Stand-in tokens of --small and --large images (--tokens per image, --width wide) written as .npy shards of
   --shard-images images, each size clustered streamed (memory-mapped shards, one at a time) in a fresh subprocess
   (K, --n-init, --memory-iter: the peak is reached in the first passes) that prints its peak resident memory
   (VmHWM) and its resident memory before the fit. Target: the larger set's peak within 1.2x of the smaller's while
   the tokens grow 10x.

    .venv/bin/python bench/semseg.py [--threads 1] [--small 200] [--large 2000] [--tokens 1600] [--keep DIR]

The defaults' tokens take 0.5 and 4.9 GB on disk (2,000 x 1,600 x 384 float32: ViT-S/8's 40 x 40 grid on 2,000
images); --tokens 400 is ViT-S/16's 20 x 20.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.machine import machine_line
from evaluate.semseg.cluster import ClusterSettings, TokenStream, fit_clusters

DIRECTIONS = 40  # the stand-in tokens' cluster directions
SPREAD = 1.5  # their noise, per coordinate, against unit-variance directions


def stand_in_tokens(n_images: int, tokens: int, width: int, seed: int) -> np.ndarray:
    """(n_images * tokens, width) float32 around DIRECTIONS random directions (the same for every seed)."""
    directions = np.random.default_rng(12345).standard_normal((DIRECTIONS, width))
    rng = np.random.default_rng(seed)
    which = rng.integers(0, DIRECTIONS, n_images * tokens)
    noise = rng.standard_normal((n_images * tokens, width), dtype=np.float32)
    return (directions[which].astype(np.float32) + np.float32(SPREAD) * noise).astype(np.float32)


def write_shards(folder: Path, n_images: int, tokens: int, width: int, shard_images: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, first in enumerate(range(0, n_images, shard_images)):
        count = min(shard_images, n_images - first)
        path = folder / f"shard{index:05d}.npy"
        np.save(path, stand_in_tokens(count, tokens, width, seed=index))
        paths.append(path)
    return paths


def resident_mb(field: str) -> float:
    """VmRSS or VmHWM of this process, MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(args: argparse.Namespace) -> int:
    """The memory measurement's subprocess: fit the shards of args.child, print JSON."""
    from evaluate.semseg import cluster

    paths = sorted(Path(args.child).glob("shard*.npy"))
    stream = TokenStream.from_npy(paths)
    n, width = stream.shape
    before = resident_mb("VmRSS")
    started = time.perf_counter()
    fit = fit_clusters(stream, ClusterSettings(args.k, 0, args.n_init, args.memory_iter), threads=args.threads)
    print(json.dumps({"rss_before_mb": before, "peak_mb": resident_mb("VmHWM"), "seconds": time.perf_counter() -
                      started, "n_tokens": fit.n_tokens, "iterations": list(fit.iterations),
                      "held": n * width * 8 <= cluster.TOKENS_MEMORY}))
    return 0


def timing(args: argparse.Namespace) -> float:
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from evaluate.semseg import cluster

    tokens = stand_in_tokens(args.time_images, args.time_tokens, args.width, seed=0)
    chunks = np.split(tokens, args.time_images)
    unit = tokens.astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    settings = ClusterSettings(args.k, 0, args.n_init, args.max_iter)
    print(f"\n1. time: {tokens.shape[0]:,} stand-in tokens of width {args.width} ({args.time_images} images x "
          f"{args.time_tokens}), K {args.k}, {args.n_init} restarts, at most {args.max_iter} iterations, "
          f"{args.threads} thread(s); {args.repeats} runs each, in turn", flush=True)
    times: dict[str, list[float]] = {"ours (held)": [], "ours (streamed)": [], "KMeans": []}
    saved = cluster.TOKENS_MEMORY
    for _ in range(args.repeats):
        started = time.perf_counter()
        ours = fit_clusters(TokenStream.from_arrays(chunks), settings, threads=args.threads)
        times["ours (held)"].append(time.perf_counter() - started)
        cluster.TOKENS_MEMORY = 0
        try:
            started = time.perf_counter()
            streamed = fit_clusters(TokenStream.from_arrays(chunks), settings, threads=args.threads)
            times["ours (streamed)"].append(time.perf_counter() - started)
        finally:
            cluster.TOKENS_MEMORY = saved
        assert streamed.centres.tobytes() == ours.centres.tobytes()
        with threadpool_limits(limits=args.threads):
            started = time.perf_counter()
            km = KMeans(args.k, n_init=args.n_init, max_iter=args.max_iter, tol=0.0, algorithm="lloyd",
                        random_state=0).fit(unit)
            times["KMeans"].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"  {name:16s} median {medians[name]:7.2f} s  (runs: {', '.join(f'{v:.2f}' for v in values)})")
    print(f"  ours: iterations per restart {list(ours.iterations)}, chosen restart {ours.restart}, objective "
          f"(sum of cosines) {ours.objective:,.1f}")
    print(f"  KMeans: iterations of its best restart {km.n_iter_}, inertia (sum of squared distances) "
          f"{km.inertia_:,.1f}")
    ratio = medians["ours (held)"] / medians["KMeans"]
    print(f"  ours (held) / KMeans: {ratio:.2f}x (target <= 1); ours (streamed) / KMeans: "
          f"{medians['ours (streamed)'] / medians['KMeans']:.2f}x", flush=True)
    return ratio


def memory(args: argparse.Namespace) -> float:
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-semseg-"))
    print(f"\n2. memory: stand-in tokens of {args.small} and {args.large} images x {args.tokens} x {args.width} "
          f"float32 in .npy shards of {args.shard_images} images under {root}; each fitted streamed in a fresh "
          f"process (K {args.k}, {args.n_init} restarts, at most {args.memory_iter} iterations)", flush=True)
    peaks = {}
    try:
        for n in (args.small, args.large):
            folder = root / f"n{n}"
            shutil.rmtree(folder, ignore_errors=True)
            started = time.perf_counter()
            write_shards(folder, n, args.tokens, args.width, args.shard_images)
            size_gb = sum(p.stat().st_size for p in folder.glob("*.npy")) / 1e9
            written = time.perf_counter() - started
            command = [sys.executable, __file__, "--child", str(folder), "--k", str(args.k), "--n-init",
                       str(args.n_init), "--memory-iter", str(args.memory_iter), "--threads", str(args.threads)]
            proc = subprocess.run(command, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(proc.stdout[-2000:], proc.stderr[-3000:], file=sys.stderr)
                raise SystemExit(1)
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            peaks[n] = result["peak_mb"]
            how = "held" if result["held"] else "streamed"
            print(f"  {n:5d} images: {result['n_tokens']:>10,} tokens, {size_gb:5.2f} GB on disk (written in "
                  f"{written:.0f} s); fit ({how}) {result['seconds']:.0f} s, iterations {result['iterations']}; "
                  f"resident before the fit {result['rss_before_mb']:.0f} MB, peak {result['peak_mb']:.0f} MB",
                  flush=True)
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    ratio = peaks[args.large] / peaks[args.small]
    print(f"  peak {peaks[args.large]:.0f} MB vs {peaks[args.small]:.0f} MB: {ratio:.2f}x while the tokens grow "
          f"{args.large / args.small:.0f}x (target <= 1.2x)")
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--k", type=int, default=27)
    parser.add_argument("--n-init", type=int, default=5)
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--time-images", type=int, default=200)
    parser.add_argument("--time-tokens", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=2000)
    parser.add_argument("--tokens", type=int, default=1600)
    parser.add_argument("--shard-images", type=int, default=10)
    parser.add_argument("--memory-iter", type=int, default=3)
    parser.add_argument("--skip-time", action="store_true", help="only the memory measurement")
    parser.add_argument("--skip-memory", action="store_true", help="only the time measurement")
    parser.add_argument("--keep", type=Path, help="write the shards here and keep them")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    print(f"{machine_line()}; load average {os.getloadavg()[0]:.1f} (other processes share the CPUs)")
    if not args.skip_time:
        timing(args)
    if not args.skip_memory:
        memory(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
