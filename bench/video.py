"""Benchmark the video reading: the propagation step against DINO's own way, the whole job, and its memory.

    .venv/bin/python bench/video.py                          # blackswan of ../shared/data/davis2016-mini, 12 frames
    .venv/bin/python bench/video.py --frames 20 --threads 1 --memory-frames 20 60

In one run, on the same frames of one sequence (`--sequence`, its first `--frames` frames), with a seeded ViT-S/16
(`vit_small()`, torch.manual_seed(0)) and DINO's settings (height 480, 7 previous frames, top 5, neighbourhood 12,
temperature 0.1):
1. features: block 12's tokens of each frame at frames480 (832 x 480: a 30 x 52 grid), extracted once;
2. the propagation step on those features, ours (`evaluate.video.propagate.Propagator`) against a literal reference
   written here, DINO's way (`eval_video_segmentation.py`: the neighbourhood mask built by Python loops once per
   video, the full affinity of every context frame, top-k along the context axis); both times include their setup;
   prints both, the ratio with and without DINO's mask loops, and whether the output masks are identical (pixels
   that differ);
3. the whole job (`propagate_sequence`: read, network, propagate, write PNGs) in frames per second, its floating-point
   work (the network's matrix products, counted from its shapes, plus the propagation's) in GFLOP/s, and that as a
   share of the fp32 matrix-product ceiling, a 2048^3 torch.mm measured in the same run with the same threads
   (the best of five before the job and five after);
4. peak memory (max RSS) of a propagation job, each in a fresh process, for a `--memory-frames` sequences (frames
   taken back and forth through the sequence) and the ratio of the longest to the shortest: memory must not grow with
   the video's length.
Timings depend on the machine's load: a shared machine says so in its figures.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.machine import machine_line
from bench.shared_data import DAVIS_MINI, skip_unless
from evaluate.datasets.davis import DavisDataset, VideoSequence, first_mask
from evaluate.readings.frames import frames480_input, frames480_size, resize_nearest
from evaluate.pixels.geometry import PATCH
from evaluate.pixels.images import open_rgb
from evaluate.video.propagate import (
    PropagationSettings,
    Propagator,
    labels_from_soft,
    one_hot,
    propagate_sequence,
    tiles,
)

DINO = {"n_last_frames": 7, "topk": 5, "neighbourhood": 12, "temperature": 0.1}


# ------------------------------------------------------------------------------ DINO's way, written out literally


def restrict_neighbourhood(h: int, w: int, size: int) -> torch.Tensor:
    """DINO's mask: (h w, h w) float, 1 where the source lies within `size` rows and columns, by Python loops."""
    mask = torch.zeros(h, w, h, w)
    for i in range(h):
        for j in range(w):
            for p in range(2 * size + 1):
                for q in range(2 * size + 1):
                    if i - size + p < 0 or i - size + p >= h:
                        continue
                    if j - size + q < 0 or j - size + q >= w:
                        continue
                    mask[i, j, i - size + p, j - size + q] = 1
    return mask.reshape(h * w, h * w)


def literal_propagation(features: list[torch.Tensor], first_seg: torch.Tensor, grid,
                        settings) -> tuple[list[torch.Tensor], float]:
    """Soft labels (C, N) of frames 1.. from tokens (N, D) per frame and frame 0's one-hot (1, C, h, w), DINO's way;
    and the seconds spent building the neighbourhood mask."""
    h, w = grid
    queue: list[tuple[torch.Tensor, torch.Tensor]] = []
    first = features[0].T  # dim x h*w, as DINO keeps it
    mask = None
    mask_s = 0.0
    out = []
    for feat_tar in features[1:]:
        feats = [first] + [pair[0] for pair in queue]
        segs = [first_seg] + [pair[1] for pair in queue]
        ncontext = len(feats)
        sources = F.normalize(torch.stack(feats), dim=1, p=2)
        target = F.normalize(feat_tar, dim=1, p=2).unsqueeze(0).repeat(ncontext, 1, 1)
        aff = torch.exp(torch.bmm(target, sources) / settings.temperature)
        if mask is None:  # once per video, at frame 1 (one context frame: it broadcasts over more later)
            start = time.perf_counter()
            mask = restrict_neighbourhood(h, w, settings.neighbourhood).unsqueeze(0).repeat(ncontext, 1, 1)
            mask_s = time.perf_counter() - start
        aff *= mask
        aff = aff.transpose(2, 1).reshape(-1, h * w)
        top, _ = torch.topk(aff, dim=0, k=settings.topk)
        kth, _ = torch.min(top, dim=0)
        aff[aff < kth] = 0
        aff = aff / torch.sum(aff, keepdim=True, axis=0)
        seg = torch.cat(segs)
        c = seg.shape[1]
        seg = seg.reshape(ncontext, c, -1).transpose(2, 1).reshape(-1, c).T
        soft = torch.mm(seg, aff)
        if len(queue) == settings.n_last_frames:
            queue.pop(0)
        queue.append((feat_tar.T, soft.reshape(1, c, h, w)))
        out.append(soft)
    return out, mask_s


# ----------------------------------------------------------------------------------------------------- helpers


def network_gflop(grid: tuple[int, int]) -> float:
    """ViT-S/16's matrix-product work for one frame of gh x gw patches (multiply-adds x 2), in GFLOP."""
    n = grid[0] * grid[1]
    embed = 2 * n * (3 * PATCH * PATCH) * 384
    block = 2 * n * 384 * (1152 + 384 + 2 * 1536) + 2 * 2 * n * n * 384
    return (embed + 12 * block) / 1e9


def propagation_gflop(grid: tuple[int, int], n_frames: int, settings: PropagationSettings, width: int) -> float:
    """The propagation's cosine products over a sequence of n_frames (the boxes of every context frame), in GFLOP."""
    per_slot = sum((t.rows.stop - t.rows.start) * (t.cols.stop - t.cols.start)
                   * (t.source_rows.stop - t.source_rows.start) * (t.source_cols.stop - t.source_cols.start)
                   for t in tiles(grid, settings.neighbourhood))
    slots = sum(1 + min(t - 1, settings.n_last_frames) for t in range(1, n_frames))
    return 2 * width * per_slot * slots / 1e9


def matmul_ceiling(size: int = 2048, repeats: int = 5) -> float:
    """fp32 GFLOP/s of a size^3 torch.mm: the best of `repeats`."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def sub_sequence(seq: VideoSequence, n: int) -> VideoSequence:
    return VideoSequence(seq.name, seq.frames[:n], seq.masks[:n])


def seeded_vit():
    from evaluate.networks.vit import vit_small

    torch.manual_seed(0)
    return vit_small().eval()


def back_and_forth(seq: VideoSequence, n: int, root: Path) -> VideoSequence:
    """An n-frame sequence under `root` in DAVIS's layout: the frames of `seq` forwards, then backwards, ... (links)."""
    order = list(range(len(seq.frames))) + list(range(len(seq.frames) - 2, 0, -1))
    frames_dir = root / "JPEGImages" / "480p" / seq.name
    masks_dir = root / "Annotations" / "480p" / seq.name
    frames_dir.mkdir(parents=True)
    masks_dir.mkdir(parents=True)
    for t in range(n):
        source = order[t % len(order)]
        (frames_dir / f"{t:05d}.jpg").symlink_to(seq.frames[source].resolve())
    (masks_dir / "00000.png").symlink_to(seq.masks[0].resolve())
    return DavisDataset(root).sequence(seq.name)


# ------------------------------------------------------------------------------------------------------ sections


def features_of(seq: VideoSequence, network, height: int) -> tuple[list[torch.Tensor], float]:
    tokens, start = [], time.perf_counter()
    with torch.inference_mode():
        for frame in seq.frames:
            tokens.append(network.tokens(frames480_input(open_rgb(frame), height).unsqueeze(0))[0])
    return tokens, (time.perf_counter() - start) / len(seq.frames)


def compare_step(seq: VideoSequence, tokens: list[torch.Tensor], settings: PropagationSettings) -> None:
    first = first_mask(seq)
    h, w = first.labels.shape
    new_w, new_h = frames480_size(w, h, settings.height)
    grid = (new_h // PATCH, new_w // PATCH)
    onehot = one_hot(resize_nearest(first.labels, grid), first.n_objects + 1)
    with torch.inference_mode():
        start = time.perf_counter()
        theirs, mask_s = literal_propagation(tokens, onehot.reshape(1, -1, *grid), grid, settings)
        literal_s = time.perf_counter() - start
        start = time.perf_counter()
        propagator = Propagator(tokens[0], onehot, grid, settings)
        ours = [propagator.step(t) for t in tokens[1:]]
        ours_s = time.perf_counter() - start
    differ = sum(int(np.count_nonzero(labels_from_soft(a, grid, (h, w)) != labels_from_soft(b, grid, (h, w))))
                 for a, b in zip(ours, theirs))
    soft = max(float((a - b).abs().max()) for a, b in zip(ours, theirs))
    steps = len(tokens) - 1
    print(f"propagation step, {steps} frames, grid {grid[0]} x {grid[1]}, features of {len(tokens)} frames:")
    print(f"  DINO's way (loop-built mask per video, full affinity): {literal_s:8.2f} s  (of which the mask "
          f"{mask_s:.2f} s; {(literal_s - mask_s) / steps:.3f} s a frame besides)")
    print(f"  ours (blocks around the windows, top-k cosines):       {ours_s:8.2f} s  ({ours_s / steps:.3f} s a frame)")
    print(f"  ratio {literal_s / ours_s:.2f}x ({(literal_s - mask_s) / ours_s:.2f}x a frame without DINO's mask); "
          f"output masks: {differ} pixel(s) differ of {steps * h * w} (largest soft-label difference {soft:.1e})")


def whole_job(seq: VideoSequence, network, settings: PropagationSettings, out: Path) -> None:
    before = matmul_ceiling()
    start = time.perf_counter()
    run = propagate_sequence(network, seq, settings, out)
    wall = time.perf_counter() - start
    ceiling = max(before, matmul_ceiling())  # the best seen around the job: a busy machine lowers either
    work = run.n_frames * network_gflop(run.grid) + propagation_gflop(run.grid, run.n_frames, settings, 384)
    print(f"whole job (read, network, propagate, write), {run.n_frames} frames of {run.frame_size[1]} x "
          f"{run.frame_size[0]} at height {settings.height}:")
    print(f"  {run.n_frames / wall:.3f} frames/s ({wall / run.n_frames:.2f} s a frame); {work / wall:.1f} GFLOP/s of "
          f"matrix products = {100 * work / wall / ceiling:.0f}% of the fp32 torch.mm ceiling ({ceiling:.1f} GFLOP/s, "
          "2048^3, same threads)")


def child_memory(args) -> None:
    """Run one propagation job in this (fresh) process and print its peak RSS in MiB."""
    seq = DavisDataset(args.child_root).sequence(args.sequence)
    settings = PropagationSettings(height=args.height, **DINO)
    propagate_sequence(seeded_vit(), seq, settings, Path(args.child_root) / "out")
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def memory(seq: VideoSequence, lengths: list[int], args) -> None:
    peaks = {}
    for n in lengths:
        with tempfile.TemporaryDirectory() as tmp:
            back_and_forth(seq, n, Path(tmp))
            command = [sys.executable, __file__, "--child-root", tmp, "--sequence", seq.name, "--height",
                       str(args.height), "--threads", str(torch.get_num_threads())]
            done = subprocess.run(command, capture_output=True, text=True, check=True, env={**os.environ})
            peaks[n] = float(done.stdout.strip().splitlines()[-1])
        print(f"  {n:3d} frames: peak RSS {peaks[n]:.0f} MiB")
    longest, shortest = max(lengths), min(lengths)
    print(f"  peak memory {longest} / {shortest} frames: {peaks[longest] / peaks[shortest]:.3f}x (target <= 1.1x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(DAVIS_MINI), help="a DAVIS-layout folder (default davis2016-mini)")
    parser.add_argument("--sequence", default="blackswan")
    parser.add_argument("--frames", type=int, default=12, help="frames of the sequence for sections 1-3")
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--memory-frames", type=int, nargs="*", default=[20, 60],
                        help="sequence lengths for the memory section (none: skip it)")
    parser.add_argument("--child-root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.child_root:
        child_memory(args)
        return 0
    skip_unless(Path(args.root) / "Annotations", "bench/video.py")
    settings = PropagationSettings(height=args.height, **DINO)
    seq = sub_sequence(DavisDataset(args.root).sequence(args.sequence), args.frames)
    load = os.getloadavg()[0]
    print(machine_line())
    print(f"{args.sequence}, {len(seq.frames)} frames; settings {settings.name}; load average {load:.1f}")
    network = seeded_vit()
    tokens, per_frame = features_of(seq, network, args.height)
    print(f"features: {per_frame:.2f} s a frame (network only)")
    compare_step(seq, tokens, settings)
    with tempfile.TemporaryDirectory() as tmp:
        whole_job(seq, network, settings, Path(tmp))
    if args.memory_frames:
        print("memory of a propagation job (fresh process each; frames back and forth through the sequence):")
        memory(DavisDataset(args.root).sequence(args.sequence), args.memory_frames, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
