"""Benchmark: our linear-probe fit (evaluate.probe.linear.fit_probe) against scikit-learn's lbfgs LogisticRegression.

Both fit the same training tokens with the same objective (mean cross-entropy + weight_decay/2 ||W||^2 on
standardised tokens; scikit-learn with C = 1 / (weight_decay * N)) and the same stopping rule (lbfgs, the
workflow's `probe.tol` and `probe.max_iter`). Prints both fit times, their ratio (target >= 2x) and both accuracies
on held-out tokens.

Default tokens: seeded, random but structured — class centres in 384-d, Zipf-distributed class frequencies,
Gaussian noise, a random mixing matrix and per-feature log-normal scales (so standardisation matters, as it
does for ViT tokens). `--features DIR... --annotations JSON` uses real tokens224 shards
(evaluate.readings.features.FeatureReader) and their COCO patch labels instead.

    .venv/bin/python bench/probe.py                 # 120,000 tokens, 21 classes: ~15 s on 2 cores
    .venv/bin/python bench/probe.py --tokens 300000 --classes 81
    .venv/bin/python bench/probe.py --stream-images 10000   # the pipeline's path at 10,000 images, ours only

`--stream-images N` times what the probe job does with a large probe-train set, without scikit-learn: it writes
N images' synthetic tokens224 (float16, 81 classes, shards of `features.shard_size` images, in a temporary folder
with sparse keys480 files) and times `training_tokens` (streaming the shards, seeded `probe.max_tokens`-token
subsample) and `fit_probe` separately. The files were just written, so they are read from the page cache.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import machine_line  # noqa: E402
from evaluate.experiment import config_defaults  # noqa: E402
from evaluate.probe.labels import IGNORE, class_index, dataset_patch_labels, probe_classes  # noqa: E402
from evaluate.probe.linear import fit_probe  # noqa: E402

PROBE = config_defaults("probe")  # the workflow's defaults: the bench times what a run does
SHARD_SIZE = config_defaults("features")["shard_size"]
SEED = config_defaults("bootstrap")["seed"]  # the probe's subsample seed (docs/design.md §6)


def structured_tokens(n: int, classes: int, seed: int, noise_seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """n tokens (float32 (n, 384)) and labels (int64 (n,)): the class structure from `seed`, the draws from
    `noise_seed` (default: `seed` too), so shards drawn with one seed and several noise seeds share classes."""
    rng = np.random.default_rng(seed)
    d = 384
    centres = rng.normal(size=(classes, d)).astype(np.float32)
    mix = (rng.normal(size=(d, d)) / np.sqrt(d)).astype(np.float32)
    scales = np.exp(rng.normal(size=d)).astype(np.float32)
    offset = rng.normal(size=d).astype(np.float32) * 3
    draw = rng if noise_seed is None else np.random.default_rng([seed, noise_seed])
    y = np.minimum(draw.zipf(1.5, size=n) - 1, classes - 1)
    x = (0.15 * centres[y] + draw.normal(size=(n, d)).astype(np.float32)) @ mix
    x *= scales
    x += offset
    return x.astype(np.float32), y.astype(np.int64)


def real_tokens(feature_dirs: list[str], annotations: str) -> tuple[np.ndarray, np.ndarray, int]:
    import contextlib
    import io

    from pycocotools.coco import COCO

    from evaluate.readings.features import FeatureReader

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(annotations)
    categories = {c: coco.cats[c]["name"] for c in coco.getCatIds()}
    classes = class_index(probe_classes(categories, annotations), categories, annotations)
    reader = FeatureReader(feature_dirs)
    labels = dataset_patch_labels(coco, reader.image_ids, classes, reader.geometry.patch)
    tokens = np.concatenate([np.asarray(a, dtype=np.float32) for _, a in reader.iter_shards("tokens224")])
    x, y = tokens.reshape(-1, tokens.shape[-1]), labels.ravel().astype(np.int64)
    keep = y != IGNORE
    return x[keep], y[keep], len(classes) + 1


def stream(n_images: int, weight_decay: float, seed: int, shard_size: int = SHARD_SIZE, classes: int = 81) -> None:
    """Write n_images' synthetic tokens224 shards, then time training_tokens + fit_probe on them (as the probe job)."""
    import json
    import tempfile

    from evaluate.readings.features import FeatureReader
    from evaluate.probe.linear import training_tokens

    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="probe-stream-") as tmp:
        t0 = time.perf_counter()
        dirs, labels = [], []
        for first in range(0, n_images, shard_size):
            m = min(shard_size, n_images - first)
            x, y = structured_tokens(m * 196, classes, seed, noise_seed=first)
            y = y.astype(np.uint8)
            y[rng.random(y.size) < 0.02] = IGNORE  # crowd patches
            shard = Path(tmp) / f"{first // shard_size:04d}"
            shard.mkdir()
            np.save(shard / "tokens224.npy", x.reshape(m, 196, 384).astype(np.float16))
            keys = np.lib.format.open_memmap(shard / "keys480.npy", "w+", np.float16, (m, 900, 384))
            del keys  # sparse: only its header is read here
            (shard / "image_ids.json").write_text(json.dumps(list(range(first, first + m))))
            (shard / "meta.json").write_text(json.dumps({"dtype": "float16"}))
            dirs.append(shard)
            labels.append(y.reshape(m, 196))
        written = time.perf_counter() - t0
        print(f"{n_images:,} images' synthetic tokens224 in {len(dirs)} shards written in {written:.0f} s; "
              f"{classes} classes, max_tokens {PROBE['max_tokens']:,}, max_iter {PROBE['max_iter']}", flush=True)
        t0 = time.perf_counter()
        feats, targets = training_tokens(FeatureReader(dirs), np.concatenate(labels), max_tokens=PROBE["max_tokens"],
                                         seed=seed)
        streamed = time.perf_counter() - t0
        print(f"training_tokens: {streamed:6.1f} s  ({len(targets):,} of {sum(a.size for a in labels):,} tokens)",
              flush=True)
        t0 = time.perf_counter()
        probe = fit_probe(feats, targets, classes, weight_decay=weight_decay, max_iter=PROBE["max_iter"],
                          tol=PROBE["tol"])
        fit = time.perf_counter() - t0
        print(f"fit_probe:       {fit:6.1f} s  ({probe.meta['iterations']} iterations, {probe.meta['products']})")
        print(f"probe job's training on {n_images:,} images: {streamed + fit:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=120_000, help="training tokens (synthetic data)")
    ap.add_argument("--held-out", type=int, default=30_000, help="held-out tokens for accuracy (synthetic data)")
    ap.add_argument("--classes", type=int, default=21, help="outputs incl. background (synthetic data)")
    ap.add_argument("--weight-decay", type=float, default=PROBE["weight_decay"])
    ap.add_argument("--max-iter", type=int, default=PROBE["max_iter"])
    ap.add_argument("--seed", type=int, default=SEED, help="the subsample's seed (bootstrap.seed) and the synthetic "
                    "data's")
    ap.add_argument("--features", nargs="+", help="tokens224 shard folders of one data set (instead of synthetic)")
    ap.add_argument("--annotations", help="COCO annotation JSON of the --features data set")
    ap.add_argument("--stream-images", type=int, help="time the streaming subsample + fit on N images' shards")
    args = ap.parse_args()
    print(machine_line(), flush=True)
    if args.stream_images:
        stream(args.stream_images, args.weight_decay, args.seed)
        return

    from sklearn.linear_model import LogisticRegression

    if args.features:
        if not args.annotations:
            ap.error("--features needs --annotations")
        x_all, y_all, n_classes = real_tokens(args.features, args.annotations)
        order = np.random.default_rng(args.seed).permutation(len(y_all))
        split = int(0.8 * len(order))
        x, y, xt, yt = x_all[order[:split]], y_all[order[:split]], x_all[order[split:]], y_all[order[split:]]
        source = f"{len(args.features)} shard folder(s)"
    else:
        n_classes = args.classes
        x_all, y_all = structured_tokens(args.tokens + args.held_out, n_classes, args.seed)
        x, y, xt, yt = x_all[: args.tokens], y_all[: args.tokens], x_all[args.tokens :], y_all[args.tokens :]
        source = "synthetic structured tokens"
    n = len(y)
    print(f"{source}: {n:,} training tokens, {len(yt):,} held out, 384 features, {n_classes} classes, "
          f"weight_decay {args.weight_decay:g} (scikit-learn C = {1 / (args.weight_decay * n):.4g}), "
          f"max_iter {args.max_iter}", flush=True)

    t0 = time.perf_counter()
    probe = fit_probe(x, y, n_classes, weight_decay=args.weight_decay, max_iter=args.max_iter, tol=PROBE["tol"])
    ours_s = time.perf_counter() - t0
    ours_acc = float((probe.logits(xt).argmax(axis=1) == yt).mean() * 100)
    print(f"ours:          {ours_s:7.1f} s  ({probe.meta['iterations']} iterations)  held-out accuracy "
          f"{ours_acc:.2f}%", flush=True)

    t0 = time.perf_counter()
    mean = x.mean(axis=0, dtype=np.float64)
    std = x.std(axis=0, dtype=np.float64)
    std[~(std > 1e-12)] = 1.0
    xs = ((x - mean) / std).astype(np.float32)
    sk = LogisticRegression(C=1 / (args.weight_decay * n), max_iter=args.max_iter, tol=PROBE["tol"]).fit(xs, y)
    sk_s = time.perf_counter() - t0
    sk_acc = float((sk.predict(((xt - mean) / std).astype(np.float32)) == yt).mean() * 100)
    print(f"scikit-learn:  {sk_s:7.1f} s  ({int(np.max(sk.n_iter_))} iterations)  held-out accuracy "
          f"{sk_acc:.2f}%", flush=True)
    ratio = sk_s / ours_s
    print(f"speed-up: {ratio:.2f}x (target >= 2x) {'OK' if ratio >= 2 else 'BELOW TARGET'}; "
          f"accuracy difference {ours_acc - sk_acc:+.2f} points")


if __name__ == "__main__":
    main()
