"""Feature-extraction throughput: our backbone against a plain DINO-style forward, on the same seeded weights.

    .venv/bin/python bench/extract.py [--images N] [--batch B] [--threads T]

Prints, for keys480 (480 x 480 input, block 12's keys) and tokens224 (224 x 224, block 12's output):
- images/s of `evaluate.backbone.VisionTransformer` (`last_keys`, `tokens`). What it does differently: SDPA
  attention (fused, no N x N weights in memory); keys skip block 12's attention and MLP and compute only the key
  third of its qkv; tokens made contiguous after the patch embedding (DINO's `transpose` layout otherwise makes
  every LayerNorm and linear copy its input); the resampled position table cached per grid. Tried and left out:
  torch.compile (inductor, freezing) was slower here after ~45 s of compiling; MLP chunking for cache reuse was
  slower;
- images/s of the plain forward written below the way DINO's / SelfPatch's `vision_transformer.py` are written
  (explicit `softmax(q k^T * scale) v`, every block run in full; keys taken from block 12's `qkv` output, as
  TokenCut and MaskCut do with a forward hook) and the ratio;
- the fp32 matmul ceiling measured in the same run (a 2048^3 `torch.matmul` timed beside every batch), and the
  fraction of it our backbone reaches, counting its FLOPs analytically (a multiply-add is 2 FLOPs; LayerNorm,
  GELU, softmax and the additions are not counted).
Both paths are checked to agree (max abs difference) before anything is timed. Ours and plain run batch by batch
in turn, so load from other processes on the machine falls on both alike; the CPU-busy line at the end shows
how much of the machine the run actually had.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluate.backbone import VisionTransformer, resample_pos_embed, vit_small  # noqa: E402

DIM, HEADS, HIDDEN, DEPTH = 384, 6, 1536, 12


# ----------------------------------------------------------------------------------------------------- the reference


def plain_attention(block, x: Tensor) -> tuple[Tensor, Tensor]:
    """DINO's Attention.forward: explicit scores, softmax, weighted values. Returns (output, keys (B, N, C))."""
    B, N, C = x.shape
    qkv = block.attn.qkv(x).reshape(B, N, 3, HEADS, C // HEADS).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = (q @ k.transpose(-2, -1)) * (C // HEADS) ** -0.5
    attn = attn.softmax(dim=-1)
    out = (attn @ v).transpose(1, 2).reshape(B, N, C)
    return block.attn.proj(out), k.transpose(1, 2).reshape(B, N, C)


def plain_forward(model: VisionTransformer, x: Tensor) -> tuple[Tensor, Tensor]:
    """Every block in full, DINO style. Returns (block-12 output, block-12 keys), both (B, N, 384)."""
    B, _, H, W = x.shape
    z = model.patch_embed.proj(x).flatten(2).transpose(1, 2)
    z = z + resample_pos_embed(model.pos_embed, (H // 16, W // 16))
    keys = None
    for blk in model.blocks:
        y, keys = plain_attention(blk, blk.norm1(z))
        z = z + y
        z = z + blk.mlp.fc2(F.gelu(blk.mlp.fc1(blk.norm2(z))))
    return z, keys


# ----------------------------------------------------------------------------------------------------- FLOPs


def flops_per_image(side: int, reading: str) -> float:
    """Matmul FLOPs of one image through our path: 'keys' (11 blocks + block 12's key projection) or 'tokens'."""
    n = (side // 16) ** 2
    embed = n * (3 * 16 * 16) * DIM * 2
    linear = n * (DIM * 3 * DIM + DIM * DIM + 2 * DIM * HIDDEN) * 2
    attention = 2 * n * n * DIM * 2  # q k^T and weights @ v, all heads
    block = linear + attention
    if reading == "keys":
        return embed + (DEPTH - 1) * block + n * DIM * DIM * 2
    return embed + DEPTH * block


# ----------------------------------------------------------------------------------------------------- timing


def matmul_sample(a: Tensor, b: Tensor, out: Tensor) -> float:
    """GFLOP/s of one (n x n) @ (n x n) fp32 matmul."""
    start = time.perf_counter()
    torch.matmul(a, b, out=out)
    return 2 * a.shape[0] ** 3 / (time.perf_counter() - start) / 1e9


def interleaved(ours, plain, images: Tensor, batch: int, matmul) -> tuple[float, float, list[float]]:
    """Time ours and plain batch by batch, alternately, with a matmul ceiling sample beside each pair, so that any
    load from other processes falls on both paths and on the ceiling alike. Returns (ours img/s, plain img/s,
    ceiling samples in GFLOP/s). One warm-up batch each first."""
    ours_s = plain_s = 0.0
    ceiling: list[float] = []
    with torch.inference_mode():
        ours(images[:batch])
        plain(images[:batch])
        for i in range(0, len(images), batch):
            chunk = images[i : i + batch]
            start = time.perf_counter()
            ours(chunk)
            ours_s += time.perf_counter() - start
            start = time.perf_counter()
            plain(chunk)
            plain_s += time.perf_counter() - start
            ceiling.append(matmul())
    return len(images) / ours_s, len(images) / plain_s, ceiling


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8, help="images per reading (default 8)")
    parser.add_argument("--batch", type=int, default=4, help="batch size (default 4)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = vit_small().eval()
    size = 2048
    a, b, out = torch.randn(size, size), torch.randn(size, size), torch.empty(size, size)
    matmul_sample(a, b, out)
    matmul = lambda: matmul_sample(a, b, out)  # noqa: E731
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.images} images per reading, "
        f"batch {args.batch}, load average before {os.getloadavg()[0]:.1f} (other processes share the CPUs)"
    )
    cpu_start, wall_start = time.process_time(), time.perf_counter()

    readings = [
        ("keys480", 480, "keys", model.last_keys, lambda x: plain_forward(model, x)[1]),
        ("tokens224", 224, "tokens", model.tokens, lambda x: plain_forward(model, x)[0]),
    ]
    for name, side, reading, ours, plain in readings:
        images = torch.randn(args.images, 3, side, side, generator=torch.Generator().manual_seed(side))
        with torch.inference_mode():
            diff = (ours(images[:2]) - plain(images[:2])).abs().max().item()
        ours_rate, plain_rate, ceiling = interleaved(ours, plain, images, args.batch, matmul)
        ceiling_median, ceiling_best = statistics.median(ceiling), max(ceiling)
        gflops = flops_per_image(side, reading) / 1e9
        achieved = ours_rate * gflops
        print(
            f"{name}: ours {ours_rate:.2f} img/s, plain DINO-style {plain_rate:.2f} img/s, "
            f"ratio {ours_rate / plain_rate:.2f}x (max |ours - plain| {diff:.1e})\n"
            f"  {gflops:.2f} GFLOP/img -> {achieved:.1f} GFLOP/s; fp32 matmul {size}^3 in the same run: median "
            f"{ceiling_median:.1f}, best {ceiling_best:.1f} GFLOP/s -> {100 * achieved / ceiling_median:.0f}% of the "
            f"median ceiling ({100 * achieved / ceiling_best:.0f}% of the best)"
        )
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    print(
        f"CPU time {cpu:.0f} s over {wall:.0f} s wall = {cpu / wall:.2f} of {torch.get_num_threads()} threads busy; "
        f"load average after {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
