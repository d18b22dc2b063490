"""The ViT-S/16 backbone (docs/design.md §1): sizes, the design's worked numbers, the position-table rule, and parity of both
readings with an independent plain implementation written here (explicit per-head loops, float64)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from evaluate import EvaluationError
from evaluate.networks.vit import (
    LN_EPS,
    Attention,
    BackboneInputError,
    Block,
    VisionTransformer,
    attention,
    resample_pos_embed,
    vit_small,
)


@pytest.fixture(scope="module")
def model() -> VisionTransformer:
    """vit_small with every parameter randomised (LayerNorm gains and all biases too), so each one matters."""
    torch.manual_seed(0)
    net = vit_small().eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in net.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight"):
                param.copy_(1 + 0.3 * torch.randn(param.shape, generator=gen))
            elif name.endswith("bias"):
                param.copy_(0.05 * torch.randn(param.shape, generator=gen))
        net.pos_embed.copy_(0.5 * torch.randn(net.pos_embed.shape, generator=gen))
    return net


# ----------------------------------------------------------------------------------------------------- sizes, names


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.fixture(scope="module")
def fresh() -> VisionTransformer:
    return vit_small()


def test_parameter_counts_match_design_section_1(fresh):
    net = fresh
    assert count(net) == 21_664_128
    assert count(net.patch_embed) == 295_296
    assert net.pos_embed.numel() == 75_264 and tuple(net.pos_embed.shape) == (1, 196, 384)
    assert len(net.blocks) == 12
    assert [count(block) for block in net.blocks] == [1_774_464] * 12


def test_state_dict_names_are_dino_selfpatch_names_without_cls_token_or_final_norm(fresh):
    names = set(fresh.state_dict())
    expected = {"patch_embed.proj.weight", "patch_embed.proj.bias", "pos_embed"}
    for i in range(12):
        for part in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"):
            expected |= {f"blocks.{i}.{part}.weight", f"blocks.{i}.{part}.bias"}
    assert names == expected


def test_every_layernorm_has_eps_1e6_and_gelu_is_exact_erf(fresh):
    net = fresh
    norms = [m for m in net.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 24 and all(m.eps == 1e-6 for m in norms)
    gelus = [m for m in net.modules() if isinstance(m, torch.nn.GELU)]
    assert len(gelus) == 12 and all(m.approximate == "none" for m in gelus)


# ----------------------------------------------------------------------------------------------------- worked numbers


def test_layernorm_worked_numbers_through_our_block_norm():
    block = Block(dim=4, num_heads=1, mlp_hidden=8)  # norm1 is built exactly as in the ViT-S blocks
    out = block.norm1(torch.tensor([[2.0, 0.0, -1.0, 3.0]]))
    assert out[0].tolist() == pytest.approx([0.6325, -0.6325, -1.2649, 1.2649], abs=1e-4)


def test_layernorm_eps_is_1e6_where_it_shows():
    # variance 1e-6: x / sqrt(var + eps) is 1e-3 / sqrt(2e-6) = 0.70711 with eps 1e-6 (0.30151 with 1e-5)
    block = Block(dim=4, num_heads=1, mlp_hidden=8)
    out = block.norm2(torch.tensor([[1e-3, -1e-3, 1e-3, -1e-3]], dtype=torch.float64).float())
    assert out[0].tolist() == pytest.approx([0.70711, -0.70711, 0.70711, -0.70711], abs=1e-4)
    assert LN_EPS == 1e-6


ATT_QUERY = torch.tensor([[2.0, 0.0]])
ATT_KEYS = torch.tensor([[1.0, 0.0], [1.0, 0.2], [0.0, 1.0], [-0.5, 0.8]])
ATT_VALUES = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.2, 0.8]])


def test_attention_worked_numbers_output():
    out = attention(ATT_QUERY[None, None], ATT_KEYS[None, None], ATT_VALUES[None, None])
    assert out[0, 0, 0].tolist() == pytest.approx([0.8142, 0.1858], abs=1e-4)


def test_attention_worked_numbers_weights():
    # values = identity rows: the output row is the attention weights themselves (scale from the query's d = 2)
    weights = attention(ATT_QUERY[None, None], ATT_KEYS[None, None], torch.eye(4)[None, None])
    assert weights[0, 0, 0].tolist() == pytest.approx([0.4232, 0.4232, 0.1029, 0.0507], abs=1e-4)


def test_attention_module_scales_scores_by_one_eighth_for_64_wide_heads():
    # one head of 64: with q = k = e1 * a for every token the scores are a^2 / 8; check against that by hand
    attn = Attention(dim=64, num_heads=1)
    with torch.no_grad():
        attn.qkv.weight.zero_()
        attn.qkv.bias.zero_()
        attn.qkv.weight[:64] = torch.eye(64)  # q = x
        attn.qkv.weight[64:128] = torch.eye(64)  # k = x
        attn.qkv.weight[128:] = torch.eye(64)  # v = x
        attn.proj.weight.copy_(torch.eye(64))
        attn.proj.bias.zero_()
    x = torch.zeros(1, 2, 64)
    x[0, 0, 0], x[0, 1, 1] = 4.0, 4.0  # scores: self 16 / 8 = 2, other 0
    out = attn(x)
    w_self = math.exp(2) / (math.exp(2) + 1)
    assert out[0, 0, 0].item() == pytest.approx(4 * w_self, abs=1e-5)
    assert out[0, 0, 1].item() == pytest.approx(4 * (1 - w_self), abs=1e-5)


# ----------------------------------------------------------------------------------------------------- position table


def dino_interpolate_pos_encoding(pos_embed_with_cls: torch.Tensor, x_shape: tuple, patch_size: int = 16):
    """DINO's VisionTransformer.interpolate_pos_encoding, transcribed (`w, h = x.shape[2], x.shape[3]` as in
    its prepare_tokens), on a (1, 1 + 196, C) table with the class position in row 0."""
    _, _, w, h = x_shape
    npatch = (w // patch_size) * (h // patch_size)
    N = pos_embed_with_cls.shape[1] - 1
    if npatch == N and w == h:
        return pos_embed_with_cls
    class_pos_embed = pos_embed_with_cls[:, 0]
    patch_pos_embed = pos_embed_with_cls[:, 1:]
    dim = pos_embed_with_cls.shape[-1]
    w0 = w // patch_size
    h0 = h // patch_size
    w0, h0 = w0 + 0.1, h0 + 0.1
    patch_pos_embed = F.interpolate(
        patch_pos_embed.reshape(1, int(math.sqrt(N)), int(math.sqrt(N)), dim).permute(0, 3, 1, 2),
        scale_factor=(w0 / math.sqrt(N), h0 / math.sqrt(N)),
        mode="bicubic",
    )
    assert int(w0) == patch_pos_embed.shape[-2] and int(h0) == patch_pos_embed.shape[-1]
    patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, dim)
    return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1)


@pytest.mark.parametrize("height,width", [(480, 480), (320, 480), (480, 224)])
def test_resample_pos_embed_equals_dinos_interpolate_pos_encoding(height, width):
    gen = torch.Generator().manual_seed(2)
    table = torch.randn(1, 196, 384, generator=gen)
    with_cls = torch.cat([torch.randn(1, 1, 384, generator=gen), table], dim=1)
    expected = dino_interpolate_pos_encoding(with_cls, (1, 3, height, width))[:, 1:]
    got = resample_pos_embed(table, (height // 16, width // 16))
    assert got.shape == (1, (height // 16) * (width // 16), 384)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_resample_pos_embed_is_identity_at_14_by_14():
    table = torch.randn(1, 196, 384)
    assert torch.equal(resample_pos_embed(table, (14, 14)), table)


def test_resample_pos_embed_differs_from_a_bare_reshape():
    table = torch.randn(1, 196, 384)
    scrambled = F.interpolate(
        table.reshape(1, 384, 14, 14), scale_factor=(30.1 / 14, 30.1 / 14), mode="bicubic", align_corners=False
    ).reshape(1, 384, 900).transpose(1, 2)
    assert (resample_pos_embed(table, (30, 30)) - scrambled).abs().max() > 0.1


def test_resample_pos_embed_keeps_a_constant_table_and_each_row_at_its_place():
    # bicubic weights sum to 1: a constant channel stays constant; a channel that depends on the column only
    # keeps not depending on the row (a transposed layout would swap that)
    table = torch.zeros(1, 14, 14, 2)
    table[..., 0] = 0.7
    table[..., 1] = torch.arange(14.0)[None, None, :]
    out = resample_pos_embed(table.reshape(1, 196, 2), (20, 30)).reshape(20, 30, 2)
    torch.testing.assert_close(out[..., 0], torch.full((20, 30), 0.7), rtol=0, atol=1e-5)
    torch.testing.assert_close(out[..., 1], out[:1, :, 1].expand(20, 30), rtol=0, atol=1e-5)
    assert out[0, -1, 1] > out[0, 0, 1] + 10  # grows across the columns


def test_cached_position_table_follows_load_state_dict(model):
    net = copy.deepcopy(model)
    net.pos_embed = torch.nn.Parameter(-model.pos_embed.detach().clone())
    x = torch.randn(1, 3, 320, 320)
    with torch.inference_mode():
        stale = net.last_keys(x)  # fills the 20 x 20 cache with the negated table
    net.load_state_dict(model.state_dict())
    with torch.inference_mode():
        fresh_keys = net.last_keys(x)
        torch.testing.assert_close(fresh_keys, model.last_keys(x), rtol=0, atol=0)
    assert not torch.allclose(stale, fresh_keys)
    with torch.no_grad():
        net.pos_embed.mul_(2)  # an in-place change also invalidates it
    expected = resample_pos_embed(net.pos_embed.detach(), (20, 20))
    with torch.no_grad():
        torch.testing.assert_close(net.pos_embed_for((20, 20)), expected, rtol=0, atol=0)


# ----------------------------------------------------------------------------------------------------- parity


def plain_layernorm(x, weight, bias):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-6) * weight + bias


def plain_gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def plain_vit(state: dict, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An independent ViT-S/16 in float64 with explicit per-head loops. Returns (block-12 output, block-12 keys)."""
    sd = {k: v.double() for k, v in state.items()}
    x = images.double()
    B, _, H, W = x.shape
    gh, gw = H // 16, W // 16
    # patches row by row, each flattened as (channel, row, column) like the conv kernel
    patches = x.reshape(B, 3, gh, 16, gw, 16).permute(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, 3 * 256)
    z = patches @ sd["patch_embed.proj.weight"].reshape(384, -1).T + sd["patch_embed.proj.bias"]
    with_cls = torch.cat([torch.zeros(1, 1, 384, dtype=torch.float64), sd["pos_embed"]], dim=1)
    z = z + dino_interpolate_pos_encoding(with_cls, tuple(x.shape))[:, 1:]
    keys = None
    for i in range(12):
        p = f"blocks.{i}."
        h = plain_layernorm(z, sd[p + "norm1.weight"], sd[p + "norm1.bias"])
        qkv = h @ sd[p + "attn.qkv.weight"].T + sd[p + "attn.qkv.bias"]
        q, k, v = qkv[..., :384], qkv[..., 384:768], qkv[..., 768:]
        keys = k
        heads = []
        for head in range(6):
            cols = slice(64 * head, 64 * head + 64)
            scores = q[..., cols] @ k[..., cols].transpose(1, 2) / 8.0
            weights = torch.exp(scores - scores.max(-1, keepdim=True).values)
            weights = weights / weights.sum(-1, keepdim=True)
            heads.append(weights @ v[..., cols])
        z = z + torch.cat(heads, dim=-1) @ sd[p + "attn.proj.weight"].T + sd[p + "attn.proj.bias"]
        h = plain_layernorm(z, sd[p + "norm2.weight"], sd[p + "norm2.bias"])
        h = plain_gelu(h @ sd[p + "mlp.fc1.weight"].T + sd[p + "mlp.fc1.bias"])
        z = z + h @ sd[p + "mlp.fc2.weight"].T + sd[p + "mlp.fc2.bias"]
    return z, keys


def test_tokens_and_keys_match_plain_implementation_on_non_square_images(model):
    images = torch.randn(2, 3, 64, 96, generator=torch.Generator().manual_seed(3))
    tokens_ref, keys_ref = plain_vit(model.state_dict(), images)
    with torch.inference_mode():
        tokens, keys, forward = model.tokens(images), model.last_keys(images), model(images)
    assert tokens.shape == keys.shape == (2, 24, 384) and tokens.dtype == keys.dtype == torch.float32
    torch.testing.assert_close(tokens.double(), tokens_ref, rtol=0, atol=1e-4)
    torch.testing.assert_close(keys.double(), keys_ref, rtol=0, atol=1e-4)
    assert torch.equal(forward, tokens)
    assert tokens_ref.abs().max() > 1 and keys_ref.abs().max() > 1  # the comparison is not between near-zeros


def test_keys480_match_plain_implementation(model):
    image = torch.randn(1, 3, 480, 480, generator=torch.Generator().manual_seed(4))
    _, keys_ref = plain_vit(model.state_dict(), image)
    with torch.inference_mode():
        keys = model.last_keys(image)
    assert keys.shape == (1, 900, 384)
    torch.testing.assert_close(keys.double(), keys_ref, rtol=0, atol=1e-4)


def test_tokens224_match_plain_implementation_with_table_unchanged(model):
    image = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(5))
    tokens_ref, _ = plain_vit(model.state_dict(), image)
    with torch.inference_mode():
        tokens = model.tokens(image)
    torch.testing.assert_close(tokens.double(), tokens_ref, rtol=0, atol=1e-4)


def test_last_keys_do_not_run_block_12_attention_or_mlp(model):
    net = vit_small().eval()
    net.load_state_dict(model.state_dict())
    x = torch.randn(1, 3, 64, 64)
    with torch.inference_mode():
        before = net.last_keys(x)
    with torch.no_grad():
        for name in ("attn.proj.weight", "mlp.fc1.weight", "mlp.fc2.weight"):
            net.blocks[11].get_parameter(name).fill_(float("nan"))
        net.blocks[11].attn.qkv.weight[:384].fill_(float("nan"))  # the queries of block 12
        net.blocks[11].attn.qkv.weight[768:].fill_(float("nan"))  # its values
    with torch.inference_mode():
        assert torch.equal(net.last_keys(x), before)
        assert torch.isnan(net.tokens(x)).all()


def test_batch_rows_are_independent(model):
    images = torch.randn(3, 3, 48, 32, generator=torch.Generator().manual_seed(6))
    with torch.inference_mode():
        together = model.last_keys(images)
        alone = torch.cat([model.last_keys(images[i : i + 1]) for i in range(3)])
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "shape,complaint",
    [
        ((1, 3, 100, 64), "multiples of 16, got 100 x 64"),
        ((1, 3, 64, 8), "multiples of 16, got 64 x 8"),
        ((3, 64, 64), "(B, 3, H, W)"),
        ((1, 4, 64, 64), "(B, 3, H, W)"),
    ],
)
def test_bad_input_shapes_raise_backbone_input_error(model, shape, complaint):
    with pytest.raises(BackboneInputError) as info:
        model.tokens(torch.zeros(shape))
    assert isinstance(info.value, EvaluationError)
    assert complaint in str(info.value)
