"""Feature-extraction throughput of every architecture: our backbone against a plain reference forward, on the same
seeded weights.

    .venv/bin/python bench/extract.py [--images N] [--batch B] [--threads T] [--architectures A ...]

--batch and --threads default to the workflow's `features.batch_size` and `features.threads` (the config schema),
so the figures are those of an extract job.

Prints, per architecture (ViT-S/16, with LayerScale, Aug-ViT-S circulant2, XCiT-S12/16), for keys480 (480 x 480
input, block 12's keys) and tokens224 (224 x 224, block 12's output):
- images/s of our network (`evaluate.networks.vit.VisionTransformer`, `evaluate.networks.xcit.XCiT`: `last_keys`, `tokens`).
  What the ViT family does differently: SDPA
  attention (fused, no N x N weights in memory); keys skip block 12's attention and MLP and compute only the key
  third of its qkv; tokens made contiguous after the patch embedding (DINO's `transpose` layout otherwise makes
  every LayerNorm and linear copy its input); the resampled position table cached per grid. Tried and left out:
  torch.compile (inductor, freezing) was slower here after ~45 s of compiling; MLP chunking for cache reuse was
  slower;
- images/s of the plain forward written below the way DINO's / SelfPatch's `vision_transformer.py` are written
  (explicit `softmax(q k^T * scale) v`, every block run in full; keys taken from block 12's `qkv` output, as
  TokenCut and MaskCut do with a forward hook; LayerScale as DeiT III's block, the augmented shortcuts as the
  Aug-ViT authors' code, XCiT as its authors' `xcit.py`) and the ratio;
- the fp32 matmul ceiling measured in the same run (a 2048^3 `torch.matmul` timed beside every batch), and the
  fraction of it our backbone reaches, counting its FLOPs analytically (a multiply-add is 2 FLOPs; LayerNorm,
  GELU, softmax and the additions are not counted), and each new architecture's fraction against plain ViT-S/16's.
Both paths are checked to agree (max abs difference) before anything is timed. Ours and plain run batch by batch
in turn, so load from other processes on the machine falls on both alike; the CPU-busy line at the end shows
how much of the machine the run actually had.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import machine_line  # noqa: E402
from bench.scale import add_job_options  # noqa: E402
from evaluate.networks.registry import ARCHITECTURES, REGISTRY  # noqa: E402
from evaluate.networks.vit import resample_pos_embed  # noqa: E402
from evaluate.networks.xcit import FOURIER_DIM, FOURIER_TEMPERATURE, STEM_WIDTHS  # noqa: E402

DIM, HIDDEN, DEPTH = 384, 1536, 12
HEADS = {"6x64": 6, "8x48": 8}
BENCH_ARCHITECTURES = tuple(reversed(ARCHITECTURES))  # the plain ViT first; Aug-ViT in circulant2


# ----------------------------------------------------------------------------------------------------- the references


def plain_attention(block, x: Tensor) -> tuple[Tensor, Tensor]:
    """DINO's Attention.forward: explicit scores, softmax, weighted values. Returns (output, keys (B, N, C))."""
    B, N, C = x.shape
    heads = 6
    qkv = block.attn.qkv(x).reshape(B, N, 3, heads, C // heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = (q @ k.transpose(-2, -1)) * (C // heads) ** -0.5
    attn = attn.softmax(dim=-1)
    out = (attn @ v).transpose(1, 2).reshape(B, N, C)
    return block.attn.proj(out), k.transpose(1, 2).reshape(B, N, C)


def plain_shortcuts(block, names: tuple[str, ...], u: Tensor) -> Tensor:
    """The authors' augmented shortcuts: each GELU(F.linear(u, weight_list[index_matrix], bias)), summed."""
    total = torch.zeros_like(u)
    for name in names:
        layer = getattr(block, name)[0]
        total = total + F.gelu(F.linear(u, layer.weight_list[layer.index_matrix], layer.bias))
    return total


def plain_vit_forward(model, x: Tensor) -> tuple[Tensor, Tensor]:
    """Every block in full, DINO style (LayerScale as DeiT III's block, augmented shortcuts as the authors'
    `augvit_small_circulant2`). Returns (block-12 output, block-12 keys), both (B, N, 384)."""
    B, _, H, W = x.shape
    z = model.patch_embed.proj(x).flatten(2).transpose(1, 2)
    z = z + resample_pos_embed(model.pos_embed, (H // 16, W // 16))
    keys = None
    for blk in model.blocks:
        u = blk.norm1(z)
        y, keys = plain_attention(blk, u)
        if hasattr(blk, "gamma_1"):
            z = z + blk.gamma_1 * y
            z = z + blk.gamma_2 * blk.mlp.fc2(F.gelu(blk.mlp.fc1(blk.norm2(z))))
        elif hasattr(blk, "augs_attn2"):
            z = 0.75 * (z + y + plain_shortcuts(blk, ("augs_attn", "augs_attn2"), u))
            w = blk.norm2(z)
            z = 0.75 * (z + blk.mlp.fc2(F.gelu(blk.mlp.fc1(w))) + plain_shortcuts(blk, ("augs", "augs2"), w))
        else:
            z = z + y
            z = z + blk.mlp.fc2(F.gelu(blk.mlp.fc1(blk.norm2(z))))
    return z, keys


def plain_fourier(model, B: int, H: int, W: int) -> Tensor:
    """The authors' PositionalEncodingFourier.forward: cumulative sums of a mask, interleaved sin / cos."""
    mask = torch.zeros(B, H, W, dtype=torch.bool)
    not_mask = ~mask
    y_embed = not_mask.cumsum(1, dtype=torch.float32)
    x_embed = not_mask.cumsum(2, dtype=torch.float32)
    y_embed = y_embed / (y_embed[:, -1:, :] + 1e-6) * 2 * math.pi
    x_embed = x_embed / (x_embed[:, :, -1:] + 1e-6) * 2 * math.pi
    dim_t = torch.arange(FOURIER_DIM, dtype=torch.float32)
    dim_t = FOURIER_TEMPERATURE ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / FOURIER_DIM)
    pos_x = x_embed[:, :, :, None] / dim_t
    pos_y = y_embed[:, :, :, None] / dim_t
    pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
    pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
    pos = torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)
    return model.pos_embeder.token_projection(pos)


def plain_xcit_forward(model, x: Tensor) -> tuple[Tensor, Tensor]:
    """The authors' XCiT forward up to block 12, every block in full: conv stem module by module, tokens as
    `flatten(2).transpose(1, 2)`, XCA on transposed q, k, v with F.normalize over the last axis, LPI through an
    NCHW map. Returns (block-12 output, block-12 keys), both (B, N, 384)."""
    B = x.shape[0]
    x = model.patch_embed.proj(x)
    Hp, Wp = x.shape[-2:]
    x = x.flatten(2).transpose(1, 2)
    x = x + plain_fourier(model, B, Hp, Wp).reshape(B, -1, x.shape[1]).permute(0, 2, 1)
    keys = None
    for blk in model.blocks:
        B, N, C = x.shape
        h = blk.attn.num_heads
        qkv = blk.attn.qkv(blk.norm1(x)).reshape(B, N, 3, h, C // h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        keys = k.transpose(1, 2).reshape(B, N, C)
        q, k, v = q.transpose(-2, -1), k.transpose(-2, -1), v.transpose(-2, -1)
        q = F.normalize(q, dim=-1)
        k = F.normalize(k, dim=-1)
        attn = ((q @ k.transpose(-2, -1)) * blk.attn.temperature).softmax(dim=-1)
        y = (attn @ v).permute(0, 3, 1, 2).reshape(B, N, C)
        x = x + blk.gamma1 * blk.attn.proj(y)
        m = blk.norm3(x).permute(0, 2, 1).reshape(B, C, Hp, Wp)
        lpi = blk.local_mp
        m = lpi.conv2(lpi.bn(F.gelu(lpi.conv1(m)))).reshape(B, C, N).permute(0, 2, 1)
        x = x + blk.gamma3 * m
        x = x + blk.gamma2 * blk.mlp.fc2(F.gelu(blk.mlp.fc1(blk.norm2(x))))
    return x, keys


def plain_forward(model, x: Tensor) -> tuple[Tensor, Tensor]:
    return plain_xcit_forward(model, x) if hasattr(model, "pos_embeder") else plain_vit_forward(model, x)


# ----------------------------------------------------------------------------------------------------- FLOPs


def flops_per_image(architecture: str, side: int, reading: str) -> float:
    """Matmul and convolution FLOPs of one image through our path: 'keys' (11 blocks + block 12's key projection) or
    'tokens' (12 blocks). A multiply-add is 2 FLOPs; norms, activations, softmax and additions are not counted."""
    g = side // 16
    n = g * g
    linear = n * (DIM * 3 * DIM + DIM * DIM + 2 * DIM * HIDDEN) * 2
    if architecture == "xcit-s12-16":
        embed, s, cin = 0, side, 3
        for cout in STEM_WIDTHS:
            s = (s - 1) // 2 + 1
            embed += s * s * cout * cin * 9 * 2
            cin = cout
        embed += n * 2 * FOURIER_DIM * DIM * 2  # the 1 x 1 token projection
        head_dim = DIM // HEADS["8x48"]
        block = linear + 2 * n * DIM * head_dim * 2 + 2 * n * DIM * 9 * 2  # q^T k and A v^T; two depthwise 3 x 3
    else:
        embed = n * (3 * 16 * 16) * DIM * 2
        block = linear + 2 * n * n * DIM * 2  # q k^T and weights @ v, all heads
        if architecture == "augvit-s16":
            block += 4 * n * DIM * DIM * 2  # four 384 x 384 shortcuts
    if reading == "keys":
        return embed + (DEPTH - 1) * block + n * DIM * DIM * 2
    return embed + DEPTH * block


def seeded(architecture: str) -> torch.nn.Module:
    """The architecture's network, seeded (0), in its main variant, eval mode."""
    arch = REGISTRY[architecture]
    torch.manual_seed(0)
    return arch.build(arch.variants[0]).eval()


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
    add_job_options(parser, "--batch", "--threads")
    parser.add_argument("--architectures", nargs="+", default=list(BENCH_ARCHITECTURES), choices=BENCH_ARCHITECTURES,
                        help="which architectures (default: all four)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    size = 2048
    a, b, out = torch.randn(size, size), torch.randn(size, size), torch.empty(size, size)
    matmul_sample(a, b, out)
    matmul = lambda: matmul_sample(a, b, out)  # noqa: E731
    print(machine_line())
    print(
        f"{args.images} images per reading, "
        f"batch {args.batch}, load average before {os.getloadavg()[0]:.1f} (other processes share the CPUs)"
    )
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    fractions: dict[tuple[str, str], float] = {}
    for architecture in args.architectures:
        model = seeded(architecture)
        readings = [
            ("keys480", 480, "keys", model.last_keys, lambda x, m=model: plain_forward(m, x)[1]),
            ("tokens224", 224, "tokens", model.tokens, lambda x, m=model: plain_forward(m, x)[0]),
        ]
        for name, side, reading, ours, plain in readings:
            images = torch.randn(args.images, 3, side, side, generator=torch.Generator().manual_seed(side))
            with torch.inference_mode():
                diff = (ours(images[:2]) - plain(images[:2])).abs().max().item()
            ours_rate, plain_rate, ceiling = interleaved(ours, plain, images, args.batch, matmul)
            ceiling_median, ceiling_best = statistics.median(ceiling), max(ceiling)
            gflops = flops_per_image(architecture, side, reading) / 1e9
            achieved = ours_rate * gflops
            fractions[(architecture, name)] = achieved / ceiling_median
            print(
                f"{architecture} {name}: ours {ours_rate:.2f} img/s, plain reference {plain_rate:.2f} img/s, "
                f"ratio {ours_rate / plain_rate:.2f}x (max |ours - plain| {diff:.1e})\n"
                f"  {gflops:.2f} GFLOP/img -> {achieved:.1f} GFLOP/s; fp32 matmul {size}^3 in the same run: median "
                f"{ceiling_median:.1f}, best {ceiling_best:.1f} GFLOP/s -> {100 * achieved / ceiling_median:.0f}% of "
                f"the median ceiling ({100 * achieved / ceiling_best:.0f}% of the best)"
            )
    if "vit-s16" in args.architectures:
        for (architecture, name), fraction in fractions.items():
            if architecture != "vit-s16":
                base = fractions[("vit-s16", name)]
                print(f"{architecture} {name}: {100 * fraction:.0f}% of the ceiling against plain ViT-S/16's "
                      f"{100 * base:.0f}% ({100 * (fraction / base - 1):+.0f}%)")
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    print(
        f"CPU time {cpu:.0f} s over {wall:.0f} s wall = {cpu / wall:.2f} of {torch.get_num_threads()} threads busy; "
        f"load average after {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
