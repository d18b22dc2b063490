"""Benchmark object discovery's two costs (docs/design.md §15): the keys-native reading and the tokencut decoder.

    .venv/bin/python bench/discovery.py                 # 4 coco2017-mini val images, a seeded released ViT-S/16
    .venv/bin/python bench/discovery.py --images 2      # the smallest run

1. Native-size extraction: images/s of `evaluate.readings.native.native_keys` (the last block's keys: every block
   but the last in full, of the last only LN1 and the key projection, fused attention) against a plain forward of
   the same network as LOST's and TokenCut's scripts run it with a hook on the keys (`bench.extract`'s
   `plain_vit_forward`: DINO's explicit-softmax attention, every block, the final norm), on the same padded
   images, image by image in turns (ours, then plain) after one warm-up image; both must give the same keys.
2. The tokencut decoder per image (`decoders.tokencut.component`: Lanczos) against the dense `eigh(D - A, D)` that
   TokenCut runs (written here), both on one BLAS thread, on those images' keys; the boxes must agree.
Without ../shared/data/coco2017-mini, seeded random 480 x 360 images stand in (said so in the output).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.linalg
import scipy.ndimage
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.extract import plain_vit_forward  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from bench.shared_data import COCO_MINI  # noqa: E402
from decoders import tokencut  # noqa: E402
from decoders.boxes import box_of  # noqa: E402
from evaluate.demo.checkpoints import make_demo_checkpoint  # noqa: E402
from evaluate.networks.checkpoints import load_backbone  # noqa: E402
from evaluate.pixels.images import normalise, open_rgb  # noqa: E402
from evaluate.readings.native import KEYS_NATIVE, native_keys, pad_to_patch  # noqa: E402



def dense_tokencut(keys: np.ndarray, grid: tuple[int, int], tau: float = 0.2, eps: float = 1e-5) -> np.ndarray:
    """TokenCut's own recipe with the dense generalised solver: bool (gh, gw)."""
    f = keys.astype(np.float64)
    f /= np.linalg.norm(f, axis=1, keepdims=True)
    a = np.where(f @ f.T > tau, 1.0, eps)
    d = np.diag(a.sum(axis=1))
    _, vectors = scipy.linalg.eigh(d - a, d, subset_by_index=[1, 2])
    v = vectors[:, 0]
    fg = v > v.mean()
    seed = int(np.argmax(np.abs(v)))
    if not fg[seed]:
        fg = ~fg
    labels, _ = scipy.ndimage.label(fg.reshape(grid))
    return labels == labels.ravel()[seed]


def images(n: int) -> tuple[list, str]:
    if (COCO_MINI / "images").is_dir():
        files = sorted((COCO_MINI / "images").glob("*.jpg"))[:n]
        return [normalise(open_rgb(f)) for f in files], f"{n} coco2017-mini images (sorted names)"
    rng = np.random.default_rng(0)
    return [torch.from_numpy(rng.standard_normal((3, 360, 480)).astype(np.float32)) for _ in range(n)], \
        f"{n} seeded random 480 x 360 images"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2, help="torch threads for the extraction")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(machine_line())
    print("other jobs on the machine inflate every figure")
    path = make_demo_checkpoint(Path("/tmp/bench-discovery-dino.pth"), fmt="dino-backbone", seed=0,
                                architecture="vit-s16")
    model = load_backbone(path, which="teacher", form=KEYS_NATIVE.form).model.eval()
    xs, what = images(args.images + 1)
    print(f"inputs: {what}; the first is a warm-up")
    with torch.inference_mode():
        native_keys(model, xs[0])
        plain_vit_forward(model, pad_to_patch(xs[0], 16).unsqueeze(0))
        keyed, ours, plain, diff = [], 0.0, 0.0, 0.0
        for x in xs[1:]:  # in turns, so a change of load on the machine meets both alike
            start = time.perf_counter()
            keyed.append(native_keys(model, x))
            ours += time.perf_counter() - start
            start = time.perf_counter()
            _, reference = plain_vit_forward(model, pad_to_patch(x, 16).unsqueeze(0))
            plain += time.perf_counter() - start
            diff = max(diff, float(np.abs(keyed[-1][0] - reference[0].numpy()).max()))
    n = len(keyed)
    print(f"keys-native: {n / ours:.2f} images/s; the authors' plain forward of the same network: {n / plain:.2f} "
          f"images/s; ratio {plain / ours:.2f}x (goal >= 1.5x; {args.threads} torch threads; keys agree to {diff:.1e})")
    import threadpoolctl

    with threadpoolctl.threadpool_limits(1):
        for (keys, grid), x in zip(keyed, xs[1:]):
            height, width = x.shape[1:]
            start = time.perf_counter()
            comp = tokencut.component(keys, grid)
            t_ours = time.perf_counter() - start
            start = time.perf_counter()
            ref = dense_tokencut(keys, grid)
            t_dense = time.perf_counter() - start
            same = box_of(comp, 16, height, width) == box_of(ref, 16, height, width)
            print(f"tokencut {grid[0]} x {grid[1]} ({grid[0] * grid[1]} patches): ours {1e3 * t_ours:.1f} ms, dense "
                  f"eigh {1e3 * t_dense:.1f} ms, {t_dense / t_ours:.1f}x, same box: {same}")


if __name__ == "__main__":
    main()
