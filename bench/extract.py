"""Feature-extraction throughput of every architecture: our backbone against a plain reference forward, on the same
seeded weights.

    .venv/bin/python bench/extract.py [--images N] [--batch B] [--threads T] [--architectures A ...]
                                      [--form backbone|released]

--batch and --threads default to the workflow's `features.batch_size` and `features.threads` (the config schema),
so the figures are those of an extract job.

The default run times the seed's four (ViT-S/16, with LayerScale, Aug-ViT-S circulant2, XCiT-S12/16). The DINO
family of docs/design.md §14 (vit-s8, vit-b16, vit-b8, dinov2-{s,b,l}14[-reg4]) and DINOv3's ViTs of §14.1
(dinov3-s16, -s16plus, -b16, -l16, -h16plus) are opt-in, named with --architectures: the DINO family's three rows of
docs/speed.md alone (ViT-S/8, ViT-B/16, DINOv2-S/14-reg4: 361 + 170 + 69 GFLOP per keys480 image, counted as below)
are three times the seed's four (50 + 50 + 61 + 40), and ViT-S/8's plain reference holds 6 x 3600^2 attention
weights per image, so with them the default run would pass ten minutes on two cores. Those rows:
`--images 2 --architectures vit-s16 vit-s8 vit-b16 dinov2-s14-reg4`. Each runs in the backbone form except
DINOv2 with registers, which runs released, as the hub builds it: class token and 4 registers in the forward, the
37 x 37 table resampled by the antialiased rule, final norm on tokens224; --form makes every ViT run in one form.
DINOv3's reference (`plain_dinov3_forward`) is their `DinoVisionTransformer` written out: rotary (sin, cos) recomputed
for every block as their loop does, q and k rotated by `rotate_half`, explicit attention; --authors-sdpa makes it
call `scaled_dot_product_attention` as their `SelfAttention.compute_attention` does, so the ratio is against their
own code.

Prints, per architecture, for keys480 (s x s input, s = p * round(480 / p): 480, or 476 for patch 14; the last
block's keys) and tokens224 (224 x 224, the last block's output):
- images/s of our network (`evaluate.networks.vit.VisionTransformer`, `evaluate.networks.xcit.XCiT`: `last_keys`, `tokens`).
  What the ViT family does differently: SDPA
  attention (fused, no N x N weights in memory); keys skip block 12's attention and MLP and compute only the key
  third of its qkv; tokens made contiguous after the patch embedding (DINO's `transpose` layout otherwise makes
  every LayerNorm and linear copy its input); the resampled position table cached per grid. Tried and left out:
  torch.compile (inductor, freezing) was slower here after ~45 s of compiling; MLP chunking for cache reuse was
  slower;
- images/s of the plain forward written below the way DINO's / DINOv2's / SelfPatch's `vision_transformer.py` are
  written (explicit `softmax(q k^T * scale) v` with heads of 64, every block run in full; the patch size, width and
  depth the network's; class token, registers and position-table interpolation as DINOv2's `prepare_tokens_with_masks`
  and `interpolate_pos_encoding`, recomputed every call; keys taken from the last block's `qkv` output, as
  TokenCut and MaskCut do with a forward hook, patch rows only; LayerScale as DeiT III's and DINOv2's block, the
  augmented shortcuts as the Aug-ViT authors' code, XCiT as its authors' `xcit.py`) and the ratio;
- the fp32 matmul ceiling measured in the same run (a 2048^3 `torch.matmul` timed beside every batch), and the
  fraction of it our backbone reaches, counting its FLOPs analytically (a multiply-add is 2 FLOPs; LayerNorm,
  GELU, softmax and the additions are not counted; class token and register rows included), and each other
  architecture's fraction against plain ViT-S/16's.
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
from evaluate.networks import FORMS  # noqa: E402
from evaluate.networks.registry import DINOV3, FAMILY, REGISTRY, SEED_ARCHITECTURES  # noqa: E402
from evaluate.networks.xcit import FOURIER_DIM, FOURIER_TEMPERATURE, STEM_WIDTHS  # noqa: E402

DIM, HIDDEN, DEPTH = 384, 1536, 12  # XCiT-S12/16's sizes (the ViTs' come from their geometry)
HEADS = {"6x64": 6, "8x48": 8}
# The default run: the seed's four (the plain ViT first; Aug-ViT in circulant2). The DINO family is opt-in through
# --architectures: ViT-S/8's keys480 (3,600 rows) alone costs about as much as the four together.
DEFAULT_ARCHITECTURES = tuple(reversed(SEED_ARCHITECTURES))
BENCH_ARCHITECTURES = DEFAULT_ARCHITECTURES + tuple(reversed(FAMILY)) + DINOV3  # every registry name


def default_form(architecture: str) -> str:
    """The form a row runs in unless --form says: DINOv2 with registers in the released form (class token and 4
    registers in the forward, the hub's antialiased position rule) and DINOv3 (class token and 4 storage tokens in
    the forward), every other network in the backbone form (`features.form`'s default)."""
    return "released" if REGISTRY[architecture].geometry.registers else "backbone"


# ----------------------------------------------------------------------------------------------------- the references


def plain_attention(block, x: Tensor) -> tuple[Tensor, Tensor]:
    """DINO's Attention.forward: explicit scores, softmax, weighted values. Returns (output, keys (B, N, C))."""
    B, N, C = x.shape
    heads = block.attn.num_heads
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


def plain_interpolate_pos_encoding(model, x: Tensor, w: int, h: int) -> Tensor:
    """DINOv2's `DinoVisionTransformer.interpolate_pos_encoding` (DINO's is the same with offset 0.1 and no
    antialias), on the network's table: the class row (where there is one) and the patch rows resampled bicubically
    in float32, by `scale_factor` with DINO's 0.1 offset or, for the hub's register models
    (`interpolate_antialias=True, interpolate_offset=0`), by `size` with antialiasing. Recomputed every call, as the
    authors' code does. Returns (1, [1 +] gh * gw, D)."""
    class_row = getattr(model, "cls_token", None) is not None
    pos_embed = model.pos_embed.float()
    patch_pos_embed = pos_embed[:, 1:] if class_row else pos_embed
    N = patch_pos_embed.shape[1]
    dim = pos_embed.shape[-1]
    p = model.patch_embed.proj.kernel_size[0]
    w0, h0 = w // p, h // p
    M = int(math.sqrt(N))
    if (w0, h0) != (M, M):
        antialias = model.position_rule == "antialias"
        kwargs = {"size": (w0, h0)} if antialias else {"scale_factor": ((w0 + 0.1) / M, (h0 + 0.1) / M)}
        patch_pos_embed = F.interpolate(patch_pos_embed.reshape(1, M, M, dim).permute(0, 3, 1, 2), mode="bicubic",
                                        antialias=antialias, **kwargs)
        patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).reshape(1, -1, dim)
    if not class_row:
        return patch_pos_embed
    return torch.cat((pos_embed[:, :1], patch_pos_embed), dim=1)


def plain_prepare_tokens(model, x: Tensor) -> tuple[Tensor, int]:
    """DINOv2's `prepare_tokens_with_masks` (DINO's without registers; SelfPatch's without the class token): patch
    embedding as `flatten(2).transpose(1, 2)`, the class token prepended, the interpolated table added, the registers
    inserted after the class token. Returns (tokens (B, rows, D), rows before the patches)."""
    B, _, H, W = x.shape
    z = model.patch_embed.proj(x).flatten(2).transpose(1, 2)
    cls = getattr(model, "cls_token", None)
    if cls is not None:
        z = torch.cat((cls.expand(B, -1, -1), z), dim=1)
    z = z + plain_interpolate_pos_encoding(model, z, H, W)  # the authors' `B, nc, w, h = x.shape`: their w is H
    registers = getattr(model, "register_tokens", None)
    if registers is not None:
        z = torch.cat((z[:, :1], registers.expand(B, -1, -1), z[:, 1:]), dim=1)
    return z, (cls is not None) + (0 if registers is None else registers.shape[1])


def plain_vit_forward(model, x: Tensor) -> tuple[Tensor, Tensor]:
    """Every block in full, DINO style (LayerScale as DeiT III's and DINOv2's block, augmented shortcuts as the
    authors' `augvit_small_circulant2`), any patch size and width; class token and registers in the forward where
    the network has them, the final norm on the output where it has one (DINO's `get_intermediate_layers(n=1)`).
    Returns (last block's output, last block's keys), both (B, patches, D): the rows after the class token and
    registers."""
    z, extra = plain_prepare_tokens(model, x)
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
    if getattr(model, "norm", None) is not None:
        z = model.norm(z)
    return z[:, extra:], keys[:, extra:]


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


def plain_rope(periods: Tensor, H: int, W: int) -> tuple[Tensor, Tensor]:
    """DINOv3's `RopePositionEmbedding.forward` (eval mode, "separate" coordinates): (sin, cos), each (H W, 64)."""
    dd = {"device": periods.device, "dtype": torch.float32}
    coords_h = torch.arange(0.5, H, **dd) / H
    coords_w = torch.arange(0.5, W, **dd) / W
    coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing="ij"), dim=-1).flatten(0, 1)
    coords = 2.0 * coords - 1.0
    angles = 2 * math.pi * coords[:, :, None] / periods[None, None, :]
    angles = angles.flatten(1, 2).tile(2)
    return torch.sin(angles), torch.cos(angles)


def plain_rope_apply(x: Tensor, sin: Tensor, cos: Tensor) -> Tensor:
    """DINOv3's `rope_apply`: x cos + rotate_half(x) sin, rotate_half by `chunk(2)` and `cat([-x2, x1])`."""
    x1, x2 = x.chunk(2, dim=-1)
    return (x * cos) + (torch.cat([-x2, x1], dim=-1) * sin)


def plain_dinov3_forward(model, x: Tensor, sdpa: bool = False) -> tuple[Tensor, Tensor]:
    """DINOv3's `DinoVisionTransformer.forward_features` written out, every block in full: the patch embedding,
    class and storage tokens concatenated in front; for every block the rope recomputed (their loop calls
    `rope_embed(H=H, W=W)` per block); `SelfAttention.compute_attention`: qkv, reshape, unbind, transpose,
    `apply_rope` (q and k cast to the rope's dtype, prefix rows split off, rotated, concatenated back), explicit
    softmax(q k^T * scale) v (their own code: `scaled_dot_product_attention`, with `sdpa`), proj; LayerScale, the
    MLP or SwiGLU as their modules; the final norm where the network has one. Keys: the last block's qkv output's
    key third (a forward hook on `attn.qkv`), patch rows. Returns (output, keys), both (B, patches, D)."""
    B, _, H, W = x.shape
    p = model.patch_size
    z = model.patch_embed.proj(x).flatten(2).transpose(1, 2)
    front = [t.expand(B, -1, -1) for t in (model.cls_token, model.storage_tokens) if t is not None]
    z = torch.cat([*front, z], dim=1)
    prefix = model.extra_tokens
    keys = None
    for blk in model.blocks:
        sin, cos = plain_rope(model.rope_embed.periods, H // p, W // p)
        N, C = z.shape[1], z.shape[2]
        heads = blk.attn.num_heads
        qkv = blk.attn.qkv(blk.norm1(z))
        keys = qkv[..., C : 2 * C]
        q, k, v = torch.unbind(qkv.reshape(B, N, 3, heads, C // heads), 2)
        q, k, v = [t.transpose(1, 2) for t in (q, k, v)]
        q = torch.cat((q[:, :, :prefix], plain_rope_apply(q[:, :, prefix:], sin, cos)), dim=-2)
        k = torch.cat((k[:, :, :prefix], plain_rope_apply(k[:, :, prefix:], sin, cos)), dim=-2)
        if sdpa:
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            out = ((q @ k.transpose(-2, -1)) * (C // heads) ** -0.5).softmax(dim=-1) @ v
        z = z + blk.ls1(blk.attn.proj(out.transpose(1, 2).reshape(B, N, C)))
        z = z + blk.ls2(blk.mlp(blk.norm2(z)))
    if model.norm is not None:
        z = model.norm(z)
    return z[:, prefix:], keys[:, prefix:]


def plain_forward(model, x: Tensor, authors_sdpa: bool = False) -> tuple[Tensor, Tensor]:
    """(tokens, keys) of the reference forward; authors_sdpa (--authors-sdpa): DINOv3's attends as their code does."""
    if hasattr(model, "rope_embed"):
        return plain_dinov3_forward(model, x, authors_sdpa)
    return plain_xcit_forward(model, x) if hasattr(model, "pos_embeder") else plain_vit_forward(model, x)


# ----------------------------------------------------------------------------------------------------- FLOPs


def flops_per_image(model, architecture: str, side: int, reading: str) -> float:
    """Matmul and convolution FLOPs of one image through our path: 'keys' (every block but the last + the last
    block's key projection) or 'tokens' (every block), over every row the forward carries (class token and
    registers included). A multiply-add is 2 FLOPs; norms, activations, softmax and additions are not counted."""
    if architecture == "xcit-s12-16":
        g = side // 16
        n = g * g
        linear = n * (DIM * 3 * DIM + DIM * DIM + 2 * DIM * HIDDEN) * 2
        embed, s, cin = 0, side, 3
        for cout in STEM_WIDTHS:
            s = (s - 1) // 2 + 1
            embed += s * s * cout * cin * 9 * 2
            cin = cout
        embed += n * 2 * FOURIER_DIM * DIM * 2  # the 1 x 1 token projection
        head_dim = DIM // HEADS["8x48"]
        block = linear + 2 * n * DIM * head_dim * 2 + 2 * n * DIM * 9 * 2  # q^T k and A v^T; two depthwise 3 x 3
        depth, dim = DEPTH, DIM
    else:
        geometry = model.geometry
        p, dim, depth = geometry.patch, geometry.width, geometry.depth
        patches = (side // p) ** 2
        n = patches + model.extra_tokens
        ffn = sum(layer.in_features * layer.out_features for layer in model.blocks[0].mlp.modules()
                  if isinstance(layer, torch.nn.Linear))  # MLP 2 x 4 D^2; DINOv3's SwiGLU 3 D hidden
        linear = n * (dim * 3 * dim + dim * dim + ffn) * 2
        embed = patches * (3 * p * p) * dim * 2
        block = linear + 2 * n * n * dim * 2  # q k^T and weights @ v, all heads
        if architecture == "augvit-s16":
            block += 4 * n * dim * dim * 2  # four 384 x 384 shortcuts
    if reading == "keys":
        return embed + (depth - 1) * block + n * dim * dim * 2
    return embed + depth * block


def seeded(architecture: str, form: str = "backbone") -> torch.nn.Module:
    """The architecture's network, seeded (0), in its main variant and `form`, eval mode. The released form is built
    as its authors' files hold it: class token, registers and final norm, the position table for the grid its
    released files store (DINOv2's hub: 37 x 37) and their position rule (the hub's register models: antialias)."""
    arch = REGISTRY[architecture]
    torch.manual_seed(0)
    if form == "backbone" or not arch.block:
        return arch.build(arch.variants[0]).eval()
    return arch.build(arch.variants[0], class_token=True, registers=arch.geometry.registers, final_norm=True,
                      position_rule=arch.default_position_rule(training=False)).eval()


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
    parser.add_argument("--architectures", nargs="+", default=list(DEFAULT_ARCHITECTURES), choices=BENCH_ARCHITECTURES,
                        metavar="A", help=f"which architectures, of {', '.join(BENCH_ARCHITECTURES)} (default: the "
                        f"seed's four, {', '.join(DEFAULT_ARCHITECTURES)})")
    parser.add_argument("--form", choices=FORMS, help="run every ViT in this form (default: DINOv2 with registers "
                        "released, every other backbone; XCiT has one form)")
    parser.add_argument("--authors-sdpa", action="store_true", help="DINOv3's reference attends with "
                        "scaled_dot_product_attention, as their code does (default: explicit softmax attention)")
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
        form = args.form or default_form(architecture)
        model = seeded(architecture, form)
        geometry = REGISTRY[architecture].geometry
        form = getattr(model, "form", "backbone")  # XCiT: one form
        label = architecture if form == "backbone" else f"{architecture} ({form})"
        if form == "released" and hasattr(model, "rope_embed"):
            print(f"{label}: class token, {model.geometry.registers} storage tokens and final norm in the forward, "
                  "rotary positions")
        elif form == "released":
            print(f"{label}: class token, {model.geometry.registers} registers and final norm in the forward, position "
                  f"table for {math.isqrt(model.pos_embed.shape[1] - 1)}^2 patches resampled by the "
                  f"{model.position_rule!r} rule")
        readings = [
            ("keys480", 480, "keys", model.last_keys, lambda x, m=model: plain_forward(m, x, args.authors_sdpa)[1]),
            ("tokens224", 224, "tokens", model.tokens, lambda x, m=model: plain_forward(m, x, args.authors_sdpa)[0]),
        ]
        for name, nominal, reading, ours, plain in readings:
            side = geometry.keys480_side if name == "keys480" else nominal  # 476 for p 14
            images = torch.randn(args.images, 3, side, side, generator=torch.Generator().manual_seed(side))
            with torch.inference_mode():
                diff = (ours(images[:2]) - plain(images[:2])).abs().max().item()
            ours_rate, plain_rate, ceiling = interleaved(ours, plain, images, args.batch, matmul)
            ceiling_median, ceiling_best = statistics.median(ceiling), max(ceiling)
            gflops = flops_per_image(model, architecture, side, reading) / 1e9
            achieved = ours_rate * gflops
            fractions[(label, name)] = achieved / ceiling_median
            print(
                f"{label} {name} ({side} px): ours {ours_rate:.2f} img/s, plain reference {plain_rate:.2f} img/s, "
                f"ratio {ours_rate / plain_rate:.2f}x (max |ours - plain| {diff:.1e})\n"
                f"  {gflops:.2f} GFLOP/img -> {achieved:.1f} GFLOP/s; fp32 matmul {size}^3 in the same run: median "
                f"{ceiling_median:.1f}, best {ceiling_best:.1f} GFLOP/s -> {100 * achieved / ceiling_median:.0f}% of "
                f"the median ceiling ({100 * achieved / ceiling_best:.0f}% of the best)"
            )
    if any(label == "vit-s16" for label, _ in fractions):
        for (label, name), fraction in fractions.items():
            if label != "vit-s16":
                base = fractions[("vit-s16", name)]
                print(f"{label} {name}: {100 * fraction:.0f}% of the ceiling against plain ViT-S/16's "
                      f"{100 * base:.0f}% ({100 * (fraction / base - 1):+.0f}%)")
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    print(
        f"CPU time {cpu:.0f} s over {wall:.0f} s wall = {cpu / wall:.2f} of {torch.get_num_threads()} threads busy; "
        f"load average after {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
