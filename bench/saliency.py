"""Benchmark the saliency reading (docs/design.md §16): the whole reading, the bilateral solver against the network's
forward, and the solver against a direct sparse solve.

    .venv/bin/python bench/saliency.py                       # 6 frames of ../shared/data/davis2016-mini at 400 x 300
    .venv/bin/python bench/saliency.py --images 9 --threads 2

In one run, on real photos resized to ECSSD's size (`--size`, 400 x 300: DAVIS-2016 frames, the first frame of each
sequence and then every 10th, LANCZOS) written with their masks (nearest) as a small saliency set in a temporary
folder, with a seeded ViT-S/16 in the released form (class token, final norm; torch.manual_seed(0)):
1. the whole reading (`read_saliency_set`: read, resize, network, TokenCut's cut, mask at full size) in images/s,
   without and with the solver (best of `--repeats` runs);
2. per image, the network's forward on the reading's input (the last block's keys of a 400 x 304 image: 475
   patches) and the solver (grid, bistochastisation, CG: `bilateral_refine`) on the same image and its mask, each the
   best of `--repeats`; prints the median solver / forward ratio (goal: below 1, so "+ BS" at most doubles the
   reading);
3. the solver's output against a direct sparse solve (`scipy.sparse.linalg.spsolve`) of the same grid-space system:
   the largest difference at TokenCut's 25 CG iterations, and with the iteration cap lifted (CG run to its relative
   tolerance), and the share of pixels whose p > 0.5 decision differs between 25 iterations and the direct solve.
Timings depend on the machine's load: a shared machine says so in its figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from scipy.sparse.linalg import spsolve

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.machine import machine_line
from bench.scale import best_of
from bench.shared_data import DAVIS_MINI, skip_unless
from evaluate.networks.vit import VisionTransformer
from decoders.bilateral import TOKENCUT_SOLVER, bilateral_refine, bilateral_system, solve_system
from evaluate.datasets.saliency import open_saliency_set, read_image
from evaluate.readings.saliency import network_input, read_saliency, read_saliency_set



def write_set(folder: Path, n: int, size: tuple[int, int]) -> None:
    """n DAVIS frames and masks resized to `size` as images/<name>.jpg and masks/<name>.png."""
    frames = []
    for sequence in sorted((DAVIS_MINI / "JPEGImages" / "480p").iterdir()):
        frames += [(sequence.name, f) for f in sorted(sequence.glob("*.jpg"))[::10]]
    frames = sorted(frames, key=lambda item: (int(item[1].stem), item[0]))[:n]
    (folder / "images").mkdir(parents=True)
    (folder / "masks").mkdir()
    for sequence, frame in frames:
        name = f"{sequence}-{frame.stem}"
        Image.open(frame).convert("RGB").resize(size, Image.Resampling.LANCZOS).save(folder / "images" / f"{name}.jpg",
                                                                                     quality=95)
        mask = DAVIS_MINI / "Annotations" / "480p" / sequence / f"{frame.stem}.png"
        Image.open(mask).convert("L").resize(size, Image.Resampling.NEAREST).save(folder / "masks" / f"{name}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=6)
    parser.add_argument("--size", type=int, nargs=2, default=(400, 300), metavar=("W", "H"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    skip_unless(DAVIS_MINI / "JPEGImages", "bench/saliency.py")
    print(machine_line())
    torch.manual_seed(0)
    network = VisionTransformer(class_token=True, final_norm=True).eval()  # ViT-S/16, released form
    with tempfile.TemporaryDirectory() as tmp:
        write_set(Path(tmp), args.images, tuple(args.size))
        dataset = open_saliency_set(images=Path(tmp) / "images", masks=Path(tmp) / "masks")
        pairs = dataset.pairs
        n = len(pairs)
        w, h = args.size
        side_h, side_w = network_input(read_image(pairs[0]), 16).shape[1:]
        print(f"data: {n} DAVIS-2016 frames at {w} x {h} (network input {side_w} x {side_h}), ViT-S/16 released "
              "form, seeded")
        plain = best_of(args.repeats, lambda: read_saliency_set(network, pairs, bilateral=None))
        refined = best_of(args.repeats, lambda: read_saliency_set(network, pairs, bilateral=TOKENCUT_SOLVER))
        print(f"whole reading: {n / plain:.2f} images/s without the solver, {n / refined:.2f} images/s with it "
              f"(x{refined / plain:.2f} the time)")
        forwards, solvers, ratios, diffs, converged, flips, vertices = [], [], [], [], [], [], []
        lifted = dataclasses.replace(TOKENCUT_SOLVER, cg_maxiter=10_000)
        for pair in pairs:
            img = read_image(pair)
            rgb = np.asarray(img, dtype=np.uint8)
            x = network_input(img, 16).unsqueeze(0)
            with torch.inference_mode():
                forward = best_of(args.repeats, lambda: network.last_keys(x))
            mask = read_saliency(network, img, bilateral=None).mask
            solver = best_of(args.repeats, lambda: bilateral_refine(rgb, mask))
            forwards.append(forward)
            solvers.append(solver)
            ratios.append(solver / forward)
            system = bilateral_system(rgb, mask)
            direct = (system.grid.splat.T @ spsolve(system.matrix.tocsc(), system.rhs)).reshape(rgb.shape[:2])
            out = solve_system(system)
            diffs.append(float(np.abs(out - direct).max()))
            converged.append(float(np.abs(solve_system(system, lifted) - direct).max()))
            flips.append(float(np.mean((out > 0.5) != (direct > 0.5))))
            vertices.append(system.grid.n_vertices)
        print(f"forward (last block's keys): median {1000 * statistics.median(forwards):.1f} ms/image; solver: median "
              f"{1000 * statistics.median(solvers):.1f} ms/image; solver / forward: median "
              f"{statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f}; goal < 1)")
        print(f"solver vs spsolve: max |difference| {max(diffs):.2e} at 25 CG iterations (TokenCut's cap; median "
              f"{statistics.median(diffs):.2e}), {max(converged):.2e} with the cap lifted; pixels whose p > 0.5 "
              f"differs at 25 iterations: at most {100 * max(flips):.3f}%; grid vertices median "
              f"{int(statistics.median(vertices))}")


if __name__ == "__main__":
    main()
