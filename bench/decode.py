"""Benchmark the normalized-cut decoder against the dense reference on the same keys.

    .venv/bin/python bench/decode.py                      # seeded-backbone keys of 12 coco2017-mini val images
    .venv/bin/python bench/decode.py --keys results/features/<ckpt>/<ds>/<shard>/keys480.npy
    .venv/bin/python bench/decode.py --synthetic --images 40
    .venv/bin/python bench/decode.py --synthetic --images 1 --sweep-images 1 --p8-images 1   # the smallest run

Keys: --keys reads a keys480.npy shard (n, N480, D) of any network (its square grid read from N480); otherwise, when ../shared/data/coco2017-mini and
evaluate.networks.vit are there, block 12's keys of the first --images val images (sorted id) through vit_small()
with torch.manual_seed(0) (about 1-2 s an image on 2 cores); otherwise seeded random structured keys.

Prints, per image: ms for our decoder (ncut_decode, Lanczos) and for the dense reference (normalise, float64 S,
A, D, scipy.linalg.eigh(D - A, D, subset_by_index=[1, 2]), mean split, argmax |x| seed, its component) at the
TokenCut setting (centre off, tau 0.2, eps 1e-5), the ratio, and how many masks agree; the same for TokenCut's
setting with the workflow's default `decoder.centre` and `decoder.masks` (dense = solver="dense"); then the workflow's
default sweep (`decoder.sweep` with them: 144 settings) per 100 images, ours measured, the dense one measured on
--dense-sweep-images images and extrapolated (said so in the output). Every default comes from the config schema.
Last, the 3,600-node row (ViT-S/8 at 480 px: keys (3600, 384) on 60 x 60): --p8-images seeded synthetic key sets
(or the --keys shard's first images when it is a 60 x 60 one), ours against the dense reference at the TokenCut
setting, masks compared, the ratio printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.linalg
import scipy.ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.machine import machine_line  # noqa: E402
from bench.shared_data import COCO_MINI  # noqa: E402
from decoders import square_grid, sweep_settings  # noqa: E402
from decoders.ncut.cut import _Graph, _ImageCuts, check_keys, ncut_decode, ncut_sweep  # noqa: E402
from decoders.ncut.settings import TOKENCUT  # noqa: E402
from decoders.ncut.solver import SolverStats, fiedler  # noqa: E402
from evaluate.experiment import config_defaults  # noqa: E402

SEED_GRID = (30, 30)  # ViT-S/16's keys480 grid (the synthetic keys' default)
P8_GRID = (60, 60)  # ViT-S/8's keys480 grid at 480 px: 3,600 nodes
DECODER = config_defaults("decoder")  # the workflow's defaults: the bench times what a run does


def backbone_keys(n_images: int) -> tuple[np.ndarray, str]:
    import torch

    from evaluate.networks.vit import vit_small
    from evaluate.pixels.images import keys480_input, open_rgb

    annotations = json.loads((COCO_MINI / "annotations.json").read_text())
    images = sorted(annotations["images"], key=lambda im: im["id"])[:n_images]
    torch.manual_seed(0)
    model = vit_small().eval()
    out = []
    start = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(images), 4):
            batch = images[i : i + 4]
            x = torch.stack([keys480_input(open_rgb(COCO_MINI / "images" / im["file_name"])) for im in batch])
            out.append(model.last_keys(x).numpy())
    keys = np.concatenate(out).astype(np.float16).astype(np.float32)  # as stored: float16 shards
    took = time.perf_counter() - start
    return keys, f"seeded vit_small() keys of {len(images)} coco2017-mini val images (float16, {took:.0f} s to extract)"


def synthetic_keys(n_images: int, seed: int = 0, grid: tuple[int, int] = SEED_GRID,
                   channels: int = 384) -> tuple[np.ndarray, str]:
    """Image-like keys (n, gh * gw, channels): smooth random fields, one blob with its own direction (placed and
    sized in proportion to the grid: the same keys as before on 30 x 30), a shared offset, noise."""
    rng = np.random.default_rng(seed)
    out = []
    rows, cols = np.mgrid[: grid[0], : grid[1]]
    scale = grid[0] / SEED_GRID[0]
    for _ in range(n_images):
        fields = scipy.ndimage.gaussian_filter(rng.standard_normal((channels, *grid)), sigma=(0, 3, 3), mode="wrap")
        keys = (fields / fields.std()).reshape(channels, -1).T
        cy, cx, r = (scale * v for v in (rng.uniform(8, 22), rng.uniform(8, 22), rng.uniform(4, 8)))
        keys[((rows - cy) ** 2 + (cols - cx) ** 2 < r**2).ravel()] += 1.5 * rng.standard_normal(channels)
        keys += rng.standard_normal(channels) + 0.8 * rng.standard_normal(keys.shape)
        out.append(keys.astype(np.float32))
    return np.stack(out), f"{n_images} seeded synthetic structured key sets ({grid[0]} x {grid[1]}, {channels} wide)"


def reference_tokencut(keys: np.ndarray, tau: float = 0.2, eps: float = 1e-5) -> np.ndarray:
    """TokenCut's dense recipe on the keys' square grid, timed as the baseline: -> mask bool (N,)."""
    k = keys.astype(np.float64)
    k = k / np.linalg.norm(k, axis=1, keepdims=True)
    affinity = np.where(k @ k.T > tau, 1.0, eps)
    degree = np.diag(affinity.sum(axis=1))
    _, vectors = scipy.linalg.eigh(degree - affinity, degree, subset_by_index=[1, 2])
    x = vectors[:, 0]
    bipartition = x > np.sum(x) / len(x)
    seed = int(np.argmax(np.abs(x)))
    if not bipartition[seed]:
        bipartition = ~bipartition
    labels, _ = scipy.ndimage.label(bipartition.reshape(square_grid(len(keys))))
    return labels.ravel() == labels.ravel()[seed]


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=Path, help="a keys480.npy shard (n, N480, D)")
    parser.add_argument("--images", type=int, default=12, help="images to decode (default 12)")
    parser.add_argument("--synthetic", action="store_true", help="use seeded synthetic keys even if coco is there")
    parser.add_argument("--sweep-images", type=int, default=6, help="images for our sweep (default 6)")
    parser.add_argument("--dense-sweep-images", type=int, default=1, help="images for the dense sweep (default 1)")
    parser.add_argument("--p8-images", type=int, default=3, help="60 x 60 key sets for the 3,600-node row "
                        "(default 3; the dense reference takes seconds each)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads for both paths (default 1: one job "
                        "per core; on 2 cores, 2 BLAS threads made both paths slower)")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=args.threads, user_api="blas")

    if args.keys:
        shard = np.load(args.keys, mmap_mode="r")
        if shard.ndim != 3 or math.isqrt(shard.shape[1]) ** 2 != shard.shape[1]:
            parser.error(f"{args.keys}: expected a keys480 array (n, N480, D) on a square grid, got {shard.shape}")
        keys = np.asarray(shard[: args.images], dtype=np.float32)
        source = f"{len(keys)} images of {args.keys}"
    elif not args.synthetic and (COCO_MINI / "annotations.json").is_file():
        keys, source = backbone_keys(args.images)
    else:
        keys, source = synthetic_keys(args.images)
    n = len(keys)
    grid_rc = square_grid(keys.shape[1])
    print(machine_line())
    print(f"keys: {source}")
    print(f"BLAS threads {args.threads}; load average {os.getloadavg()[0]:.1f} "
          f"(other jobs on the machine inflate every figure)")

    # warm up both paths (imports, buffers, BLAS threads)
    ncut_decode(keys[0], TOKENCUT)
    reference_tokencut(keys[0])

    def line(name, seconds):
        seconds = np.asarray(seconds)
        return f"{name} mean {1000 * seconds.mean():7.2f}  median {1000 * np.median(seconds):7.2f} ms/image"

    print("\n== one setting per image: whole decode, keys -> mask ==")
    run_default = TOKENCUT.replace(centre=DECODER["centre"], masks=DECODER["masks"])
    cases = (("TokenCut setting (centre off, tau 0.2)", TOKENCUT),
             (f"TokenCut with the run's centre {run_default.centre} and masks {run_default.masks}", run_default))
    for label, settings in cases:
        # each path over all images in turn, as a decode job runs (its buffers stay warm from image to image);
        # alternating them per image would charge each path the other's cache misses
        stats = SolverStats()
        ours, ours_t = [], []
        for image_keys in keys:
            masks, t = timed(ncut_decode, image_keys, settings, stats=stats)
            ours.append(masks[0].mask.ravel())
            ours_t.append(t)
        dense, dense_t = [], []
        for image_keys in keys:
            if settings == TOKENCUT:
                ref, t = timed(reference_tokencut, image_keys)
            else:
                ref, t = timed(lambda k: ncut_decode(k, settings, solver="dense")[0].mask.ravel(), image_keys)
            dense.append(ref)
            dense_t.append(t)
        agree = sum(bool(np.array_equal(a, b)) for a, b in zip(ours, dense))
        print(f"{label}:")
        print(f"  {line('ours ', ours_t)}   ({stats.matvecs / max(1, stats.lanczos):.1f} matvecs per Lanczos solve; "
              f"dense fallbacks {stats.fallbacks}/{stats.eigenproblems})")
        print(f"  {line('dense', dense_t)}   ratio of means {sum(dense_t) / sum(ours_t):5.1f}x, of medians "
              f"{np.median(dense_t) / np.median(ours_t):5.1f}x   masks identical {agree}/{n}")

    print("\n== eigenvector only, same affinity (TokenCut setting): Lanczos vs eigh(D - A, D, [1, 2]) ==")
    lanczos_t, eigh_t, gemm_t = [], [], []
    for image_keys in keys:
        keys64, _ = check_keys(image_keys)
        image = _ImageCuts(keys64, grid_rc, "lanczos", SolverStats())
        _, t = timed(image.features, False)
        gemm_t.append(t)
        graph = _Graph(image.binary64(False, 0.2), 1e-5, np.zeros(image.n, bool))
        _, t = timed(fiedler, graph, "lanczos", SolverStats())
        lanczos_t.append(t)
        _, t = timed(fiedler, graph, "dense", SolverStats())
        eigh_t.append(t)
    print(f"  {line('lanczos', lanczos_t)}   (a dense fallback counts in the mean)")
    print(f"  {line('dense  ', eigh_t)}   ratio of means {sum(eigh_t) / sum(lanczos_t):5.1f}x, of medians "
          f"{np.median(eigh_t) / np.median(lanczos_t):5.1f}x")
    print(f"  both whole decodes also need the cosine matrix (ours: centring, normalising, float32 ssyrk "
          f"{keys.shape[1]} x {keys.shape[2]}: "
          f"{line('', gemm_t).strip()}), which caps the whole-decode ratio")

    grid = sweep_settings(DECODER)
    print(f"\n== the default sweep: {len(grid)} settings (decoder.sweep of the config schema) ==")
    sweep_n = max(1, min(args.sweep_images, n))
    stats = SolverStats()
    _, ours_t = timed(lambda: [ncut_sweep(k, grid, stats=stats) for k in keys[:sweep_n]])
    per_image = ours_t / sweep_n
    print(f"  ours: {per_image:.3f} s/image over {sweep_n} images -> {100 * per_image:.1f} s per 100 images "
          f"({stats.eigenproblems / sweep_n:.0f} eigenproblems/image, fallbacks {stats.fallbacks})")
    dense_n = max(1, min(args.dense_sweep_images, n))
    _, dense_t = timed(lambda: [ncut_sweep(k, grid, solver="dense") for k in keys[:dense_n]])
    dense_per_image = dense_t / dense_n
    print(f"  dense, sharing S and eigenvectors like ours (solver='dense'): {dense_per_image:.2f} s/image, measured "
          f"on {dense_n} image(s) -> {100 * dense_per_image:.0f} s per 100 images (EXTRAPOLATED from {dense_n})")
    _, one_t = timed(lambda: [reference_tokencut(k) for k in keys[:dense_n]])
    naive = len(grid) * one_t / dense_n
    print(f"  dense, one reference run per setting ({len(grid)} x {1000 * one_t / dense_n:.0f} ms): {naive:.1f} "
          f"s/image -> {100 * naive:.0f} s per 100 images (EXTRAPOLATED)")
    print(f"  sweep ratio: {dense_per_image / per_image:.1f}x (shared dense), {naive / per_image:.1f}x (naive dense)")

    cells = P8_GRID[0] * P8_GRID[1]
    if keys.shape[1] == cells:
        p8, p8_source = keys[: args.p8_images], f"the first {min(n, args.p8_images)} of the keys above"
    else:
        p8, p8_source = synthetic_keys(max(1, args.p8_images), grid=P8_GRID)
    print(f"\n== {cells:,} nodes (ViT-S/8 at 480 px: keys ({cells}, 384) on {P8_GRID[0]} x {P8_GRID[1]}), TokenCut "
          f"setting: ours vs eigh(D - A, D) on the same keys ==")
    print(f"  keys: {p8_source}")
    ncut_decode(p8[0], TOKENCUT)  # warm this size's buffers
    stats = SolverStats()
    ours, ours_t, dense, dense_t = [], [], [], []
    for image_keys in p8:
        masks, t = timed(ncut_decode, image_keys, TOKENCUT, stats=stats)
        ours.append(masks[0].mask.ravel())
        ours_t.append(t)
    for image_keys in p8:
        ref, t = timed(reference_tokencut, image_keys)
        dense.append(ref)
        dense_t.append(t)
    agree = sum(bool(np.array_equal(a, b)) for a, b in zip(ours, dense))
    print(f"  {line('ours ', ours_t)}   (dense fallbacks {stats.fallbacks}/{stats.eigenproblems})")
    print(f"  {line('dense', dense_t)}   ratio of means {sum(dense_t) / sum(ours_t):5.1f}x, of medians "
          f"{np.median(dense_t) / np.median(ours_t):5.1f}x   masks identical {agree}/{len(p8)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
