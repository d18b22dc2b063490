"""DINOv3's ViTs (docs/design.md §14, DESIGN 14): patch 16, rotary positions (RoPE) instead of a position table, 4
storage tokens (DINOv3's name for registers), LayerScale, an MLP or a SwiGLU feed-forward, LayerNorm eps 1e-5; as
facebookresearch/dinov3's `DinoVisionTransformer` runs them in eval mode, in either form.

Read it top to bottom like their `vision_transformer.py` and `layers/`:

    PatchEmbed        Conv2d(3, D, 16, stride 16): (B, 3, H, W) -> (B, H/16 * W/16, D), row by row; nothing added
    RotaryPositions   periods p_k (16,) float32: the file's `rope_embed.periods`, else 100^(k / 16); per patch
                      (i, j) of a (gh, gw) grid, y_i = 2 (i + 0.5) / gh - 1, x_j = 2 (j + 0.5) / gw - 1 and
                      theta = [2 pi y / p_0..15, 2 pi x / p_0..15] twice (64), in float32
    rotate            R(v) = v cos theta + [-v_32..63, v_0..31] sin theta (halves), on the patch rows of q and k
    RopeAttention     qkv D -> 3 D ([q | k | v], D / 64 heads of 64; the key bias is the file's masked one, zero),
                      RoPE on q and k, softmax(R(q) . R(k) / 8) v, proj D -> D
    SwiGLU            w3(silu(w1 h) * w2 h), hidden int(int(6 D) * 2 / 3) rounded up to 8 (S+: 1536, H+: 5120)
    RopeBlock         x += g1 * attn(LN1 x);  x += g2 * ffn(LN2 x)  (`ls1.gamma`, `ls2.gamma`)
    DinoV3ViT         patch embedding [+ class token, storage tokens in front] + blocks [+ final norm]

State-dict names are the hub release's (`cls_token`, `storage_tokens`, `patch_embed.proj.*`, `rope_embed.periods`,
`blocks.{i}.{norm1, attn.qkv, attn.proj, ls1.gamma, norm2, mlp.{fc1, fc2 | w1, w2, w3}, ls2.gamma}`, `norm.*`); the
converters (`evaluate.networks.dinov3_forms`) bring every other spelling to them. `rope_embed.periods` is in the
state dict when the file had it; otherwise it is derived from the formula (`periods_source` says which).

The readings, as for the family (`evaluate.networks.vit`):

- `model.tokens(x)` (also `model(x)`): the last block's output (final norm in the released form), patch rows only,
  (B, N, D) float32;
- `model.last_keys(x)`: the last block's keys W_k LN1(z) + b_k, BEFORE the rotation (what a forward hook on
  `attn.qkv` gives), patch rows only, (B, N, D) float32; of the last block only LN1 and the key third of `qkv` run;
- `model.tokens_tapped(x, tap)`: `tokens(x)` bit for bit while `tap(i, q, k)` sees each block's ROTATED queries and
  keys, as the attention used them (the attention-spread reading).

Precision: the rotation runs in float32 whatever the precision (their `pos_embed_rope_dtype` fp32: q and k are cast
to float32, rotated and cast back), the residual stream stays float32 under autocast (the patch embedding's output
is cast up), and the keys' last projection is a float32 island (`vit.key_projection`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from evaluate.networks.vit import (Attention, Mlp, PatchEmbed, TokenReadings, attention, float32_island,
                                   init_linears_and_norms, patch_grid)
from evaluate.pixels.geometry import HEAD_DIM, Geometry

PATCH = 16
LN_EPS = 1e-5  # their `layernormbf16`; DINOv2's and DINO's are 1e-6
STORAGE_TOKENS = 4
ROPE_BASE = 100.0
FFNS = ("mlp", "swiglu")
SWIGLU_RATIO = 6  # the SwiGLU members' ffn_ratio: hidden before the 2/3 rule is int(6 D)
SWIGLU_ALIGN = 8
LAYERSCALE_INIT = 1e-5  # their `layerscale_init` for a freshly built network (seeded demo networks only)


def ffn_hidden(width: int, ffn: str) -> int:
    """The feed-forward's hidden width: MLP 4 D; SwiGLU int(int(6 D) * 2 / 3) rounded up to a multiple of 8."""
    if ffn == "mlp":
        return 4 * width
    d = int(int(SWIGLU_RATIO * width) * 2 / 3)
    return d + (-d % SWIGLU_ALIGN)


def formula_periods(head_dim: int = HEAD_DIM, device: torch.device | str | None = None) -> Tensor:
    """(head_dim / 4,) float32: 100^(2 k / (d / 2)), k = 0 .. d/4 - 1, computed as their `_init_weights` does."""
    k = torch.arange(head_dim // 4, dtype=torch.float32, device=device)
    return ROPE_BASE ** (2 * k / (head_dim // 2))


def rotary_angles(grid: tuple[int, int], periods: Tensor) -> Tensor:
    """theta per patch of a (gh, gw) grid, row by row: (gh * gw, 4 * len(periods)) float32.

    y_i = 2 (i + 0.5) / gh - 1, x_j = 2 (j + 0.5) / gw - 1 (each axis by its own size), numerators 2 pi y and 2 pi x in
    float32, divided by the periods: [2 pi y / p_0.., 2 pi x / p_0..], twice. No shift, jitter or rescale (their
    module applies those only in training). At 30 x 30, y_0 = -0.966667 and theta_0 = -6.07375.
    """
    gh, gw = int(grid[0]), int(grid[1])
    dd = {"device": periods.device, "dtype": torch.float32}
    coords_h = torch.arange(0.5, gh, **dd) / gh
    coords_w = torch.arange(0.5, gw, **dd) / gw
    coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing="ij"), dim=-1).flatten(0, 1)  # (N, 2)
    coords = 2.0 * coords - 1.0
    angles = 2 * math.pi * coords[:, :, None] / periods.float()[None, None, :]  # (N, 2, d / 4)
    return angles.flatten(1, 2).tile(2)


def rotate(x: Tensor, sin: Tensor, cos: Tensor, prefix: int) -> Tensor:
    """x (..., rows, d) with the patch rows from `prefix` on rotated: R(v) = v cos + [-v_(d/2..), v_(..d/2)] sin.

    sin, cos: (rows - prefix, d) float32. The arithmetic is float32 whatever x's dtype; the result has x's dtype.
    Prefix rows (class token, storage tokens) are returned untouched.
    """
    dtype = x.dtype
    patches = x[..., prefix:, :].float()
    half = patches.shape[-1] // 2
    rotated = patches * cos + torch.cat([-patches[..., half:], patches[..., :half]], dim=-1) * sin
    rotated = rotated.to(dtype)
    return torch.cat([x[..., :prefix, :], rotated], dim=-2) if prefix else rotated


class RotaryPositions(nn.Module):
    """The rotation's periods and, per grid, its (sin, cos) tables (cached; float32).

    from_file: the periods are a persistent buffer loaded from the checkpoint (`rope_embed.periods`); otherwise they
    are derived from the formula (`formula_periods`) and not part of the state dict.
    """

    def __init__(self, head_dim: int = HEAD_DIM, from_file: bool = True):
        super().__init__()
        self.head_dim = head_dim
        self.from_file = from_file
        self.register_buffer("periods", formula_periods(head_dim), persistent=from_file)
        self._cache: dict[tuple[int, int], tuple[tuple, tuple[Tensor, Tensor]]] = {}

    @property
    def periods_source(self) -> str:
        """"file" or "formula": where the periods came from (meta.json)."""
        return "file" if self.from_file else "formula"

    def derive(self) -> None:
        """Recompute derived periods (after a build on the meta device, where they are empty)."""
        if not self.from_file:
            self.periods = formula_periods(self.head_dim, device=self.periods.device if not self.periods.is_meta
                                           else None)

    def sin_cos(self, grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """(sin theta, cos theta), each (gh * gw, head_dim) float32, for a (gh, gw) grid; cached per grid for the very
        periods tensor, storage and version they came from."""
        periods = self.periods
        stamp = (id(periods), periods.data_ptr(), periods._version, periods.device)
        hit = self._cache.get(tuple(grid))
        # tables made under inference mode cannot be saved for a backward pass made outside it
        if hit is not None and hit[0] == stamp and (torch.is_inference_mode_enabled() or not hit[1][0].is_inference()):
            return hit[1]
        with torch.no_grad(), float32_island(periods):
            angles = rotary_angles(grid, periods)
            tables = (torch.sin(angles), torch.cos(angles))
        self._cache[tuple(grid)] = (stamp, tables)
        return tables


class RopeAttention(Attention):
    """`vit.Attention` with rotary positions: qkv D -> 3 D ([q | k | v], heads of 64), RoPE on q and k, proj D -> D;
    its `keys` are `vit.Attention`'s (the key third of `qkv`, unrotated)."""

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], prefix: int) -> Tensor:
        """x (B, N, C), rope (sin, cos) of the N - prefix patch rows -> (B, N, C)."""
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rotate(qkv[:2], *rope, prefix).unbind(0)  # q and k rotated together: (B, heads, N, d) each
        out = attention(q, k, qkv[2])
        if self.tap is not None:
            self.tap(q, k)
        return self.proj(out.transpose(1, 2).reshape(B, N, C))


class LayerScale(nn.Module):
    """x * gamma, gamma (D,) (`ls1.gamma`, `ls2.gamma`)."""

    def __init__(self, dim: int, init: float = LAYERSCALE_INIT):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), init))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.gamma


class SwiGLU(nn.Module):
    """w3(silu(w1 h) * w2 h): `w1`, `w2` D -> hidden, `w3` hidden -> D, all with bias."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(dim, hidden)
        self.w3 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.w3(F.silu(self.w1(x)) * self.w2(x))


class RopeBlock(nn.Module):
    """x += g1 * attn(LN1 x); x += g2 * ffn(LN2 x); LayerNorm eps 1e-5; ffn "mlp" (fc1, exact GELU, fc2) or
    "swiglu"."""

    def __init__(self, dim: int, num_heads: int, ffn: str, hidden: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        self.attn = RopeAttention(dim, num_heads)
        self.ls1 = LayerScale(dim)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, hidden) if ffn == "mlp" else SwiGLU(dim, hidden)
        self.ls2 = LayerScale(dim)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], prefix: int) -> Tensor:
        x = x + self.ls1(self.attn(self.norm1(x), rope, prefix))
        return x + self.ls2(self.mlp(self.norm2(x)))

    def keys(self, x: Tensor) -> Tensor:
        """This block's keys W_k LN1(x) + b_k, before the rotation: (B, N, C) -> (B, N, C); nothing else runs."""
        return self.attn.keys(self.norm1(x))


class DinoV3ViT(TokenReadings, nn.Module):
    """A DINOv3 ViT of patch 16 in either form (docs/design.md §14).

    Backbone form: patch embedding, rotary positions, blocks: the forward sees the patches alone. Released form:
    `cls_token` (1, 1, D) and `storage_tokens` (1, R, D) in front of the patches, in that order, nothing added to
    them, and `norm` after the last block. Prefix rows are never rotated. `geometry` holds the checkpoint's storage
    tokens as registers (whichever form runs); `form` is set by the loader; `ffn` is "mlp" or "swiglu". `forward` and
    `tokens_tapped` are the family's (`vit.TokenReadings`).
    """

    patch_attention = True  # its attention rows weigh patches: the attention-spread reading exists (§13)

    def __init__(self, width: int, depth: int, ffn: str = "mlp", hidden: int | None = None, *,
                 class_token: bool = False, storage_tokens: int = 0, final_norm: bool = False,
                 periods_from_file: bool = True, registers: int | None = None):
        """width D (heads D / 64), depth, ffn ("mlp", "swiglu") and its hidden width (default `ffn_hidden`);
        class_token, storage_tokens, final_norm: the released form's parts; periods_from_file: the periods are a
        loaded buffer (else derived); registers: the checkpoint's storage tokens for `geometry` (default
        `storage_tokens`)."""
        super().__init__()
        if ffn not in FFNS:
            raise ValueError(f"ffn must be one of {', '.join(FFNS)}, got {ffn!r}")
        heads = width // HEAD_DIM
        self.patch_size = PATCH
        self.embed_dim = width
        self.ffn = ffn
        self.extra_tokens = int(class_token) + storage_tokens  # the rows before the patches
        self.geometry = Geometry(PATCH, width, depth, storage_tokens if registers is None else registers)
        self.form = "released" if self.extra_tokens or final_norm else "backbone"
        self.patch_embed = PatchEmbed(PATCH, 3, width)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width)) if class_token else None
        self.storage_tokens = nn.Parameter(torch.zeros(1, storage_tokens, width)) if storage_tokens else None
        self.rope_embed = RotaryPositions(HEAD_DIM, from_file=periods_from_file)
        hidden = ffn_hidden(width, ffn) if hidden is None else hidden
        self.blocks = nn.ModuleList([RopeBlock(width, heads, ffn, hidden) for _ in range(depth)])
        self.norm = nn.LayerNorm(width, eps=LN_EPS) if final_norm else None
        self._init_weights()

    def _init_weights(self) -> None:
        """Their initialisation: class and storage tokens normal (std 0.02); the patch convolution uniform in
        +-1 / sqrt(3 * 16 * 16); in the blocks linears truncated normal (std 0.02) with zero bias and LayerNorms 1
        and 0 (`vit.init_linears_and_norms`); LayerScale 1e-5."""
        for token in (self.cls_token, self.storage_tokens):
            if token is not None:
                nn.init.normal_(token, std=0.02)
        bound = 1 / math.sqrt(3 * PATCH * PATCH)
        nn.init.uniform_(self.patch_embed.proj.weight, -bound, bound)
        nn.init.uniform_(self.patch_embed.proj.bias, -bound, bound)
        init_linears_and_norms(self.blocks)

    @property
    def periods_source(self) -> str:
        return self.rope_embed.periods_source

    def prepare_tokens(self, x: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """(B, 3, H, W) float32 -> (the block input (B, prefix + H/16 * W/16, D) float32, the grid's (sin, cos))."""
        grid = patch_grid(x, self.patch_size)
        z = self.patch_embed(x).float()  # float32 residual stream under autocast too
        front = [token.expand(x.shape[0], -1, -1) for token in (self.cls_token, self.storage_tokens)
                 if token is not None]
        if front:
            z = torch.cat([*(t.to(z.dtype) for t in front), z], dim=1)
        return z, self.rope_embed.sin_cos(grid)

    def tokens(self, x: Tensor) -> Tensor:
        """The last block's output, final norm applied in the released form, patch rows only:
        (B, 3, H, W) float32, H and W multiples of 16 -> (B, H/16 * W/16, D) float32."""
        z, rope = self.prepare_tokens(x)
        for block in self.blocks:
            z = block(z, rope, self.extra_tokens)
        if self.norm is not None:
            z = self.norm(z)
        return z[:, self.extra_tokens:] if self.extra_tokens else z

    def last_keys(self, x: Tensor) -> Tensor:
        """The last block's keys W_k LN1(z) + b_k before the rotation, patch rows only: (B, 3, H, W) float32 ->
        (B, H/16 * W/16, D) float32. Every block but the last runs in full; of the last only LN1 and the key third
        of `qkv`."""
        z, rope = self.prepare_tokens(x)
        for block in self.blocks[:-1]:
            z = block(z, rope, self.extra_tokens)
        keys = self.blocks[-1].keys(z)
        return keys[:, self.extra_tokens:] if self.extra_tokens else keys
