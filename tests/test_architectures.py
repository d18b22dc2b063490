"""The seeds' architectures (docs/design.md §9): parameter counts of every form, parity of keys480 / tokens224 with
independent float64 implementations written here (explicit per-head loops; XCiT's Fourier encoding, per-channel
normalisation, conv stem and LPI as plain tensor arithmetic), the properties the design pins (LayerScale with g = 1 is
plain ViT bit for bit, block 12's gammas and shortcuts never reach keys480, Aug-ViT's zero shortcuts give the
3/4-scaled plain block), the registry's recognition and its refusals."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from evaluate.networks import registry as architectures
from evaluate.networks.registry import REGISTRY, ArchitectureError, full_form, identify
from evaluate.networks.vit import (
    AUG_MODES,
    CirculantLinear,
    augvit_small,
    circulant_index_matrix,
    vit_small,
    vit_small_layerscale,
)
from evaluate.networks.xcit import fourier_features, xcit_small_12_p16


def count_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def count_state(state: dict) -> int:
    """Trainable parameters of a state dict: BatchNorm statistics and Aug-ViT's index matrices are buffers."""
    buffers = (".running_mean", ".running_var", ".num_batches_tracked", ".index_matrix")
    return sum(v.numel() for k, v in state.items() if not k.endswith(buffers))


def randomise(net: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every parameter and BatchNorm statistic of visible size, so that each one matters and mistakes show: LayerNorm
    gains 1 +- 0.3, biases 0.05, gammas 0.3-1.7 (and never near 1 for block 12), XCiT temperatures 0.3-3, BatchNorm
    means 0.3, variances 0.5-2, Aug-ViT shortcut weights 0.05, the ViT position table 0.5."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in net.named_parameters():
            shape = param.shape
            if "norm" in name and name.endswith("weight") or name.endswith(".bn.weight") or ".1.weight" in name:
                param.copy_(1 + 0.3 * torch.randn(shape, generator=gen))
            elif "gamma" in name:
                param.copy_(0.3 + 1.4 * torch.rand(shape, generator=gen))
            elif name.endswith("temperature"):
                param.copy_(0.3 + 2.7 * torch.rand(shape, generator=gen))
            elif "augs" in name:
                param.copy_(0.05 * torch.randn(shape, generator=gen))
            elif name.endswith("bias"):
                param.copy_(0.05 * torch.randn(shape, generator=gen))
            elif name == "pos_embed":
                param.copy_(0.5 * torch.randn(shape, generator=gen))
        for name, buf in net.named_buffers():
            if name.endswith("running_mean"):
                buf.copy_(0.3 * torch.randn(buf.shape, generator=gen))
            elif name.endswith("running_var"):
                buf.copy_(0.5 + 1.5 * torch.rand(buf.shape, generator=gen))
    return net.eval()


@pytest.fixture(scope="module")
def layerscale():
    torch.manual_seed(0)
    return randomise(vit_small_layerscale(), 1)


@pytest.fixture(scope="module")
def augvit():
    torch.manual_seed(0)
    return randomise(augvit_small("circulant2"), 2)


@pytest.fixture(scope="module")
def xcit():
    torch.manual_seed(0)
    return randomise(xcit_small_12_p16(), 3)


# ----------------------------------------------------------------------------------------------------- sizes


def test_backbone_form_parameter_counts_match_design_section_9():
    assert count_params(vit_small_layerscale()) == 21_673_344
    assert count_params(augvit_small("circulant2")) == 21_756_288
    net = xcit_small_12_p16()
    assert count_params(net) == 22_316_688
    assert [count_params(block) for block in net.blocks] == [1_784_840] * 12
    assert count_params(net.patch_embed) == 873_648


@pytest.mark.parametrize(
    "mode,backbone,dino", [("linear", 25_212_288, 25_213_824), ("circulant", 21_710_208, 21_711_744),
                           ("linear2", 28_760_448, 28_761_984), ("circulant2", 21_756_288, 21_757_824)]
)
def test_augvit_counts_of_every_mode_in_both_forms(mode, backbone, dino):
    net = augvit_small(mode)
    assert count_params(net) == backbone
    assert count_state(full_form(net.state_dict())) == dino  # the authors' DINO-form numbers, research note §3.5


def test_full_form_parameter_counts():
    ls = vit_small_layerscale().state_dict()
    assert count_state(full_form(ls, layout="dino")) == 21_674_880
    deit3 = full_form(ls, layout="deit3")
    assert count_state({k: v for k, v in deit3.items() if not k.startswith("head.")}) == 21_674_496
    assert tuple(deit3["pos_embed"].shape) == (1, 196, 384)
    assert len([k for k in deit3 if not k.startswith("head.")]) == 174  # the DeiT III small file, without its head
    released = full_form(xcit_small_12_p16().state_dict())
    assert count_state(released) == 25_868_304
    assert len(released) == 381 and len([k for k in released if k.endswith("num_batches_tracked")]) == 16
    aug = full_form(augvit_small("circulant2").state_dict())
    assert len(aug) == 294 and len([k for k in aug if k.endswith("index_matrix")]) == 48


def test_layerscale_has_24_gammas_and_xcit_eight_head_temperatures():
    gammas = [k for k in vit_small_layerscale().state_dict() if "gamma" in k]
    assert len(gammas) == 24 and gammas[:2] == ["blocks.0.gamma_1", "blocks.0.gamma_2"]
    state = xcit_small_12_p16().state_dict()
    assert tuple(state["blocks.0.attn.temperature"].shape) == (8, 1, 1)


# ----------------------------------------------------------------------------------------------------- references


def ref_layernorm(x, weight, bias):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-6) * weight + bias


def ref_gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def ref_softmax(x):
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def ref_dino_table(pos: torch.Tensor, gh: int, gw: int) -> torch.Tensor:
    """DINO's interpolate_pos_encoding on a (1, 196, C) table for a gh x gw grid."""
    if (gh, gw) == (14, 14):
        return pos
    dim = pos.shape[-1]
    table = F.interpolate(pos.reshape(1, 14, 14, dim).permute(0, 3, 1, 2),
                          scale_factor=((gh + 0.1) / 14, (gw + 0.1) / 14), mode="bicubic")
    return table.permute(0, 2, 3, 1).reshape(1, gh * gw, dim)


def ref_circulant_weight(weight_list: torch.Tensor) -> torch.Tensor:
    """W[96 I + r, 96 J + c] = weight_list[(4 I + J) 96 + (r - c) mod 96], block by block."""
    W = torch.zeros(384, 384, dtype=weight_list.dtype)
    r = torch.arange(96)
    for I in range(4):
        for J in range(4):
            W[96 * I : 96 * I + 96, 96 * J : 96 * J + 96] = weight_list[(4 * I + J) * 96 + (r[:, None] - r[None, :]) % 96]
    return W


def ref_shortcut(sd, name, u):
    if name + ".weight_list" in sd:
        return u @ ref_circulant_weight(sd[name + ".weight_list"]).T + sd[name + ".bias"]
    return u @ sd[name + ".weight"].T + sd[name + ".bias"]


def ref_vit(state: dict, images: torch.Tensor, mode: str = "plain"):
    """ViT-S/16 (plain, "layerscale", or an Aug-ViT mode) in float64, per-head loops. Returns (tokens, keys)."""
    sd = {k: v.double() for k, v in state.items() if v.is_floating_point()}
    x = images.double()
    B, _, H, W = x.shape
    gh, gw = H // 16, W // 16
    patches = x.reshape(B, 3, gh, 16, gw, 16).permute(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, 768)
    z = patches @ sd["patch_embed.proj.weight"].reshape(384, -1).T + sd["patch_embed.proj.bias"]
    z = z + ref_dino_table(sd["pos_embed"], gh, gw)
    keys = None
    for i in range(12):
        p = f"blocks.{i}."
        u = ref_layernorm(z, sd[p + "norm1.weight"], sd[p + "norm1.bias"])
        qkv = u @ sd[p + "attn.qkv.weight"].T + sd[p + "attn.qkv.bias"]
        q, k, v = qkv[..., :384], qkv[..., 384:768], qkv[..., 768:]
        keys = k
        heads = []
        for head in range(6):
            cols = slice(64 * head, 64 * head + 64)
            heads.append(ref_softmax(q[..., cols] @ k[..., cols].transpose(1, 2) / 8.0) @ v[..., cols])
        attn = torch.cat(heads, dim=-1) @ sd[p + "attn.proj.weight"].T + sd[p + "attn.proj.bias"]
        if mode == "layerscale":
            attn = attn * sd[p + "gamma_1"]
        z = step(z, attn, sd, p, "augs_attn", u, mode)
        w = ref_layernorm(z, sd[p + "norm2.weight"], sd[p + "norm2.bias"])
        mlp = ref_gelu(w @ sd[p + "mlp.fc1.weight"].T + sd[p + "mlp.fc1.bias"]) @ sd[p + "mlp.fc2.weight"].T
        mlp = mlp + sd[p + "mlp.fc2.bias"]
        if mode == "layerscale":
            mlp = mlp * sd[p + "gamma_2"]
        z = step(z, mlp, sd, p, "augs", w, mode)
    return z, keys


def step(z, branch, sd, p, shortcut, u, mode):
    """One residual half-step: plain / LayerScale z + branch; Aug-ViT per docs/design.md §9.3."""
    if mode in ("plain", "layerscale"):
        return z + branch
    if mode in ("linear", "circulant"):
        return z + branch + ref_shortcut(sd, p + shortcut, u)
    first = ref_gelu(ref_shortcut(sd, p + shortcut + ".0", u))
    second = ref_gelu(ref_shortcut(sd, p + shortcut + "2.0", u))
    return 0.75 * (z + branch + first + second)


def ref_conv3x3_s2(x, w):
    """3 x 3 convolution, stride 2, padding 1, no bias, as a sum over the nine kernel taps."""
    B, C, H, W = x.shape
    Ho, Wo = (H - 1) // 2 + 1, (W - 1) // 2 + 1
    xp = torch.zeros(B, C, H + 2, W + 2, dtype=x.dtype)
    xp[:, :, 1:-1, 1:-1] = x
    out = torch.zeros(B, w.shape[0], Ho, Wo, dtype=x.dtype)
    for di in range(3):
        for dj in range(3):
            tap = xp[:, :, di : di + 2 * Ho : 2, dj : dj + 2 * Wo : 2]
            out += torch.einsum("bchw,oc->bohw", tap, w[:, :, di, dj])
    return out


def ref_depthwise3x3(x, w, b):
    B, C, H, W = x.shape
    xp = torch.zeros(B, C, H + 2, W + 2, dtype=x.dtype)
    xp[:, :, 1:-1, 1:-1] = x
    out = torch.zeros_like(x) + b[None, :, None, None]
    for di in range(3):
        for dj in range(3):
            out += xp[:, :, di : di + H, dj : dj + W] * w[:, 0, di, dj][None, :, None, None]
    return out


def ref_batchnorm(x, sd, p):
    scale = sd[p + "weight"] / torch.sqrt(sd[p + "running_var"] + 1e-5)
    return (x - sd[p + "running_mean"][None, :, None, None]) * scale[None, :, None, None] + sd[p + "bias"][None, :, None, None]


def ref_fourier(H: int, W: int) -> torch.Tensor:
    """(64, H, W): y's 32 channels then x's; sin on even k, cos on odd k; t_k = 10000^(2 floor(k / 2) / 32)."""
    pe = torch.zeros(64, H, W, dtype=torch.float64)
    for k in range(32):
        t = 10000 ** (2 * (k // 2) / 32)
        f = math.sin if k % 2 == 0 else math.cos
        for i in range(H):
            pe[k, i, :] = f((i + 1) / (H + 1e-6) * 2 * math.pi / t)
        for j in range(W):
            pe[32 + k, :, j] = f((j + 1) / (W + 1e-6) * 2 * math.pi / t)
    return pe


def ref_xcit(state: dict, images: torch.Tensor):
    """XCiT-S12/16 block 12 in float64: conv stem with BatchNorm, Fourier encoding, 12 x [XCA, LPI, MLP] with
    per-head loops. Returns (tokens, keys)."""
    sd = {k: v.double() for k, v in state.items() if v.is_floating_point()}
    x = images.double()
    for stage in range(4):
        p = f"patch_embed.proj.{2 * stage}."
        x = ref_batchnorm(ref_conv3x3_s2(x, sd[p + "0.weight"]), sd, p + "1.")
        if stage < 3:
            x = ref_gelu(x)
    B, C, H, W = x.shape
    z = x.reshape(B, C, H * W).transpose(1, 2)
    pe = ref_fourier(H, W).reshape(64, H * W).T  # (N, 64)
    z = z + pe @ sd["pos_embeder.token_projection.weight"].reshape(384, 64).T + sd["pos_embeder.token_projection.bias"]
    keys = None
    for i in range(12):
        p = f"blocks.{i}."
        u = ref_layernorm(z, sd[p + "norm1.weight"], sd[p + "norm1.bias"])
        qkv = u @ sd[p + "attn.qkv.weight"].T + sd[p + "attn.qkv.bias"]
        q, k, v = qkv[..., :384], qkv[..., 384:768], qkv[..., 768:]
        keys = k
        heads = []
        for head in range(8):
            cols = slice(48 * head, 48 * head + 48)
            qh, kh, vh = q[..., cols], k[..., cols], v[..., cols]  # (B, N, 48)
            qh = qh / qh.pow(2).sum(1, keepdim=True).sqrt()  # each channel to unit length over the tokens
            kh = kh / kh.pow(2).sum(1, keepdim=True).sqrt()
            attn = ref_softmax(qh.transpose(1, 2) @ kh * sd[p + "attn.temperature"][head, 0, 0])  # (B, 48, 48)
            heads.append((attn @ vh.transpose(1, 2)).transpose(1, 2))
        out = torch.cat(heads, -1) @ sd[p + "attn.proj.weight"].T + sd[p + "attn.proj.bias"]
        z = z + sd[p + "gamma1"] * out
        m = ref_layernorm(z, sd[p + "norm3.weight"], sd[p + "norm3.bias"]).transpose(1, 2).reshape(B, C, H, W)
        m = ref_depthwise3x3(m, sd[p + "local_mp.conv1.weight"], sd[p + "local_mp.conv1.bias"])
        m = ref_batchnorm(ref_gelu(m), sd, p + "local_mp.bn.")
        m = ref_depthwise3x3(m, sd[p + "local_mp.conv2.weight"], sd[p + "local_mp.conv2.bias"])
        z = z + sd[p + "gamma3"] * m.reshape(B, C, H * W).transpose(1, 2)
        w = ref_layernorm(z, sd[p + "norm2.weight"], sd[p + "norm2.bias"])
        mlp = ref_gelu(w @ sd[p + "mlp.fc1.weight"].T + sd[p + "mlp.fc1.bias"]) @ sd[p + "mlp.fc2.weight"].T
        z = z + sd[p + "gamma2"] * (mlp + sd[p + "mlp.fc2.bias"])
    return z, keys


def readings(net, images):
    with torch.inference_mode():
        return net.tokens(images), net.last_keys(images)


def assert_parity(got, want):
    tokens, keys = got
    tokens_ref, keys_ref = want
    assert tokens.shape == keys.shape and tokens.dtype == keys.dtype == torch.float32
    torch.testing.assert_close(tokens.double(), tokens_ref, rtol=0, atol=1e-4)
    torch.testing.assert_close(keys.double(), keys_ref, rtol=0, atol=1e-4)
    assert tokens_ref.abs().max() > 1 and keys_ref.abs().max() > 0.5  # not a comparison between near-zeros


# ----------------------------------------------------------------------------------------------------- parity


def test_layerscale_matches_reference_on_non_square_images(layerscale):
    images = torch.randn(2, 3, 64, 96, generator=torch.Generator().manual_seed(3))
    assert_parity(readings(layerscale, images), ref_vit(layerscale.state_dict(), images, "layerscale"))


def test_layerscale_keys480_and_tokens224_match_reference(layerscale):
    big = torch.randn(1, 3, 480, 480, generator=torch.Generator().manual_seed(4))
    small = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        keys, tokens = layerscale.last_keys(big), layerscale.tokens(small)
    assert keys.shape == (1, 900, 384) and tokens.shape == (1, 196, 384)
    torch.testing.assert_close(keys.double(), ref_vit(layerscale.state_dict(), big, "layerscale")[1], rtol=0, atol=1e-4)
    torch.testing.assert_close(tokens.double(), ref_vit(layerscale.state_dict(), small, "layerscale")[0], rtol=0,
                               atol=1e-4)


@pytest.mark.parametrize("mode", AUG_MODES)
def test_augvit_every_mode_matches_reference(mode):
    torch.manual_seed(0)
    net = randomise(augvit_small(mode), 6)
    images = torch.randn(2, 3, 48, 80, generator=torch.Generator().manual_seed(7))
    assert_parity(readings(net, images), ref_vit(net.state_dict(), images, mode))


def test_augvit_keys480_and_tokens224_match_reference(augvit):
    big = torch.randn(1, 3, 480, 480, generator=torch.Generator().manual_seed(8))
    small = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(9))
    with torch.inference_mode():
        keys, tokens = augvit.last_keys(big), augvit.tokens(small)
    assert keys.shape == (1, 900, 384) and tokens.shape == (1, 196, 384)
    torch.testing.assert_close(keys.double(), ref_vit(augvit.state_dict(), big, "circulant2")[1], rtol=0, atol=1e-4)
    torch.testing.assert_close(tokens.double(), ref_vit(augvit.state_dict(), small, "circulant2")[0], rtol=0, atol=1e-4)


def test_xcit_matches_reference_on_non_square_images(xcit):
    images = torch.randn(2, 3, 64, 96, generator=torch.Generator().manual_seed(10))
    assert_parity(readings(xcit, images), ref_xcit(xcit.state_dict(), images))


def test_xcit_keys480_and_tokens224_match_reference(xcit):
    big = torch.randn(1, 3, 480, 480, generator=torch.Generator().manual_seed(11))
    small = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(12))
    with torch.inference_mode():
        keys, tokens = xcit.last_keys(big), xcit.tokens(small)
    assert keys.shape == (1, 900, 384) and tokens.shape == (1, 196, 384)
    torch.testing.assert_close(keys.double(), ref_xcit(xcit.state_dict(), big)[1], rtol=0, atol=1e-4)
    torch.testing.assert_close(tokens.double(), ref_xcit(xcit.state_dict(), small)[0], rtol=0, atol=1e-4)


def test_fourier_features_worked_values():
    pe = fourier_features((14, 20))
    assert tuple(pe.shape) == (1, 64, 14, 20)
    assert pe[0, 0, 0, 5].item() == pytest.approx(math.sin(2 * math.pi / 14), abs=1e-6)  # y-sine, k = 0, row 0
    assert pe[0, 1, 3, 0].item() == pytest.approx(math.cos(4 * 2 * math.pi / 14), abs=1e-6)  # y-cosine, row 3
    assert pe[0, 32, 7, 0].item() == pytest.approx(math.sin(2 * math.pi / 20), abs=1e-6)  # x-sine, column 0
    t2 = 10000 ** (2 / 32)
    assert pe[0, 34, 0, 9].item() == pytest.approx(math.sin(10 * 2 * math.pi / 20 / t2), abs=1e-6)


# ----------------------------------------------------------------------------------------------------- properties


def test_layerscale_with_every_gamma_one_is_plain_vit_bit_for_bit(layerscale):
    ones = {k: (torch.ones_like(v) if "gamma" in k else v) for k, v in layerscale.state_dict().items()}
    ls = vit_small_layerscale().eval()
    ls.load_state_dict(ones)
    plain = vit_small().eval()
    plain.load_state_dict({k: v for k, v in ones.items() if "gamma" not in k})
    images = torch.randn(2, 3, 64, 96, generator=torch.Generator().manual_seed(13))
    ls_tokens, ls_keys = readings(ls, images)
    plain_tokens, plain_keys = readings(plain, images)
    assert torch.equal(ls_tokens, plain_tokens) and torch.equal(ls_keys, plain_keys)
    assert not torch.equal(readings(layerscale, images)[0], plain_tokens)  # the random gammas do matter


def perturbed(net, names, seed):
    """A copy of `net` with the named parameters moved by 0.5 to 1.5."""
    clone = copy.deepcopy(net)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in names:
            param = clone.get_parameter(name)
            param.add_(0.5 + torch.rand(param.shape, generator=gen))
    return clone


@pytest.mark.parametrize(
    "which,names",
    [
        ("layerscale", ["blocks.11.gamma_1", "blocks.11.gamma_2"]),
        ("augvit", [f"blocks.11.{s}.0.{w}" for s in ("augs_attn", "augs_attn2", "augs", "augs2")
                    for w in ("weight_list", "bias")]),
        ("xcit", ["blocks.11.gamma1", "blocks.11.gamma3", "blocks.11.gamma2"]),
    ],
)
def test_block_12_gammas_and_shortcuts_change_tokens_not_keys(request, which, names):
    net = request.getfixturevalue(which)
    changed = perturbed(net, names, 14)
    images = torch.randn(1, 3, 64, 96, generator=torch.Generator().manual_seed(15))
    tokens, keys = readings(net, images)
    tokens2, keys2 = readings(changed, images)
    assert torch.equal(keys, keys2)
    assert (tokens - tokens2).abs().max() > 1e-2


def test_augvit_with_zero_shortcuts_is_the_three_quarter_scaled_plain_block(augvit):
    state = {k: (torch.zeros_like(v) if ".augs" in k else v) for k, v in augvit.state_dict().items()}
    aug = augvit_small("circulant2").eval()
    aug.load_state_dict(state)
    plain = vit_small().eval()
    plain.load_state_dict({k: v for k, v in state.items() if ".augs" not in k})
    images = torch.randn(1, 3, 64, 96, generator=torch.Generator().manual_seed(16))
    with torch.inference_mode():
        z = plain.prepare_tokens(images)
        for i, block in enumerate(plain.blocks):
            if i == 11:
                keys = block.keys(z)
            z = 0.75 * (z + block.attn(block.norm1(z)))
            z = 0.75 * (z + block.mlp(block.norm2(z)))
        tokens, got_keys = readings(aug, images)
        plain_tokens = plain.tokens(images)
    torch.testing.assert_close(tokens, z, rtol=0, atol=1e-5)
    torch.testing.assert_close(got_keys, keys, rtol=0, atol=1e-5)
    assert (tokens - plain_tokens).abs().max() > 1e-2  # it is NOT plain ViT (docs/design.md §9.3)


@pytest.mark.parametrize("mode", ["linear", "circulant"])
def test_single_shortcut_modes_with_zero_shortcuts_are_plain_vit(mode):
    torch.manual_seed(0)
    net = randomise(augvit_small(mode), 17)
    state = {k: (torch.zeros_like(v) if ".augs" in k else v) for k, v in net.state_dict().items()}
    net.load_state_dict(state)
    plain = vit_small().eval()
    plain.load_state_dict({k: v for k, v in state.items() if ".augs" not in k})
    images = torch.randn(1, 3, 48, 48, generator=torch.Generator().manual_seed(18))
    # 1e-5, not bit for bit: the shortcuts share one product with qkv and fc1, which sums in another order
    torch.testing.assert_close(readings(net, images), readings(plain, images), rtol=0, atol=1e-5)


def test_circulant_index_matrix_is_block_circulant_with_1536_free_values():
    index = circulant_index_matrix()
    assert index.shape == (384, 384) and index.dtype == torch.int64
    assert index.unique().numel() == 1536
    for I in range(4):
        for J in range(4):
            block = index[96 * I : 96 * I + 96, 96 * J : 96 * J + 96]
            assert torch.equal(block, block.roll((1, 1), (0, 1)))  # circulant: constant along the wrapped diagonals
            assert set(block[:, 0].tolist()) == set(range((4 * I + J) * 96, (4 * I + J) * 96 + 96))
    layer = CirculantLinear()
    torch.testing.assert_close(layer.weight(), ref_circulant_weight(layer.weight_list.detach()), rtol=0, atol=0)


def test_xcit_batchnorm_uses_running_statistics_in_eval(xcit):
    images = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(19))
    net = copy.deepcopy(xcit)
    eval_tokens = readings(net, images)[0]
    net.train()
    with torch.no_grad():
        train_tokens = net.tokens(images)
    assert (eval_tokens - train_tokens).abs().max() > 1e-2
    net.eval()
    with torch.no_grad():
        net.blocks[3].local_mp.bn.running_mean.add_(0.5)
    assert (readings(net, images)[0] - eval_tokens).abs().max() > 1e-2


def test_xcit_keys_are_the_raw_k_slice_of_block_12(xcit):
    images = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(20))
    captured = {}
    handle = xcit.blocks[11].attn.qkv.register_forward_hook(lambda m, i, o: captured.setdefault("qkv", o))
    with torch.inference_mode():
        xcit.tokens(images)
        keys = xcit.last_keys(images)
    handle.remove()
    torch.testing.assert_close(keys, captured["qkv"][..., 384:768], rtol=0, atol=1e-6)
    assert keys.norm(dim=1).sub(1).abs().max() > 0.1  # not normalised over the tokens


# ----------------------------------------------------------------------------------------------------- registry


@pytest.mark.parametrize(
    "build,name,variant,layout",
    [
        (vit_small, "vit-s16", "plain", "6x64"),
        (vit_small_layerscale, "vit-s16-layerscale", "gamma_1", "6x64"),
        (lambda: augvit_small("linear2"), "augvit-s16", "linear2", "6x64"),
        (xcit_small_12_p16, "xcit-s12-16", "official", "8x48"),
    ],
)
def test_identify_recognises_each_backbone_by_its_keys(build, name, variant, layout):
    found = identify(build().state_dict())
    assert (found.name, found.variant, found.head_layout) == (name, variant, layout)
    assert found.as_meta() == {"architecture": name, "architecture_variant": variant, "head_layout": layout}


def test_identify_recognises_the_other_namings():
    assert identify(full_form(vit_small_layerscale().state_dict(), "ls1.gamma")).variant == "ls1.gamma"
    timm = full_form(xcit_small_12_p16().state_dict(), "timm")
    assert "pos_embed.token_projection.weight" in timm and "cls_attn_blocks.0.attn.q.weight" in timm
    assert identify(timm).variant == "timm"


def test_a_variant_the_weights_fix_cannot_be_written_as_another():
    linear2 = augvit_small("linear2").state_dict()
    assert identify(full_form(linear2, "linear2")).variant == "linear2"
    with pytest.raises(ArchitectureError, match="the mode is fixed by the weights \\(linear2\\), not 'circulant2'"):
        full_form(linear2, "circulant2")
    with pytest.raises(ArchitectureError, match="has no variant 'timm'"):
        full_form(linear2, "timm")


def test_every_architecture_is_in_the_registry():
    assert set(REGISTRY) == {"vit-s16", "vit-s16-layerscale", "augvit-s16", "xcit-s12-16",  # §9
                             "vit-s8", "vit-b16", "vit-b8",  # §11: DINO v1
                             *(f"dinov2-{s}14{r}" for s in "sbl" for r in ("", "-reg4")),  # §11: DINOv2
                             "dinov3-s16", "dinov3-s16plus", "dinov3-b16", "dinov3-l16", "dinov3-h16plus"}  # §14


def test_layerscale_under_both_names_is_refused():
    state = vit_small_layerscale().state_dict()
    state["blocks.3.ls1.gamma"] = state["blocks.3.gamma_1"]
    with pytest.raises(ArchitectureError, match="both names"):
        identify(state)


def test_unknown_weights_are_refused_saying_what_is_supported():
    with pytest.raises(ArchitectureError) as info:
        identify({"encoder.layer.0.weight": torch.zeros(1)})
    assert "encoder.layer.0.weight" in str(info.value) and architectures.SUPPORTED in str(info.value)


def test_xcit_cached_position_encoding_follows_load_state_dict(xcit):
    net = copy.deepcopy(xcit)
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(21))
    with torch.inference_mode():
        before = net.tokens(x)  # fills the 4 x 4 cache
    state = {k: (-v if k.startswith("pos_embeder.") else v) for k, v in xcit.state_dict().items()}
    net.load_state_dict(state)
    fresh = xcit_small_12_p16().eval()
    fresh.load_state_dict(state)
    with torch.inference_mode():
        after = net.tokens(x)
        torch.testing.assert_close(after, fresh.tokens(x), rtol=0, atol=0)
    assert (after - before).abs().max() > 1e-2
