"""ViT-S/16 in SelfPatch form (DESIGN §1): DINO's vision transformer without class token and without final norm.

Read it top to bottom like DINO's `vision_transformer.py`:

    PatchEmbed   Conv2d(3, 384, 16, stride 16): (B, 3, H, W) -> (B, H/16 * W/16, 384), row by row
    Attention    qkv 384 -> 1152 ordered [q | k | v], 6 heads x 64, softmax(q.k / 8) v, proj 384 -> 384
    Mlp          384 -> 1536, exact (erf) GELU, 1536 -> 384
    Block        U = Z + MSA(LN1(Z));  Z' = U + MLP(LN2(U));  LayerNorm eps 1e-6
    VisionTransformer   patch embedding + position table (resampled to the grid) + 12 blocks, nothing after

Two readings leave the network (DESIGN §3):

- `model.tokens(x)` (also `model(x)`): block 12's output, (B, N, 384) float32;
- `model.last_keys(x)`: block 12's keys `k = W_k LN1(z) + b_k`, (B, N, 384) float32, heads concatenated in head
  order. Only LN1 and the key third of block 12's `qkv` run; block 12's attention and MLP are skipped, since
  nothing of them reaches the keys.

Attention goes through `attention` below, which calls `torch.nn.functional.scaled_dot_product_attention`
(numerically plain softmax attention, without materialising the N x N weights on the fused CPU kernels).
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import Tensor, nn

from evaluate import EvaluationError

PATCH = 16
EMBED_DIM = 384
DEPTH = 12
HEADS = 6
MLP_HIDDEN = 1536
LN_EPS = 1e-6
POS_GRID = 14  # the position table is trained for 224 x 224 inputs: a 14 x 14 grid of patches


class BackboneInputError(EvaluationError, ValueError):
    """An input the backbone cannot take (wrong rank, channels, dtype, or a side that is not a multiple of 16)."""


def resample_pos_embed(pos_embed: Tensor, grid: tuple[int, int]) -> Tensor:
    """The position table for a (gh, gw) grid of patches, by DINO's and SelfPatch's own rule (DESIGN §1).

    pos_embed: (1, 196, C) float, the table trained for 14 x 14 patches, row by row.
    grid: (gh, gw) patches down and across.
    Returns (1, gh * gw, C), row by row. At 14 x 14 the table is returned unchanged (the same tensor).

    The table is viewed as (1, 14, 14, C) and permuted to (1, C, 14, 14) (a bare reshape to (1, C, 14, 14) would
    scramble it), resampled by bicubic interpolation with `align_corners=False` and
    `scale_factor=((gh + 0.1) / 14, (gw + 0.1) / 14)` (the +0.1 is DINO's guard against rounding the output size
    down), checked to be (gh, gw), permuted back and flattened.
    """
    gh, gw = int(grid[0]), int(grid[1])
    if pos_embed.ndim != 3 or pos_embed.shape[0] != 1 or pos_embed.shape[1] != POS_GRID * POS_GRID:
        raise BackboneInputError(f"position table must be (1, {POS_GRID * POS_GRID}, C), got {tuple(pos_embed.shape)}")
    if gh < 1 or gw < 1:
        raise BackboneInputError(f"grid must be at least 1 x 1 patches, got {gh} x {gw}")
    if (gh, gw) == (POS_GRID, POS_GRID):
        return pos_embed
    dim = pos_embed.shape[-1]
    table = pos_embed.reshape(1, POS_GRID, POS_GRID, dim).permute(0, 3, 1, 2)
    table = F.interpolate(
        table,
        scale_factor=((gh + 0.1) / POS_GRID, (gw + 0.1) / POS_GRID),
        mode="bicubic",
        align_corners=False,
    )
    if tuple(table.shape[-2:]) != (gh, gw):
        raise BackboneInputError(f"resampled position table is {tuple(table.shape[-2:])}, expected {(gh, gw)}")
    return table.permute(0, 2, 3, 1).reshape(1, gh * gw, dim)


def attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """softmax(q k^T / sqrt(d)) v for each head.

    q, k, v: (B, heads, N, d) float. Returns (B, heads, N, d). The score scale is 1 / sqrt(d), i.e. 1/8 for d = 64.
    """
    return F.scaled_dot_product_attention(q, k, v)


class PatchEmbed(nn.Module):
    """(B, 3, H, W) -> (B, H/16 * W/16, 384): one 16 x 16 patch per token, row by row. 295,296 parameters."""

    def __init__(self, patch_size: int = PATCH, in_chans: int = 3, embed_dim: int = EMBED_DIM):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: Tensor) -> Tensor:
        # contiguous: otherwise the transposed layout propagates through every residual add, and each LayerNorm
        # and linear layer copies its input first
        return self.proj(x).flatten(2).transpose(1, 2).contiguous()


class Attention(nn.Module):
    """Multi-head self-attention: qkv 384 -> 1152 ([q | k | v], each 6 heads x 64 in head order), proj 384 -> 384."""

    def __init__(self, dim: int = EMBED_DIM, num_heads: int = HEADS):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        """x: (B, N, C) -> (B, N, C)."""
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        out = attention(q, k, v)  # (B, heads, N, d)
        return self.proj(out.transpose(1, 2).reshape(B, N, C))

    def keys(self, x: Tensor) -> Tensor:
        """The key third of `qkv` only: x (B, N, C), already normalised by LN1 -> (B, N, C), heads in order."""
        dim = x.shape[-1]
        return F.linear(x, self.qkv.weight[dim : 2 * dim], self.qkv.bias[dim : 2 * dim])


class Mlp(nn.Module):
    """384 -> 1536 -> 384 with exact (erf) GELU between."""

    def __init__(self, dim: int = EMBED_DIM, hidden: int = MLP_HIDDEN):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()  # approximate="none": the erf form
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: U = Z + MSA(LN1(Z)); Z' = U + MLP(LN2(U)). 1,774,464 parameters."""

    def __init__(self, dim: int = EMBED_DIM, num_heads: int = HEADS, mlp_hidden: int = MLP_HIDDEN):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, mlp_hidden)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))

    def keys(self, x: Tensor) -> Tensor:
        """This block's keys W_k LN1(x) + b_k: (B, N, C) -> (B, N, C); its attention and MLP do not run."""
        return self.attn.keys(self.norm1(x))


class VisionTransformer(nn.Module):
    """ViT-S/16, SelfPatch form: patch_embed, pos_embed (1, 196, 384), 12 blocks; no class token, no final norm.

    21,664,128 parameters. State-dict names are DINO's: `patch_embed.proj.*`, `pos_embed`,
    `blocks.{i}.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}.*`.
    """

    def __init__(
        self,
        patch_size: int = PATCH,
        embed_dim: int = EMBED_DIM,
        depth: int = DEPTH,
        num_heads: int = HEADS,
        mlp_hidden: int = MLP_HIDDEN,
    ):
        super().__init__()
        self.patch_size = patch_size
        self.embed_dim = embed_dim
        self.patch_embed = PatchEmbed(patch_size, 3, embed_dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, POS_GRID * POS_GRID, embed_dim))
        self.blocks = nn.ModuleList([Block(embed_dim, num_heads, mlp_hidden) for _ in range(depth)])
        # Resampled position tables per grid. A cached table is valid only for the very tensor, storage and version
        # it came from, so loading a state dict (an in-place copy bumps the version) or swapping the parameter
        # invalidates it.
        self._pos_cache: dict[tuple[int, int], tuple[tuple, Tensor]] = {}
        self._init_weights()

    def _init_weights(self) -> None:
        """DINO's initialisation: truncated normal (std 0.02) for linears and the table, LayerNorm 1 and 0."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def pos_embed_for(self, grid: tuple[int, int]) -> Tensor:
        """The position table for a (gh, gw) grid: (1, gh * gw, 384), cached per grid when no gradient flows."""
        pos = self.pos_embed
        if tuple(grid) == (POS_GRID, POS_GRID) or (torch.is_grad_enabled() and pos.requires_grad):
            return resample_pos_embed(pos, grid)
        stamp = (id(pos), pos.data_ptr(), pos._version, pos.dtype, pos.device)
        hit = self._pos_cache.get(grid)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        with torch.no_grad():
            table = resample_pos_embed(pos.detach(), grid).contiguous()
        self._pos_cache[grid] = (stamp, table)
        return table

    def _check_input(self, x: Tensor) -> tuple[int, int]:
        if x.ndim != 4 or x.shape[1] != 3:
            raise BackboneInputError(f"backbone input must be (B, 3, H, W), got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise BackboneInputError(f"backbone input must be floating point, got {x.dtype}")
        H, W = x.shape[-2:]
        p = self.patch_size
        if H % p or W % p or H == 0 or W == 0:
            raise BackboneInputError(f"backbone input sides must be positive multiples of {p}, got {H} x {W}")
        return H // p, W // p

    def prepare_tokens(self, x: Tensor) -> Tensor:
        """(B, 3, H, W) float32 -> patch tokens plus position table: (B, H/16 * W/16, 384)."""
        grid = self._check_input(x)
        return self.patch_embed(x) + self.pos_embed_for(grid)

    def tokens(self, x: Tensor) -> Tensor:
        """Block 12's output: (B, 3, H, W) float32, H and W multiples of 16 -> (B, H/16 * W/16, 384) float32."""
        z = self.prepare_tokens(x)
        for block in self.blocks:
            z = block(z)
        return z

    def forward(self, x: Tensor) -> Tensor:
        """Same as `tokens`."""
        return self.tokens(x)

    def last_keys(self, x: Tensor) -> Tensor:
        """Block 12's keys W_k LN1(z) + b_k: (B, 3, H, W) float32 -> (B, H/16 * W/16, 384) float32.

        Blocks 1..11 run in full; of block 12 only LN1 and the key third of `qkv` run.
        """
        z = self.prepare_tokens(x)
        for block in self.blocks[:-1]:
            z = block(z)
        return self.blocks[-1].keys(z)


def vit_small() -> VisionTransformer:
    """ViT-S/16 in SelfPatch form: 384 wide, 12 blocks, 6 heads, MLP 1536; DINO's random initialisation."""
    return VisionTransformer(patch_size=PATCH, embed_dim=EMBED_DIM, depth=DEPTH, num_heads=HEADS, mlp_hidden=MLP_HIDDEN)
