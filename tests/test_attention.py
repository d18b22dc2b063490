"""The attention-spread reading (docs/design.md §13): the entropy of a row, the reading of a hand-made network computed
by hand, parity with an independent float64 implementation written here (explicit per-head loops over a seeded
ViT-S/16 on real photos), LayerScale with g = 1 and Aug-ViT with zero shortcuts read as plain ViT, the tokens
unchanged by the reading, XCiT without it, and the per-checkpoint measures and tables."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from evaluate.attention import AttentionError
from evaluate.readings import ReadingError
from evaluate.readings.attention_spread import logit_row_entropy, qk_row_entropy, row_entropy
from evaluate.readings.attention_spread import (
    attention_rows,
    gives_attention_spread,
    tokens_and_spread,
)
from evaluate.attention.summary import (
    ENTROPY,
    SPREAD,
    spread_measures,
    spread_summary,
    spread_tables,
)
from evaluate.networks.vit import (
    LN_EPS,
    VisionTransformer,
    augvit_small,
    vit_small,
    vit_small_layerscale,
)
from evaluate.networks.xcit import xcit_small_12_p16
from evaluate.scores.measures import PERCENT, make_measure, measure_scale

LN2 = math.log(2.0)


def seeded_images(n: int, side: int = 64, seed: int = 0) -> torch.Tensor:
    """n seeded normal inputs, side x side: 64 px (a 4 x 4 grid) unless a test needs more."""
    return torch.randn(n, 3, side, side, generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------------------------------- one row's entropy


def test_uniform_row_of_196_has_entropy_ln_196_and_one_hot_row_zero():
    uniform = torch.full((196,), 1.0 / 196, dtype=torch.float64)
    one_hot = torch.zeros(196, dtype=torch.float64)
    one_hot[17] = 1.0
    assert row_entropy(uniform).item() == pytest.approx(math.log(196), abs=1e-12)
    assert row_entropy(one_hot).item() == 0.0  # 0 ln 0 = 0, not NaN
    # from logits: equal logits are the uniform row; one logit far above the rest is the one-hot row
    assert logit_row_entropy(torch.zeros(196, dtype=torch.float64)).item() == pytest.approx(math.log(196), abs=1e-12)
    peaked = torch.zeros(196)
    peaked[3] = 1e4
    assert logit_row_entropy(peaked).item() == 0.0
    # from queries and keys: a zero query weighs every key alike
    k = torch.randn(1, 1, 196, 64, generator=torch.Generator().manual_seed(0))
    assert qk_row_entropy(torch.zeros(1, 1, 5, 64), k) == pytest.approx(math.log(196), abs=1e-5)


def test_logit_entropy_equals_minus_sum_a_ln_a_written_out():
    logits = 3.0 * torch.randn(50, 196, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for row in logits[:5]:
        weights = [math.exp(float(s)) for s in row]
        total = sum(weights)
        expected = -sum(w / total * math.log(w / total) for w in weights)
        assert logit_row_entropy(row).item() == pytest.approx(expected, abs=1e-12)
    # the float32 path on the same logits, against float64
    assert torch.allclose(logit_row_entropy(logits.float()).double(), logit_row_entropy(logits), atol=2e-6)
    assert torch.allclose(row_entropy(logits.softmax(-1)), logit_row_entropy(logits), atol=1e-12)


def test_half_precision_queries_and_keys_are_read_in_float32():
    """Under autocast the network hands float16 q and k to the tap: the rows are still computed in float32."""
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(2, 3, 16, 8, generator=gen).half()
    k = torch.randn(2, 3, 16, 8, generator=gen).half()
    entropy = qk_row_entropy(q, k)
    assert entropy.dtype == torch.float32
    assert torch.equal(entropy, qk_row_entropy(q.float(), k.float()))


# ------------------------------------------------------------------------------------------------- a network by hand


def hadamard_rows() -> torch.Tensor:
    """Rows 1..4 of the 8 x 8 Sylvester Hadamard matrix: zero-mean +-1 vectors, pairwise orthogonal, |h|^2 = 8."""
    h2 = torch.tensor([[1.0, 1.0], [1.0, -1.0]])
    return torch.kron(h2, torch.kron(h2, h2))[1:5]


def hand_network() -> tuple[VisionTransformer, torch.Tensor]:
    """A 2-block ViT, 8 wide, 4 heads of d = 2, on a 32 x 32 input: a 2 x 2 grid of patches.

    Token i (patch i, row by row) is the Hadamard row h_i: the patch embedding copies pixels (0, 0..7) of the
    patch's red channel, the position table is zero. h_i has mean 0 and variance 1, and LN1's gain is
    sqrt(1 + eps), so LN1(h_i) = h_i. With W = (1/8) sum_i w_i h_i^T, W h_j = w_j: the q and k weights give token
    j the query q_j and key k_j written below (head h owns channels 2h, 2h + 1). v, proj and fc2 are zero, so every
    block passes its tokens on unchanged and block 2 sees the same tokens as block 1.

    With L = (0, 0, ln 2, 2 ln 2), a "pattern c" head gives token j the key (sqrt 2 L_j, 0) and token i the query
    (c_i, 0): its scores are q_i . k_j / sqrt 2 = c_i L_j.
      block 1, head 0: pattern c = (1, 0, 1, 0);  head 2: pattern c = (2, 2, 2, 2);  heads 1, 3: zero q and k.
      block 2, head 3: pattern c = (1, 0, 1, 0);  heads 0, 1, 2: zero.
    """
    torch.manual_seed(0)
    net = VisionTransformer(patch_size=16, embed_dim=8, depth=2, num_heads=4, mlp_hidden=8).eval()
    tokens = hadamard_rows()
    levels = torch.tensor([0.0, 0.0, LN2, 2 * LN2])
    queries = {0: torch.zeros(4, 8), 1: torch.zeros(4, 8)}  # per block: token i's query in row i
    keys = {0: torch.zeros(4, 8), 1: torch.zeros(4, 8)}
    for block, head, c in ((0, 0, (1, 0, 1, 0)), (0, 2, (2, 2, 2, 2)), (1, 3, (1, 0, 1, 0))):
        keys[block][:, 2 * head] = math.sqrt(2.0) * levels
        queries[block][:, 2 * head] = torch.tensor(c, dtype=torch.float32)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        for c in range(8):
            net.patch_embed.proj.weight[c, 0, 0, c] = 1.0
        for block in (0, 1):
            blk = net.blocks[block]
            blk.norm1.weight.fill_(math.sqrt(1.0 + LN_EPS))
            blk.attn.qkv.weight[0:8] = queries[block].T @ tokens / 8
            blk.attn.qkv.weight[8:16] = keys[block].T @ tokens / 8
    x = torch.zeros(1, 3, 32, 32)
    for i in range(4):
        r, s = divmod(i, 2)
        x[0, 0, 16 * r, 16 * s : 16 * s + 8] = tokens[i]
    return net, x


def test_hand_made_network_reading_equals_the_hand_computation():
    net, x = hand_network()
    # By hand. Pattern c = 1: scores (0, 0, ln 2, 2 ln 2), weights (1, 1, 2, 4) / 8,
    #   H = 2 (1/8) ln 8 + (1/4) ln 4 + (1/2) ln 2 = (3/4 + 1/2 + 1/2) ln 2 = 1.75 ln 2; e^H / 4 = 2^1.75 / 4 = 2^-0.25.
    # c = 0: uniform, H = ln 4 = 2 ln 2, e^H / 4 = 1.
    # c = 2: scores (0, 0, 2 ln 2, 4 ln 2), weights (1, 1, 4, 16) / 22,
    #   H = ln 22 - (4 * 2 ln 2 + 16 * 4 ln 2) / 22 = ln 22 - (36 / 11) ln 2; e^H / 4 = (22 / 4) 2^(-36/11).
    # Pattern (1, 0, 1, 0) averages rows c = 1 and c = 0: H = 1.875 ln 2, e^H / 4 = (2^-0.25 + 1) / 2.
    alternating = (1.875 * LN2, (2**-0.25 + 1) / 2)
    uniform = (2 * LN2, 1.0)
    twos = (math.log(22) - 36 / 11 * LN2, 22 / 4 * 2 ** (-36 / 11))
    expected = [[alternating, uniform, twos, uniform], [uniform, uniform, uniform, alternating]]
    with torch.inference_mode():
        tokens, reading = tokens_and_spread(net, x)
    assert reading.entropy.shape == reading.spread.shape == (1, 2, 4)
    assert reading.entropy.dtype == reading.spread.dtype == torch.float32
    for block in range(2):
        for head in range(4):
            h, s = expected[block][head]
            assert reading.entropy[0, block, head].item() == pytest.approx(h, abs=2e-6), (block, head)
            assert reading.spread[0, block, head].item() == pytest.approx(s, abs=2e-6), (block, head)
    assert torch.allclose(tokens[0], hadamard_rows(), atol=1e-6)  # the blocks passed the tokens on
    # the rows themselves, for patch 0 (c = 1 in block 1's head 0, c = 2 in its head 2)
    rows = attention_rows(net, x, patch=0, block=0)
    assert torch.allclose(rows[0, 0], torch.tensor([1 / 8, 1 / 8, 1 / 4, 1 / 2]), atol=1e-6)
    assert torch.allclose(rows[0, 1], torch.full((4,), 0.25), atol=1e-6)
    assert torch.allclose(rows[0, 2], torch.tensor([1.0, 1.0, 4.0, 16.0]) / 22, atol=1e-6)
    assert torch.allclose(attention_rows(net, x, patch=1)[0, 3], torch.full((4,), 0.25), atol=1e-6)  # c = 0
    with pytest.raises(ReadingError, match="patch 4 out of range for 4 patches"):
        attention_rows(net, x, patch=4)
    with pytest.raises(ReadingError, match="block 2 out of range for 2 blocks"):
        attention_rows(net, x, patch=0, block=2)


# ------------------------------------------------------------------------ parity with per-head loops on real photos


def reference_reading(net: VisionTransformer, x: torch.Tensor, patch: int) -> tuple[np.ndarray, np.ndarray,
                                                                                     np.ndarray]:
    """The reading of a ViT-S/16 written out in float64: DINO's block, then per image and head the weights
    softmax(q k^T / 8), H = -sum a ln a per row, and the means of H and e^H / N. Returns (entropy, spread) (B, 12, 6)
    and block 12's row of `patch` (B, 6, N)."""
    sd = {k: v.double() for k, v in net.state_dict().items()}
    x = x.double()
    batch = x.shape[0]

    def layer_norm(z, name):
        mean = z.mean(-1, keepdim=True)
        var = ((z - mean) ** 2).mean(-1, keepdim=True)
        return (z - mean) / torch.sqrt(var + 1e-6) * sd[name + ".weight"] + sd[name + ".bias"]

    def linear(z, name):
        return z @ sd[name + ".weight"].T + sd[name + ".bias"]

    z = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=16)
    z = z.flatten(2).transpose(1, 2) + sd["pos_embed"]
    n = z.shape[1]
    entropy = np.zeros((batch, 12, 6))
    spread = np.zeros((batch, 12, 6))
    last_rows = np.zeros((batch, 6, n))
    for b in range(12):
        p = f"blocks.{b}."
        qkv = linear(layer_norm(z, p + "norm1"), p + "attn.qkv")
        heads = torch.zeros(batch, n, 384, dtype=torch.float64)
        for img in range(batch):
            for h in range(6):
                q = qkv[img, :, 64 * h : 64 * (h + 1)]
                k = qkv[img, :, 384 + 64 * h : 384 + 64 * (h + 1)]
                v = qkv[img, :, 768 + 64 * h : 768 + 64 * (h + 1)]
                scores = q @ k.T / 8.0
                a = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
                a = a / a.sum(dim=1, keepdim=True)
                h_rows = -torch.where(a > 0, a * torch.log(a), torch.zeros_like(a)).sum(dim=1)
                entropy[img, b, h] = h_rows.mean().item()
                spread[img, b, h] = (torch.exp(h_rows) / n).mean().item()
                if b == 11:
                    last_rows[img, h] = a[patch].numpy()
                heads[img, :, 64 * h : 64 * (h + 1)] = a @ v
        z = z + linear(heads, p + "attn.proj")
        hidden = linear(layer_norm(z, p + "norm2"), p + "mlp.fc1")
        z = z + linear(0.5 * hidden * (1 + torch.erf(hidden / math.sqrt(2.0))), p + "mlp.fc2")
    return entropy, spread, last_rows


def sharpened(seeded: VisionTransformer) -> VisionTransformer:
    """A copy of the seeded ViT-S/16 with its q and k weights x 4: a random network's attention is nearly uniform
    (H within 0.02 of ln 196), too close to the bound to show a wrong scale or axis; x 4 spreads H over 3..4.5 nats
    and e^H / N over about 25..45%, the range of trained networks."""
    net = copy.deepcopy(seeded)
    with torch.no_grad():
        for block in net.blocks:
            block.attn.qkv.weight[: 2 * 384] *= 4.0
    return net


@pytest.mark.coco
@pytest.mark.slow
def test_reading_equals_independent_per_head_loops_on_two_real_photos(coco_mini, seeded_backbone):
    from evaluate.datasets.coco import CocoDataset
    from evaluate.pixels.images import tokens224_input

    dataset = CocoDataset(coco_mini / "images", coco_mini / "annotations.json")
    x = torch.stack([tokens224_input(dataset.open_image(i)) for i in dataset.image_ids[:2]])
    net = sharpened(seeded_backbone)
    centre = 7 * 14 + 7
    with torch.inference_mode():
        _, reading = tokens_and_spread(net, x)
    entropy, spread, rows = reference_reading(net, x, centre)
    assert entropy.min() < 3.5 and entropy.max() > 4.0  # the rows are neither near one-hot nor near uniform
    assert np.abs(reading.entropy.numpy() - entropy).max() <= 1e-5
    assert np.abs(reading.spread.numpy() - spread).max() <= 1e-5
    assert np.abs(attention_rows(net, x, patch=centre).numpy() - rows).max() <= 1e-5
    # the two images differ, and so do the heads
    assert np.abs(entropy[0] - entropy[1]).max() > 0.05 and np.ptp(entropy[0, -1]) > 0.05


# ------------------------------------------------------------------------------------- the family, tokens, XCiT


def test_layerscale_with_every_gamma_one_reads_exactly_as_plain(seeded_backbone):
    plain = seeded_backbone
    layerscale = vit_small_layerscale().eval()
    state = dict(plain.state_dict())
    for name, value in layerscale.state_dict().items():
        if ".gamma_" in name:
            state[name] = torch.ones_like(value)
    layerscale.load_state_dict(state)
    x = seeded_images(2)
    with torch.inference_mode():
        tokens_p, plain_reading = tokens_and_spread(plain, x)
        tokens_l, layerscale_reading = tokens_and_spread(layerscale, x)
    assert torch.equal(tokens_p, tokens_l)
    assert torch.equal(plain_reading.entropy, layerscale_reading.entropy)
    assert torch.equal(plain_reading.spread, layerscale_reading.spread)


def test_augvit_reading_comes_from_its_own_fused_queries_and_keys(seeded_backbone):
    """Aug-ViT computes q, k, v inside its fused product: with the plain weights and zero shortcuts in a T = 1 mode
    (no GELU, no 3/4) it is plain ViT up to the fused product's rounding, and so is its reading."""
    plain = seeded_backbone
    aug = augvit_small("circulant").eval()
    state = dict(plain.state_dict())
    for name, value in aug.state_dict().items():
        if ".augs" in name:
            state[name] = torch.zeros_like(value)
    aug.load_state_dict(state)
    x = seeded_images(2, seed=3)
    with torch.inference_mode():
        _, plain_reading = tokens_and_spread(plain, x)
        _, aug_reading = tokens_and_spread(aug, x)
    assert aug_reading.entropy.shape == (2, 12, 6) and not torch.equal(aug_reading.entropy, plain_reading.entropy)
    assert torch.allclose(plain_reading.entropy, aug_reading.entropy, atol=1e-5, rtol=0)
    assert torch.allclose(plain_reading.spread, aug_reading.spread, atol=1e-5, rtol=0)


@pytest.mark.parametrize("build", [vit_small, vit_small_layerscale, augvit_small],
                         ids=["plain", "layerscale", "augvit"])
def test_tokens_with_the_reading_are_bit_identical_to_tokens_without(build):
    torch.manual_seed(1)
    net = build().eval()
    x = seeded_images(2, seed=5)
    with torch.inference_mode():
        alone = net.tokens(x)
        tokens, reading = tokens_and_spread(net, x)
        again = net.tokens(x)  # the taps are gone afterwards
    assert torch.equal(alone, tokens) and torch.equal(alone, again)
    assert all(block.attn.tap is None for block in net.blocks)
    assert reading.entropy.shape == reading.spread.shape == (2, 12, 6)
    assert bool((reading.entropy <= math.log(16) + 1e-5).all()) and bool((reading.spread <= 1 + 1e-6).all())


def test_xcit_reports_the_reading_absent(seeded_backbone):
    torch.manual_seed(0)
    net = xcit_small_12_p16().eval()
    x = seeded_images(2, side=32)
    assert not gives_attention_spread(net)
    with torch.inference_mode():
        tokens, reading = tokens_and_spread(net, x)
        assert reading is None
        assert torch.equal(tokens, net.tokens(x))
    with pytest.raises(ReadingError, match="XCiT has no attention over patches"):
        attention_rows(net, x, patch=0)
    assert gives_attention_spread(seeded_backbone)


# ---------------------------------------------------------------------------------- per checkpoint: measures, tables


def reading_arrays() -> tuple[list[int], np.ndarray, np.ndarray]:
    """Five images, 3 blocks, 2 heads, with values to check by hand."""
    gen = np.random.default_rng(4)
    entropy = gen.uniform(1.0, 5.0, size=(5, 3, 2)).astype(np.float32)
    spread = gen.uniform(0.1, 0.9, size=(5, 3, 2)).astype(np.float32)
    return [40, 10, 30, 20, 50], entropy, spread


def test_measures_are_the_last_blocks_means_with_intervals_over_images():
    ids, entropy, spread = reading_arrays()
    resamples, seed = 2000, 7
    measures = {m["measure"]: m for m in spread_measures(ids, entropy, spread, resamples=resamples, seed=seed)}
    assert list(measures) == [SPREAD, ENTROPY]
    per_image_spread = [(float(spread[i, 2, 0]) + float(spread[i, 2, 1])) / 2 for i in range(5)]
    per_image_entropy = [(float(entropy[i, 2, 0]) + float(entropy[i, 2, 1])) / 2 for i in range(5)]
    # an independent bootstrap: resample r draws rng.integers(0, n, size=n), in order; percentiles 2.5 and 97.5
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, 5, size=5) for _ in range(resamples)]
    for name, per_image, unit in ((SPREAD, per_image_spread, 100.0), (ENTROPY, per_image_entropy, 1.0)):
        m = measures[name]
        means = [sum(per_image[j] for j in d) / 5 for d in draws]
        lo, hi = np.percentile(means, [2.5, 97.5])
        assert m["value"] == pytest.approx(unit * sum(per_image) / 5, rel=1e-12)
        assert m["ci_low"] == pytest.approx(unit * lo, rel=1e-12)
        assert m["ci_high"] == pytest.approx(unit * hi, rel=1e-12)
        assert m["image_ids"] == ids and m["per_image"] == pytest.approx(per_image, rel=1e-12)
        assert m["n_images"] == 5 and m["n_left_out"] == 0 and m["reducer"] == "mean"
        assert measure_scale(m) == unit
    assert "scale" not in measures[SPREAD]  # a percentage, like every other measure
    assert measures[ENTROPY]["scale"] == 1.0


def test_tables_are_means_over_images_per_block_and_head():
    ids, entropy, spread = reading_arrays()
    measures, tables = spread_summary(ids, entropy, spread, resamples=100, seed=0)
    assert [m["measure"] for m in measures] == [SPREAD, ENTROPY]
    assert tables["blocks"] == 3 and tables["heads"] == 2
    for b in range(3):
        for h in range(2):
            assert tables[ENTROPY][b][h] == pytest.approx(sum(float(entropy[i, b, h]) for i in range(5)) / 5)
            assert tables[SPREAD][b][h] == pytest.approx(100 * sum(float(spread[i, b, h]) for i in range(5)) / 5)
    # the block-12 measure is the mean of the table's last row
    assert measures[0]["value"] == pytest.approx(sum(tables[SPREAD][-1]) / 2, rel=1e-9)
    assert measures[1]["value"] == pytest.approx(sum(tables[ENTROPY][-1]) / 2, rel=1e-9)
    assert spread_tables(entropy, spread).entropy.dtype == np.float64


def test_bad_reading_arrays_are_refused_naming_where():
    ids, entropy, spread = reading_arrays()
    boot = {"resamples": 10, "seed": 0, "where": "results/features/c/d/000"}
    with pytest.raises(AttentionError, match=r"results/features/c/d/000: .* for 4 image ids"):
        spread_measures(ids[:4], entropy, spread, **boot)
    with pytest.raises(AttentionError, match="must both be"):
        spread_measures(ids, entropy, spread[:, :2], **boot)
    bad = spread.copy()
    bad[2, 1, 0] = np.nan
    with pytest.raises(AttentionError, match="non-finite"):
        spread_measures(ids, entropy, bad, **boot)
    bad = spread.copy()
    bad[0, 0, 0] = 1.5
    with pytest.raises(AttentionError, match="out of range"):
        spread_measures(ids, entropy, bad, **boot)


def test_percent_measures_keep_their_entries_unchanged():
    """An existing measure's entry gains no field (its records stay byte-identical) and reads scale PERCENT."""
    entry = make_measure("jaccard", image_ids=[1, 2], per_image=[0.25, 0.75], reducer="mean", resamples=10, seed=0)
    assert "scale" not in entry and measure_scale(entry) == PERCENT and entry["value"] == pytest.approx(50.0)


# ------------------------------------------------------------------------- other networks' geometry (§11, §13)


def test_a_two_block_patch8_network_reads_784_patches_and_its_heads():
    """ViT with 8 x 8 patches, 128 wide (2 heads of 64), 2 blocks: at 224 px its rows run over 784 patches and sum
    to 1; the default query is the 28 x 28 grid's centre (406), not the seed's 105."""
    from evaluate.readings.attention_spread import query_patch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = VisionTransformer(patch_size=8, embed_dim=128, depth=2, num_heads=2).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        tokens, reading = tokens_and_spread(net, x)
    assert tokens.shape == (1, 784, 128) and reading.entropy.shape == reading.spread.shape == (1, 2, 2)
    assert (reading.entropy <= math.log(784) + 1e-5).all() and (reading.spread >= 1 / 784 - 1e-7).all()
    rows = attention_rows(net, x, patch=None)
    assert rows.shape == (1, 2, 784)
    assert torch.allclose(rows.sum(-1), torch.ones(1, 2), atol=1e-5)
    assert torch.equal(rows, attention_rows(net, x, patch=406))  # row 14, column 14
    assert query_patch(None, 784, (224, 224)) == 14 * 28 + 14
    assert query_patch(None, 196, (224, 224)) == 105 and query_patch(None, 256, (224, 224)) == 8 * 16 + 8
    with pytest.raises(ReadingError, match=r"patch 784 out of range for 784 patches \(the 28 x 28 grid of 8-px"):
        attention_rows(net, x, patch=784)


def test_the_per_patch_figure_draws_a_patch8_grid(tmp_path):
    from PIL import Image

    from evaluate.outputs.attention_figures import patch_rows_figure

    rows = np.full((2, 784), 1 / 784, np.float32)
    out = patch_rows_figure(np.zeros((224, 224, 3), np.uint8), rows, 406, "p 8", tmp_path / "rows.png")
    assert Image.open(out).size[0] > 0
    with pytest.raises(Exception, match="do not fit"):
        patch_rows_figure(np.zeros((224, 224, 3), np.uint8), rows[:, :783], 0, "bad", tmp_path / "bad.png")
