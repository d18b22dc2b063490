"""The ViT family (docs/design.md §1, §9.1, §9.3, §14): DINO's vision transformer at any patch, width and depth, in
the seed's backbone form (no class token, no registers, no final norm) or as released (class token, DINOv2's
registers, final norm), with its block variants LayerScale (CaiT, DeiT III, DINOv2) and augmented shortcuts
(Aug-ViT-S). Sizes below are the seed's ViT-S/16; `vision_transformer(geometry, ...)` builds any other.

Read it top to bottom like DINO's `vision_transformer.py`:

    PatchEmbed   Conv2d(3, 384, 16, stride 16): (B, 3, H, W) -> (B, H/16 * W/16, 384), row by row
    Attention    qkv 384 -> 1152 ordered [q | k | v], 6 heads x 64, softmax(q.k / 8) v, proj 384 -> 384
    Mlp          384 -> 1536, exact (erf) GELU, 1536 -> 384
    Block        U = Z + MSA(LN1(Z));  Z' = U + MLP(LN2(U));  LayerNorm eps 1e-6
    LayerScaleBlock     U = Z + g1 * MSA(LN1(Z));  Z' = U + g2 * MLP(LN2(U));  g1, g2 (384,) per block
    CirculantLinear     384 -> 384 whose weight is 4 x 4 circulant blocks of 96 x 96: weight_list[index_matrix]
    AugBlock            U = s (Z + MSA(u) + sum_t act(A_t u)), u = LN1(Z);  Z' = s (U + MLP(w) + sum_t act(M_t w)),
                        w = LN2(U); mode linear / circulant (T = 1, no act, s = 1) or linear2 / circulant2 (T = 2,
                        GELU, s = 3/4), after the authors' `augvit_small_*`
    VisionTransformer   patch embedding + position table (resampled to the grid by the family's rule) [+ class
                        token, registers] + blocks [+ final norm]

Two readings leave the network (docs/design.md §3):

- `model.tokens(x)` (also `model(x)`): the last block's output (final norm applied in the released form), patch
  rows only, (B, N, D) float32;
- `model.last_keys(x)`: the last block's keys `k = W_k LN1(z) + b_k`, patch rows only, (B, N, D) float32, heads
  concatenated in head order. Only LN1 and the key third of the last block's `qkv` run; its attention and MLP are
  skipped, since nothing of them reaches the keys.

`model.tokens_tapped(x, tap)` is `tokens(x)`, bit for bit, while `tap(block, q, k)` sees the queries and keys every
block's attention used: what the attention-spread reading (`evaluate.attention`, docs/design.md §13) is computed from,
in the same pass. `patch_attention = True` says the family's attention weighs patches against patches.

Attention goes through `attention` below, which calls `torch.nn.functional.scaled_dot_product_attention`
(numerically plain softmax attention, without materialising the N x N weights on the fused CPU kernels).

Under `torch.autocast` (`features.precision` bfloat16 or float16, docs/design.md §3) the linear layers and the
attention run in the lower precision. Two float32 islands (`float32_island`): the position table is resampled in
float32, so the residual stream stays float32 and every LayerNorm reads float32; and the keys' last projection
(`key_projection`).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from evaluate import EvaluationError
from evaluate.networks import AUG_MODES
from evaluate.pixels.geometry import PATCH, TOKENS224_GRID, WIDTH, Geometry

# Sees one block's attention queries and keys: tap(block index 0.., q, k), q and k (B, heads, N, d) as the attention
# used them; it must not change them (`VisionTransformer.tokens_tapped`).
AttentionTap = Callable[[int, Tensor, Tensor], None]

EMBED_DIM = WIDTH
DEPTH = 12
HEADS = 6
MLP_HIDDEN = 1536
LN_EPS = 1e-6
POS_GRID = TOKENS224_GRID  # the seed's position table is trained for 224 x 224 inputs: a 14 x 14 grid of patches
# How a position table is resampled to another grid (`resample_pos_embed`; docs/design.md §11)
POSITION_RULES = ("dino", "antialias")
# LayerScale's initial gamma for a freshly built (random) network: CaiT's rule for depth <= 18. Trained checkpoints
# bring their own gammas; this only matters for seeded demo networks.
LAYERSCALE_INIT = 0.1
AUG_BLOCKS = 4  # a circulant projection is AUG_BLOCKS x AUG_BLOCKS circulant blocks of (384 / AUG_BLOCKS)^2
AUG_T2_SCALE = 0.75  # the T = 2 modes multiply each residual sum, identity included, by 3/4


def float32_island(x: Tensor) -> torch.autocast:
    """Autocast off on `x`'s device: what runs inside computes in its inputs' dtype (float32 here) whatever precision
    the caller runs the network in (docs/design.md §3)."""
    return torch.autocast(x.device.type, enabled=False)


class BackboneInputError(EvaluationError, ValueError):
    """An input the backbone cannot take (wrong rank, channels, dtype, or a side that is not a multiple of 16)."""


def init_linears_and_norms(network: nn.Module) -> None:
    """DINO's and XCiT's shared initialisation, module by module in `network.modules()` order: linears truncated
    normal (std 0.02) with zero bias, LayerNorms 1 and 0; everything else keeps PyTorch's defaults."""
    for module in network.modules():
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)


def patch_grid(x: Tensor, patch: int) -> tuple[int, int]:
    """The (H / patch, W / patch) grid of a backbone input (B, 3, H, W) float; BackboneInputError otherwise."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise BackboneInputError(f"backbone input must be (B, 3, H, W), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise BackboneInputError(f"backbone input must be floating point, got {x.dtype}")
    H, W = x.shape[-2:]
    if H % patch or W % patch or H == 0 or W == 0:
        raise BackboneInputError(f"backbone input sides must be positive multiples of {patch}, got {H} x {W}")
    return H // patch, W // patch


def resample_pos_embed(pos_embed: Tensor, grid: tuple[int, int], rule: str = "dino") -> Tensor:
    """The position table for a (gh, gw) grid of patches, by the network's rule (docs/design.md §1, §11).

    pos_embed: (1, g0 * g0, C) float, the patch rows of the table trained for a g0 x g0 grid, row by row (g0 is
    read from the rows: 14 for DINO's 224-px tables at patch 16, 28 at patch 8, 37 in DINOv2's hub files).
    grid: (gh, gw) patches down and across. rule: `POSITION_RULES`.
    Returns (1, gh * gw, C), row by row. At g0 x g0 the table is returned unchanged (the same tensor).

    The table is viewed as (1, g0, g0, C) and permuted to (1, C, g0, g0) (a bare reshape would scramble it), resampled
    bicubically with `align_corners=False`, checked to be (gh, gw), permuted back and flattened:
    "dino": `scale_factor=((gh + 0.1) / g0, (gw + 0.1) / g0)`, no antialiasing (DINO's, and DINOv2's training code's
    default; the +0.1 guards against rounding the output size down);
    "antialias": `size=(gh, gw)`, `antialias=True` (the DINOv2 hub's register models).
    """
    gh, gw = int(grid[0]), int(grid[1])
    rows = pos_embed.shape[1] if pos_embed.ndim == 3 else 0
    g0 = math.isqrt(rows)
    if pos_embed.ndim != 3 or pos_embed.shape[0] != 1 or g0 * g0 != rows or rows == 0:
        raise BackboneInputError(f"position table must be (1, g0 * g0, C), got {tuple(pos_embed.shape)}")
    if rule not in POSITION_RULES:
        raise BackboneInputError(f"unknown position rule {rule!r}; known: {', '.join(POSITION_RULES)}")
    if gh < 1 or gw < 1:
        raise BackboneInputError(f"grid must be at least 1 x 1 patches, got {gh} x {gw}")
    if (gh, gw) == (g0, g0):
        return pos_embed
    dim = pos_embed.shape[-1]
    table = pos_embed.reshape(1, g0, g0, dim).permute(0, 3, 1, 2)
    if rule == "dino":
        table = F.interpolate(table, scale_factor=((gh + 0.1) / g0, (gw + 0.1) / g0), mode="bicubic",
                              align_corners=False)
    else:
        table = F.interpolate(table, size=(gh, gw), mode="bicubic", align_corners=False, antialias=True)
    if tuple(table.shape[-2:]) != (gh, gw):
        raise BackboneInputError(f"resampled position table is {tuple(table.shape[-2:])}, expected {(gh, gw)}")
    return table.permute(0, 2, 3, 1).reshape(1, gh * gw, dim)


def attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """softmax(q k^T / sqrt(d)) v for each head.

    q, k, v: (B, heads, N, d) float. Returns (B, heads, N, d). The score scale is 1 / sqrt(d), i.e. 1/8 for d = 64.
    """
    return F.scaled_dot_product_attention(q, k, v)


def key_projection(qkv: nn.Linear, x: Tensor) -> Tensor:
    """The key third of a [q | k | v] projection, W_k x + b_k: x (B, N, C) -> (B, N, C) float32.

    A float32 island (`float32_island`): the keys480 reading leaves the network without a lower precision's
    rounding of its last product (bfloat16 keeps 8 bits; the stored float16 11).
    """
    dim = x.shape[-1]
    with float32_island(x):
        return F.linear(x.float(), qkv.weight[dim : 2 * dim], qkv.bias[dim : 2 * dim])


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
        self.tap: Callable[[Tensor, Tensor], None] | None = None  # tap(q, k), set for one pass by `tokens_tapped`

    def forward(self, x: Tensor) -> Tensor:
        """x: (B, N, C) -> (B, N, C)."""
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        out = attention(q, k, v)  # (B, heads, N, d)
        if self.tap is not None:
            self.tap(q, k)
        return self.proj(out.transpose(1, 2).reshape(B, N, C))

    def keys(self, x: Tensor) -> Tensor:
        """The key third of `qkv` only: x (B, N, C), already normalised by LN1 -> (B, N, C), heads in order."""
        return key_projection(self.qkv, x)


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


class LayerScaleBlock(Block):
    """Block with LayerScale (CaiT, DeiT III; docs/design.md §9.1): U = Z + g1 * MSA(LN1(Z)); Z' = U + g2 * MLP(LN2(U)).

    `gamma_1`, `gamma_2`: (384,) float, multiplying the branch outputs channel by channel after `attn.proj` and
    `mlp.fc2`. 1,775,232 parameters. The keys (`keys`) are those of the plain block: g never reaches them.
    """

    def __init__(self, dim: int = EMBED_DIM, num_heads: int = HEADS, mlp_hidden: int = MLP_HIDDEN):
        super().__init__(dim, num_heads, mlp_hidden)
        self.gamma_1 = nn.Parameter(torch.full((dim,), LAYERSCALE_INIT))
        self.gamma_2 = nn.Parameter(torch.full((dim,), LAYERSCALE_INIT))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.gamma_1 * self.attn(self.norm1(x))
        return x + self.gamma_2 * self.mlp(self.norm2(x))


def circulant_index_matrix(dim: int = EMBED_DIM, blocks: int = AUG_BLOCKS) -> Tensor:
    """(dim, dim) int64: where each entry of a block-circulant weight comes from in its `weight_list`.

    With b = dim / blocks: entry [b I + r, b J + c] = (blocks I + J) b + ((r - c) mod b), i.e. output block I and
    input block J read their own b values, and within the block entry (r, c) depends on (r - c) mod b only (the
    authors' `scipy.linalg.circulant(range(b))` offset per block).
    """
    if dim % blocks:
        raise ValueError(f"{dim} channels do not split into {blocks} circulant blocks")
    b = dim // blocks
    r = torch.arange(dim)
    within = (r[:, None] % b - r[None, :] % b) % b
    block = (r[:, None] // b) * blocks + r[None, :] // b
    return block * b + within


class CirculantLinear(nn.Module):
    """x W^T + bias with W (dim, dim) made of blocks x blocks circulant blocks: W = weight_list[index_matrix].

    weight_list: (blocks^2 * dim / blocks,) = (1536,) float; bias (dim,). The index matrix is derived
    (`circulant_index_matrix`), not a parameter and not in the state dict. 1,920 parameters at dim 384.
    """

    def __init__(self, dim: int = EMBED_DIM, blocks: int = AUG_BLOCKS):
        super().__init__()
        self.weight_list = nn.Parameter(torch.empty(blocks * dim))
        self.bias = nn.Parameter(torch.empty(dim))
        self.register_buffer("index_matrix", circulant_index_matrix(dim, blocks), persistent=False)
        bound = dim**-0.5  # the authors' kaiming-uniform (a = sqrt 5) bound for fan-in dim, and their bias bound
        nn.init.uniform_(self.weight_list, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def weight(self) -> Tensor:
        """The materialised (dim, dim) weight."""
        return self.weight_list[self.index_matrix]

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight(), self.bias)


class AugBlock(Block):
    """Block with augmented shortcuts (Aug-ViT-S, docs/design.md §9.3), after the authors' `Block(mode=...)`.

    u = LN1(Z); U = s (Z + MSA(u) + sum_t act(A_t u)); w = LN2(U); Z' = s (U + MLP(w) + sum_t act(M_t w)).
    mode "linear" / "circulant": T = 1 (`augs_attn`, `augs`: a Linear or a CirculantLinear), no activation, s = 1;
    "linear2" / "circulant2": T = 2 (`augs_attn.0`, `augs_attn2.0`, `augs.0`, `augs2.0`, each followed by GELU),
    s = 3/4. The shortcuts never touch q, k, v: `keys` is the plain block's. Each half-step reads its normalised
    tokens in one product, the input projection and the shortcuts stacked (`_fused`): [qkv | A_1 | A_2] and
    [fc1 | M_1 | M_2], the circulant weights materialised once and cached.
    """

    def __init__(self, mode: str, dim: int = EMBED_DIM, num_heads: int = HEADS, mlp_hidden: int = MLP_HIDDEN):
        super().__init__(dim, num_heads, mlp_hidden)
        if mode not in AUG_MODES:
            raise ValueError(f"Aug-ViT mode must be one of {', '.join(AUG_MODES)}, got {mode!r}")
        self.mode = mode

        def projection() -> nn.Module:
            return nn.Linear(dim, dim) if mode.startswith("linear") else CirculantLinear(dim, AUG_BLOCKS)

        if mode.endswith("2"):
            self.augs_attn = nn.Sequential(projection(), nn.GELU())
            self.augs_attn2 = nn.Sequential(projection(), nn.GELU())
            self.augs = nn.Sequential(projection(), nn.GELU())
            self.augs2 = nn.Sequential(projection(), nn.GELU())
            self.scale = AUG_T2_SCALE
        else:
            self.augs_attn = projection()
            self.augs = projection()
            self.scale = 1.0
        self._fused_cache: dict[str, tuple[tuple, tuple[Tensor, Tensor]]] = {}

    def _shortcuts(self, half: str) -> list[nn.Module]:
        """The projections beside MSA ("attn") or the MLP ("mlp"), in order."""
        names = ("augs_attn", "augs_attn2") if half == "attn" else ("augs", "augs2")
        layers = [getattr(self, name) for name in names if hasattr(self, name)]
        return [layer[0] if isinstance(layer, nn.Sequential) else layer for layer in layers]

    def _fused(self, half: str) -> tuple[Tensor, Tensor]:
        """(weight, bias) of the half-step's input projection and its shortcuts stacked: [qkv | A_1 | A_2] (attn) or
        [fc1 | M_1 | M_2] (mlp), so that one product reads the normalised tokens once. Cached while no gradient
        flows; a cached pair is valid only for the very parameters, storage and versions it came from."""
        first = self.attn.qkv if half == "attn" else self.mlp.fc1
        shortcuts = self._shortcuts(half)
        params = [first.weight, first.bias] + [p for layer in shortcuts for p in layer.parameters()]
        cacheable = not (torch.is_grad_enabled() and any(p.requires_grad for p in params))
        stamp = tuple((id(p), p.data_ptr(), p._version) for p in params) if cacheable else None
        hit = self._fused_cache.get(half) if cacheable else None
        if hit is not None and hit[0] == stamp:
            return hit[1]
        weights = [first.weight] + [l.weight() if isinstance(l, CirculantLinear) else l.weight for l in shortcuts]
        fused = (torch.cat(weights), torch.cat([first.bias] + [layer.bias for layer in shortcuts]))
        if cacheable:
            self._fused_cache[half] = (stamp, tuple(t.detach() for t in fused))
        return fused

    def _shortcut_sum(self, s: Tensor) -> Tensor:
        """The shortcut outputs (B, N, T * C) summed over t, after GELU in the T = 2 modes."""
        dim = self.norm1.normalized_shape[0]
        if self.mode.endswith("2"):
            s = F.gelu(s)
            return s[..., :dim] + s[..., dim:]
        return s

    def forward(self, x: Tensor) -> Tensor:
        B, N, C = x.shape
        # MSA half-step: one product gives q, k, v and the shortcuts' pre-activations
        out = F.linear(self.norm1(x), *self._fused("attn"))
        qkv = out[..., : 3 * C].reshape(B, N, 3, self.attn.num_heads, self.attn.head_dim).permute(2, 0, 3, 1, 4)
        heads = attention(qkv[0], qkv[1], qkv[2]).transpose(1, 2).reshape(B, N, C)
        if self.attn.tap is not None:
            self.attn.tap(qkv[0], qkv[1])
        x = x + self.attn.proj(heads) + self._shortcut_sum(out[..., 3 * C :])
        if self.scale != 1.0:
            x = x * self.scale
        # MLP half-step: one product gives fc1's and the shortcuts' pre-activations
        out = F.linear(self.norm2(x), *self._fused("mlp"))
        hidden = self.mlp.fc1.out_features
        if self.mode.endswith("2"):  # every part goes through GELU: fc1's hidden layer and both shortcuts
            out = F.gelu(out)
            shortcut = out[..., hidden : hidden + C] + out[..., hidden + C :]
        else:
            shortcut = out[..., hidden:]
            out = F.gelu(out[..., :hidden])
        x = x + self.mlp.fc2(out[..., :hidden]) + shortcut
        if self.scale != 1.0:
            x = x * self.scale
        return x


class TokenReadings:
    """`forward` and `tokens_tapped` of a network whose `tokens(x)` runs `blocks`, each block's `attn` calling its
    `tap(q, k)` when one is set (`VisionTransformer`, `evaluate.networks.dinov3.DinoV3ViT`)."""

    def forward(self, x: Tensor) -> Tensor:
        """Same as `tokens`."""
        return self.tokens(x)

    def tokens_tapped(self, x: Tensor, tap: AttentionTap) -> Tensor:
        """`tokens(x)`, bit for bit, while `tap(i, q, k)` sees block i's (0.., in order) queries and keys, each
        (B, heads, rows, d) as its attention used them (every row: class token and registers too; DINOv3's rotated,
        its prefix rows unrotated), once the attention's output is computed."""
        attentions = [block.attn for block in self.blocks]
        try:
            for i, attn in enumerate(attentions):
                attn.tap = lambda q, k, i=i: tap(i, q, k)
            return self.tokens(x)
        finally:
            for attn in attentions:
                attn.tap = None


class VisionTransformer(TokenReadings, nn.Module):
    """A ViT of the DINO family in either form (docs/design.md §1, §11): patch_embed, pos_embed, blocks, and in the
    `released` form what the authors' network has beside them: class token, registers, final norm.

    Backbone form (the seed's, SelfPatch's): pos_embed (1, g0^2, D), no class token, no registers, no final norm;
    ViT-S/16 has 21,664,128 parameters. Released form: `cls_token` (1, 1, D) and a class row in pos_embed
    (1, 1 + g0^2, D), `register_tokens` (1, R, D) entering after the class token and before the patches (after the
    position table is added: they carry no position), `norm` after the last block. State-dict names are DINO's and
    DINOv2's: `patch_embed.proj.*`, `pos_embed`, `cls_token`, `register_tokens`, `blocks.{i}.*`, `norm.*`.

    The readings leave the patch rows only (rows 1 + R onwards in the released form); `tokens` ends with the final
    norm where the network has one (DINO's `get_intermediate_layers(n=1)`), `last_keys` with the last block's keys.
    `geometry` says the sizes; `form` which form the network was loaded in (set by the loader).
    """

    patch_attention = True  # its attention rows weigh patches: the attention-spread reading exists (§13)

    def __init__(
        self,
        patch_size: int = PATCH,
        embed_dim: int = EMBED_DIM,
        depth: int = DEPTH,
        num_heads: int = HEADS,
        mlp_hidden: int = MLP_HIDDEN,
        block: Callable[[], Block] | None = None,
        *,
        pos_grid: int = POS_GRID,
        class_token: bool = False,
        registers: int = 0,
        final_norm: bool = False,
        position_rule: str = "dino",
    ):
        """block: builds one block (default: the plain `Block(embed_dim, num_heads, mlp_hidden)`); pos_grid: g0, the
        grid the stored position table is for; class_token, registers, final_norm: the released form's parts;
        position_rule: how the table is resampled (`POSITION_RULES`)."""
        super().__init__()
        if position_rule not in POSITION_RULES:
            raise ValueError(f"position rule must be one of {', '.join(POSITION_RULES)}, got {position_rule!r}")
        self.patch_size = patch_size
        self.embed_dim = embed_dim
        self.position_rule = position_rule
        self.extra_tokens = int(class_token) + registers  # the rows before the patches
        self.geometry = Geometry(patch_size, embed_dim, depth, registers)
        self.form = "released" if self.extra_tokens or final_norm else "backbone"
        self.patch_embed = PatchEmbed(patch_size, 3, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if class_token else None
        self.pos_embed = nn.Parameter(torch.zeros(1, int(class_token) + pos_grid * pos_grid, embed_dim))
        self.register_tokens = nn.Parameter(torch.zeros(1, registers, embed_dim)) if registers else None
        if block is None:
            block = lambda: Block(embed_dim, num_heads, mlp_hidden)  # noqa: E731
        self.blocks = nn.ModuleList([block() for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=LN_EPS) if final_norm else None
        # Resampled position tables per grid. A cached table is valid only for the very tensor, storage and version
        # it came from, so loading a state dict (an in-place copy bumps the version) or swapping the parameter
        # invalidates it.
        self._pos_cache: dict[tuple[int, int], tuple[tuple, Tensor]] = {}
        self._init_weights()

    def _init_weights(self) -> None:
        """DINO's initialisation: truncated normal (std 0.02) for the table and the class token, registers normal
        (std 1e-6, DINOv2's), then `init_linears_and_norms`."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        if self.cls_token is not None:
            nn.init.trunc_normal_(self.cls_token, std=0.02)
        if self.register_tokens is not None:
            nn.init.normal_(self.register_tokens, std=1e-6)
        init_linears_and_norms(self)

    def _patch_table(self) -> Tensor:
        """The position table's patch rows (1, g0^2, D): without the class row of the released form."""
        return self.pos_embed[:, 1:] if self.cls_token is not None else self.pos_embed

    def pos_embed_for(self, grid: tuple[int, int]) -> Tensor:
        """The patch rows' position table for a (gh, gw) grid: (1, gh * gw, D), resampled in float32 by the network's
        rule, cached per grid when no gradient flows."""
        pos = self.pos_embed
        if torch.is_grad_enabled() and pos.requires_grad:
            with float32_island(pos):
                return resample_pos_embed(self._patch_table(), grid, self.position_rule)
        stamp = (id(pos), pos.data_ptr(), pos._version, pos.dtype, pos.device)
        hit = self._pos_cache.get(tuple(grid))
        if hit is not None and hit[0] == stamp:
            return hit[1]
        with torch.no_grad(), float32_island(pos):
            table = resample_pos_embed(self._patch_table().detach(), grid, self.position_rule).contiguous()
        self._pos_cache[tuple(grid)] = (stamp, table)
        return table

    def _check_input(self, x: Tensor) -> tuple[int, int]:
        return patch_grid(x, self.patch_size)

    def prepare_tokens(self, x: Tensor) -> Tensor:
        """(B, 3, H, W) float32 -> the block input (B, 1 + R + H/p * W/p, D) in the released form (class token plus
        its position row, registers, patches plus the table), (B, H/p * W/p, D) in the backbone form."""
        grid = self._check_input(x)
        z = self.patch_embed(x) + self.pos_embed_for(grid)
        if self.cls_token is None:
            extras = []
        else:
            with float32_island(x):
                extras = [(self.cls_token + self.pos_embed[:, :1]).expand(x.shape[0], -1, -1)]
        if self.register_tokens is not None:
            extras.append(self.register_tokens.expand(x.shape[0], -1, -1))
        return torch.cat([*extras, z], dim=1) if extras else z

    def tokens(self, x: Tensor) -> Tensor:
        """The last block's output, final norm applied where the network has one, patch rows only:
        (B, 3, H, W) float32, H and W multiples of p -> (B, H/p * W/p, D) float32."""
        z = self.prepare_tokens(x)
        for block in self.blocks:
            z = block(z)
        if self.norm is not None:
            z = self.norm(z)
        return z[:, self.extra_tokens:] if self.extra_tokens else z

    def last_keys(self, x: Tensor) -> Tensor:
        """The last block's keys W_k LN1(z) + b_k, patch rows only: (B, 3, H, W) float32 -> (B, H/p * W/p, D)
        float32. Every block but the last runs in full; of the last only LN1 and the key third of `qkv` run."""
        z = self.prepare_tokens(x)
        for block in self.blocks[:-1]:
            z = block(z)
        keys = self.blocks[-1].keys(z)
        return keys[:, self.extra_tokens:] if self.extra_tokens else keys


def vision_transformer(geometry: Geometry, block: str = "plain", *, aug_mode: str = "circulant2", pos_grid: int,
                       class_token: bool = False, final_norm: bool = False, registers: int = 0,
                       position_rule: str = "dino") -> VisionTransformer:
    """A ViT of any size of the family: heads of 64, MLP 4 D; block "plain", "layerscale" or "aug" (`aug_mode`);
    `registers` of `geometry` are built only where given (the released form)."""
    dim = geometry.width
    heads, hidden = geometry.heads, 4 * dim
    builders = {
        "plain": lambda: Block(dim, heads, hidden),
        "layerscale": lambda: LayerScaleBlock(dim, heads, hidden),
        "aug": lambda: AugBlock(aug_mode, dim, heads, hidden),
    }
    return VisionTransformer(geometry.patch, dim, geometry.depth, heads, hidden, builders[block], pos_grid=pos_grid,
                             class_token=class_token, registers=registers, final_norm=final_norm,
                             position_rule=position_rule)


def vit_small() -> VisionTransformer:
    """ViT-S/16 in SelfPatch form: 384 wide, 12 blocks, 6 heads, MLP 1536; DINO's random initialisation."""
    return VisionTransformer(patch_size=PATCH, embed_dim=EMBED_DIM, depth=DEPTH, num_heads=HEADS, mlp_hidden=MLP_HIDDEN)


def vit_small_layerscale() -> VisionTransformer:
    """ViT-S/16 with LayerScale (docs/design.md §9.1), SelfPatch form: 21,673,344 parameters; gammas start at 0.1."""
    return VisionTransformer(block=LayerScaleBlock)


def augvit_small(mode: str = "circulant2") -> VisionTransformer:
    """Aug-ViT-S/16 (docs/design.md §9.3), SelfPatch form; mode one of AUG_MODES (circulant2: 21,756,288 parameters)."""
    if mode not in AUG_MODES:
        raise ValueError(f"Aug-ViT mode must be one of {', '.join(AUG_MODES)}, got {mode!r}")
    return VisionTransformer(block=lambda: AugBlock(mode))
