"""XCiT-S12/16 in backbone form (docs/design.md §9.2): cross-covariance attention, as DINO trained and released it,
without class token, class-attention blocks and final norm (none of them reaches block 12).

Read it top to bottom like the authors' `xcit.py`:

    ConvPatchEmbed      four stages Conv2d(3 x 3, stride 2, padding 1, no bias) + BatchNorm2d, 3 -> 48 -> 96 -> 192
                        -> 384, GELU after the first three: (B, 3, H, W) -> (B, H/16 * W/16, 384), row by row
    PositionalEncodingFourier   the grid's Fourier features (64 channels), a 1 x 1 convolution 64 -> 384, added;
                        recomputed for any grid, nothing is interpolated
    XCA                 qkv 384 -> 1152 ([q | k | v], 8 heads x 48); per head q and k L2-normalised over the tokens,
                        channel by channel; A = softmax((q^T k) * temperature) over key channels; out = (A v^T)^T;
                        proj 384 -> 384
    LPI                 tokens as a (384, H, W) map: depthwise 3 x 3 conv -> GELU -> BatchNorm -> depthwise 3 x 3
    XCABlock            x += g1 * XCA(LN1 x);  x += g3 * LPI(LN3 x);  x += g2 * MLP(LN2 x)   (that order)
    XCiT                patch embedding + position encoding + 12 blocks, nothing after

BatchNorm runs with the checkpoint's running statistics: the network is meant to be used in eval mode (`load_backbone`
puts it there). The two readings, as for the ViT family (`evaluate.networks.vit`):

- `model.tokens(x)` (also `model(x)`): block 12's output, (B, N, 384) float32;
- `model.last_keys(x)`: block 12's keys `k = W_k LN1(z) + b_k` per token, with bias, BEFORE XCA's normalisation,
  (B, N, 384) float32, 8 heads of 48 in head order. Only LN1 and the key third of block 12's `qkv` run.

The attention-spread reading (docs/design.md §13) does not exist here: XCA's rows weigh 48 channels against 48
channels, never a patch against the patches, so `patch_attention = False` and the network has no `tokens_tapped`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from evaluate.networks.vit import LN_EPS, Mlp, float32_island, init_linears_and_norms, key_projection, patch_grid
from evaluate.pixels.geometry import PATCH, SEED, WIDTH

EMBED_DIM = WIDTH
DEPTH = 12
HEADS = 8
MLP_HIDDEN = 1536
STEM_WIDTHS = (48, 96, 192, 384)  # ConvPatchEmbed for patch 16: four stride-2 stages
FOURIER_DIM = 32  # Fourier channels per coordinate
FOURIER_TEMPERATURE = 10000.0
FOURIER_EPS = 1e-6
XCA_EPS = 1e-12  # F.normalize's eps in the authors' XCA
ETA = 1.0  # XCiT-S12's initial gammas


def conv3x3_bn(in_chans: int, out_chans: int) -> nn.Sequential:
    """Conv2d(3 x 3, stride 2, padding 1, no bias) then BatchNorm2d: keys `0.weight`, `1.{weight,bias,running_*}`."""
    return nn.Sequential(
        nn.Conv2d(in_chans, out_chans, kernel_size=3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(out_chans),
    )


class ConvPatchEmbed(nn.Module):
    """(B, 3, H, W) -> ((B, H/16 * W/16, 384), (H/16, W/16)): the conv stem, 873,648 parameters.

    `proj` is Sequential(conv-bn, GELU, conv-bn, GELU, conv-bn, GELU, conv-bn): keys `proj.{0,2,4,6}.{0,1}.*`.
    Each stage maps a side s to floor((s - 1) / 2) + 1, so a multiple of 16 comes out divided by 16.
    """

    def __init__(self, embed_dim: int = EMBED_DIM):
        super().__init__()
        widths = (3, *STEM_WIDTHS[:-1], embed_dim)
        layers: list[nn.Module] = []
        for i in range(len(widths) - 1):
            if i:
                layers.append(nn.GELU())
            layers.append(conv3x3_bn(widths[i], widths[i + 1]))
        self.proj = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[int, int]]:
        x = self.proj(x)
        grid = (x.shape[-2], x.shape[-1])
        return x.flatten(2).transpose(1, 2).contiguous(), grid


def fourier_features(grid: tuple[int, int], hidden_dim: int = FOURIER_DIM, temperature: float = FOURIER_TEMPERATURE,
                     device: torch.device | str | None = None) -> Tensor:
    """The (1, 2 * hidden_dim, H, W) float32 Fourier features of an H x W grid (docs/design.md §9.2).

    y_i = (i + 1) / (H + 1e-6) * 2 pi, x_j = (j + 1) / (W + 1e-6) * 2 pi; t_k = temperature^(2 floor(k / 2) /
    hidden_dim); per coordinate c the channels are sin(c / t_0), cos(c / t_1), sin(c / t_2), ... (sin on even k,
    cos on odd k); the y channels first, then the x channels.
    """
    H, W = int(grid[0]), int(grid[1])
    scale = 2 * math.pi
    y = torch.arange(1, H + 1, dtype=torch.float32, device=device) / (H + FOURIER_EPS) * scale
    x = torch.arange(1, W + 1, dtype=torch.float32, device=device) / (W + FOURIER_EPS) * scale
    k = torch.arange(hidden_dim, dtype=torch.float32, device=device)
    dim_t = temperature ** (2 * torch.div(k, 2, rounding_mode="floor") / hidden_dim)

    def channels(c: Tensor) -> Tensor:  # (n,) -> (n, hidden_dim), sin and cos interleaved
        phase = c[:, None] / dim_t
        return torch.stack([phase[:, 0::2].sin(), phase[:, 1::2].cos()], dim=2).flatten(1)

    pos_y = channels(y)[:, None, :].expand(H, W, hidden_dim)
    pos_x = channels(x)[None, :, :].expand(H, W, hidden_dim)
    return torch.cat([pos_y, pos_x], dim=2).permute(2, 0, 1).unsqueeze(0)


class PositionalEncodingFourier(nn.Module):
    """The grid's position encoding: Fourier features (64 channels) through `token_projection`, a 1 x 1 convolution
    64 -> 384 with bias (24,960 parameters). Returns (1, H * W, 384), row by row."""

    def __init__(self, hidden_dim: int = FOURIER_DIM, dim: int = EMBED_DIM, temperature: float = FOURIER_TEMPERATURE):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.temperature = temperature
        self.token_projection = nn.Conv2d(2 * hidden_dim, dim, kernel_size=1)
        # the encoding per grid, valid only for the very projection tensors and versions it came from (as the ViT's
        # resampled position tables)
        self._cache: dict[tuple[int, int], tuple[tuple, Tensor]] = {}

    def _compute(self, grid: tuple[int, int]) -> Tensor:
        """In float32 under any autocast (`float32_island`): the encoding is cached per grid, and it keeps the
        tokens' residual stream float32."""
        weight = self.token_projection.weight
        with float32_island(weight):
            features = fourier_features(grid, self.hidden_dim, self.temperature, device=weight.device)
            return self.token_projection(features).flatten(2).transpose(1, 2)

    def forward(self, grid: tuple[int, int]) -> Tensor:
        params = (self.token_projection.weight, self.token_projection.bias)
        if torch.is_grad_enabled() and any(p.requires_grad for p in params):
            return self._compute(grid)
        stamp = tuple((id(p), p.data_ptr(), p._version, p.dtype, p.device) for p in params)
        hit = self._cache.get(tuple(grid))
        if hit is not None and hit[0] == stamp:
            return hit[1]
        with torch.no_grad():
            table = self._compute(grid).contiguous()
        self._cache[tuple(grid)] = (stamp, table)
        return table


class XCA(nn.Module):
    """Cross-covariance attention: qkv 384 -> 1152 ([q | k | v], 8 heads x 48 in head order), proj 384 -> 384.

    Per head, q and k (N x 48) are L2-normalised over the N tokens, channel by channel; A = softmax over the last
    axis of (q^T k) * temperature (48 x 48; `temperature` (8, 1, 1), no 1 / sqrt(d)); the output is (A v^T)^T.
    """

    def __init__(self, dim: int = EMBED_DIM, num_heads: int = HEADS):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        """x: (B, N, C) -> (B, N, C)."""
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B, heads, N, d)
        q = F.normalize(q, dim=-2, eps=XCA_EPS)  # over the tokens, per channel
        k = F.normalize(k, dim=-2, eps=XCA_EPS)
        attn = (q.transpose(-2, -1) @ k) * self.temperature  # (B, heads, d, d): query channel x key channel
        attn = attn.softmax(dim=-1)
        out = v @ attn.transpose(-2, -1)  # (A v^T)^T: (B, heads, N, d)
        return self.proj(out.transpose(1, 2).reshape(B, N, C))

    def keys(self, x: Tensor) -> Tensor:
        """The key third of `qkv` only, per token, before any normalisation: (B, N, C) -> (B, N, C) float32."""
        return key_projection(self.qkv, x)


class LPI(nn.Module):
    """Local patch interaction: tokens (B, N, C) as a (B, C, H, W) map; depthwise 3 x 3 conv (padding 1, bias) ->
    GELU -> BatchNorm2d -> depthwise 3 x 3 conv; back to (B, N, C). The map is made contiguous NCHW: CPU depthwise
    convolutions on the channels-last view of the tokens ran about 3x slower than on NCHW plus the two copies."""

    def __init__(self, dim: int = EMBED_DIM):
        super().__init__()
        self.conv1 = nn.Conv2d(dim, dim, kernel_size=3, padding=1, groups=dim)
        self.act = nn.GELU()
        self.bn = nn.BatchNorm2d(dim)
        self.conv2 = nn.Conv2d(dim, dim, kernel_size=3, padding=1, groups=dim)

    def forward(self, x: Tensor, grid: tuple[int, int]) -> Tensor:
        B, N, C = x.shape
        H, W = grid
        y = x.transpose(1, 2).reshape(B, C, H, W)
        y = self.conv2(self.bn(self.act(self.conv1(y))))
        return y.reshape(B, C, N).transpose(1, 2)


class XCABlock(nn.Module):
    """x += g1 * XCA(LN1 x); x += g3 * LPI(LN3 x); x += g2 * MLP(LN2 x). 1,784,840 parameters.

    Weights `norm1`, `attn`, `norm3`, `local_mp`, `norm2`, `mlp`, `gamma1`, `gamma3`, `gamma2` (each (384,)).
    """

    def __init__(self, dim: int = EMBED_DIM, num_heads: int = HEADS, mlp_hidden: int = MLP_HIDDEN, eta: float = ETA):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        self.attn = XCA(dim, num_heads)
        self.norm3 = nn.LayerNorm(dim, eps=LN_EPS)
        self.local_mp = LPI(dim)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, mlp_hidden)
        self.gamma1 = nn.Parameter(torch.full((dim,), eta))
        self.gamma3 = nn.Parameter(torch.full((dim,), eta))
        self.gamma2 = nn.Parameter(torch.full((dim,), eta))

    def forward(self, x: Tensor, grid: tuple[int, int]) -> Tensor:
        x = x + self.gamma1 * self.attn(self.norm1(x))
        x = x + self.gamma3 * self.local_mp(self.norm3(x), grid)
        return x + self.gamma2 * self.mlp(self.norm2(x))

    def keys(self, x: Tensor) -> Tensor:
        """This block's keys W_k LN1(x) + b_k: (B, N, C) -> (B, N, C); nothing else of the block runs."""
        return self.attn.keys(self.norm1(x))


class XCiT(nn.Module):
    """XCiT-S12/16 in backbone form: patch_embed (conv stem), pos_embeder, 12 XCA blocks; 22,316,688 parameters.

    State-dict names are the authors' (and DINO's): `patch_embed.proj.{0,2,4,6}.{0,1}.*`,
    `pos_embeder.token_projection.*`, `blocks.{i}.{norm1,attn.{temperature,qkv,proj},norm3,local_mp.{conv1,bn,conv2},
    norm2,mlp.fc1,mlp.fc2,gamma1,gamma3,gamma2}`, plus the BatchNorm buffers (`running_mean`, `running_var`,
    `num_batches_tracked`).
    """

    patch_attention = False  # XCA attends across channels, not patches: no attention-spread reading (§13)
    geometry = SEED  # 16 x 16 patches, 384 wide, 12 XCA blocks, no registers
    # the network's form (docs/design.md §11): its 12 XCA blocks never see the class token, so both forms give the
    # same readings; the extraction records the one asked for
    form = "backbone"

    def __init__(self, embed_dim: int = EMBED_DIM, depth: int = DEPTH, num_heads: int = HEADS,
                 mlp_hidden: int = MLP_HIDDEN, eta: float = ETA):
        super().__init__()
        self.patch_size = PATCH
        self.embed_dim = embed_dim
        self.patch_embed = ConvPatchEmbed(embed_dim)
        self.pos_embeder = PositionalEncodingFourier(FOURIER_DIM, embed_dim, FOURIER_TEMPERATURE)
        self.blocks = nn.ModuleList([XCABlock(embed_dim, num_heads, mlp_hidden, eta) for _ in range(depth)])
        self._init_weights()

    def _init_weights(self) -> None:
        """The authors' initialisation: truncated normal (std 0.02) for linears, LayerNorm 1 and 0; convolutions and
        BatchNorm keep PyTorch's defaults."""
        init_linears_and_norms(self)

    def _check_input(self, x: Tensor) -> None:
        patch_grid(x, self.patch_size)

    def prepare_tokens(self, x: Tensor) -> tuple[Tensor, tuple[int, int]]:
        """(B, 3, H, W) float32 -> (tokens plus position encoding (B, H/16 * W/16, 384), grid (H/16, W/16))."""
        self._check_input(x)
        z, grid = self.patch_embed(x)
        return z + self.pos_embeder(grid), grid

    def tokens(self, x: Tensor) -> Tensor:
        """Block 12's output: (B, 3, H, W) float32, H and W multiples of 16 -> (B, H/16 * W/16, 384) float32."""
        z, grid = self.prepare_tokens(x)
        for block in self.blocks:
            z = block(z, grid)
        return z

    def forward(self, x: Tensor) -> Tensor:
        """Same as `tokens`."""
        return self.tokens(x)

    def last_keys(self, x: Tensor) -> Tensor:
        """Block 12's keys W_k LN1(z) + b_k per token: (B, 3, H, W) float32 -> (B, H/16 * W/16, 384) float32."""
        z, grid = self.prepare_tokens(x)
        for block in self.blocks[:-1]:
            z = block(z, grid)
        return self.blocks[-1].keys(z)


def xcit_small_12_p16() -> XCiT:
    """XCiT-S12/16 in backbone form: 384 wide, 12 blocks, 8 heads of 48, MLP 1536; the authors' initialisation."""
    return XCiT(embed_dim=EMBED_DIM, depth=DEPTH, num_heads=HEADS, mlp_hidden=MLP_HIDDEN, eta=ETA)
