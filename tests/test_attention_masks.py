"""Class-token attention masks against VOC objects (DINO's Figure 4 table; DESIGN 15, docs/design.md §17).

Pinned here: the 60% rule of `visualize_attention.py` (a cumulative sum of exactly 0.4 is dropped, in float32 and
float64; ties by patch index); the score of an image by hand and against DESIGN 15's text written out pixel by pixel
(`voc_layout.design_jaccards`); the reading against DINO's `get_last_selfattention` written out here from a seeded
network's state dict (class token, four registers, LayerScale); the whole scoring on a VOC folder written from real
coco2017-mini photos; which networks have no such reading, by name.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from voc_layout import design_jaccards, design_mask, write_voc_from_coco

from evaluate.attention import AttentionError
from evaluate.attention.masks import (
    FIGURE_IMAGES,
    HEADS_MEASURE,
    MEASURE,
    MaskTally,
    figure_truths,
    mask_rows,
    masks_from_rows,
    mass_masks,
    score_image,
    score_set,
)
from evaluate.datasets.voc_segmentation import VocSegmentation
from evaluate.networks import vit
from evaluate.readings.cls_attention import (
    NO_CLASS_TOKEN,
    NO_TOKEN_ATTENTION,
    ClassAttentionError,
    class_token_attention,
    network_input,
    not_applicable,
    read_class_attention,
)
from evaluate.pixels.geometry import Geometry

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
LN_EPS = 1e-6
REGISTERS = 4
BOOT = {"resamples": 200, "seed": 0}

# ----------------------------------------------------------------------------------------------------- the 60% rule


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_cumulative_sum_of_exactly_point_four_is_dropped(dtype):
    # sorted ascending: .05, .1, .25 (c = 0.4: not above 1 - 0.6), .6 (c = 1): only the .6 is kept
    attention = np.array([[[0.1, 0.6], [0.05, 0.25]]], dtype=dtype)
    masks = mass_masks(attention)
    assert masks.dtype == bool and masks.tolist() == [[[False, True], [False, False]]]
    heads = np.stack([attention[0], attention[0].T, attention[0][::-1]])
    assert mass_masks(heads).tolist() == [[[False, True], [False, False]], [[False, False], [True, False]],
                                          [[False, False], [False, True]]]


def test_equal_values_are_taken_in_patch_order():
    # four equal values: c = .25, .5, .75, 1 in patch order, so the first patch alone falls under 0.4
    assert mass_masks(np.full((1, 2, 2), 0.25)).tolist() == [[[False, True], [True, True]]]
    # 0.1 twice then 0.8: c = .1, .2, 1; then ties at the top: (0.3, 0.3, 0.3, 0.1) -> c .1, .4 (dropped), .7, 1
    assert mass_masks(np.array([[[0.3, 0.3], [0.3, 0.1]]])).tolist() == [[[False, True], [True, False]]]
    # 64 equal values: c = k / 64 for the k-th patch (1-based, row-major); 26 / 64 is the first above 0.4
    for dtype in (np.float32, np.float64):
        assert np.flatnonzero(mass_masks(np.ones((1, 8, 8), dtype=dtype))).tolist() == list(range(25, 64))
    # many ties among three levels: the kept ones of the level that crosses 0.4 are its last patches
    levels = np.random.default_rng(5).integers(1, 4, (3, 10, 20)).astype(np.float64)
    masks = mass_masks(levels)
    for h in range(3):
        assert masks[h].ravel().tolist() == design_mask(levels[h].ravel().tolist())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_masks_equal_the_rule_written_as_a_loop(dtype):
    rng = np.random.default_rng(7)
    attention = rng.dirichlet(np.full(12 * 17, 0.3), size=6).astype(dtype).reshape(6, 12, 17)
    masks = mass_masks(attention)
    for h in range(6):
        assert masks[h].ravel().tolist() == design_mask(attention[h].astype(np.float64).ravel().tolist())
        kept = attention[h][masks[h]]
        assert kept.sum() / attention[h].sum() >= 0.6 - 1e-6  # at least 60% of the mass ...
        assert (kept.sum() - kept.min()) / attention[h].sum() < 0.6  # ... by the fewest largest values


def test_mass_masks_refuse_what_is_not_a_float_head_grid():
    with pytest.raises(AttentionError, match="heads, gh, gw"):
        mass_masks(np.ones((3, 4)))
    with pytest.raises(AttentionError, match="float"):
        mass_masks(np.ones((1, 2, 2), dtype=np.int64))


# ----------------------------------------------------------------------------------------------------- the score


def hand_image() -> tuple[np.ndarray, np.ndarray]:
    """(attention (3, 2, 3), objects (5, 7)) at p = 2: the crop keeps 4 x 6 pixels; object 3 lies in the cut strip."""
    objects = np.zeros((5, 7), dtype=np.uint8)
    objects[0:2, 0:2] = 1  # patch (0, 0), all four pixels
    objects[0, 2] = 1  # and one pixel of patch (0, 1)
    objects[2:4, 4:6] = 2
    objects[3, 5] = 255  # object 2: three pixels of patch (1, 2), one void
    objects[1, 3] = 255
    objects[4, :] = 3  # the bottom row, cropped away
    objects[:, 6] = 3  # and the right column
    head0 = np.full((2, 3), 0.06)
    head0[0, 0] = 0.7  # keeps patch (0, 0) alone
    head1 = np.full((2, 3), 0.25 / 3)
    head1[0, 0] = head1[0, 1] = head1[1, 2] = 0.25  # keeps (0, 0), (0, 1), (1, 2)
    return np.stack([head0, head1, head0]).astype(np.float32), objects


def test_an_image_scores_by_hand():
    attention, objects = hand_image()
    score = score_image(mass_masks(attention), objects, patch=2, object_class={1: 15, 2: 15, 3: 9})
    assert score.objects == [1, 2] and score.classes == [15, 15] and score.grid == (2, 3)
    # object 1 (5 px): head 0's mask (4 px) holds 4 of them; head 1's (12 px) all 5
    # object 2 (3 px): head 0 none of them; head 1 all 3. Void and background are counted in every union.
    want = np.array([[4 / 5, 5 / 12, 4 / 5], [0.0, 3 / 12, 0.0]])
    assert np.allclose(score.jaccard, want, rtol=0, atol=1e-15)
    assert score.best_head.tolist() == [0, 1]  # head 2 ties head 0 on object 1: the first best head
    assert score.best == pytest.approx((4 / 5 + 3 / 12) / 2, abs=1e-15)
    assert score.heads_mean == pytest.approx(((4 / 5 + 5 / 12 + 4 / 5) / 3 + (3 / 12) / 3) / 2, abs=1e-15)
    assert np.allclose(score.per_head, [2 / 5, (5 / 12 + 3 / 12) / 2, 2 / 5], atol=1e-15)


def test_an_image_without_an_object_in_the_crop_is_left_out_and_counted():
    attention, objects = hand_image()
    empty = objects.copy()
    empty[(empty == 1) | (empty == 2)] = 0  # object 3 remains, in the cut strip only
    tally = MaskTally()
    assert tally.add(1, mass_masks(attention), objects, 2) is not None
    assert tally.add(2, mass_masks(attention), empty, 2) is None
    jaccard, heads = tally.measure_entries(**BOOT)
    assert jaccard["measure"] == MEASURE and heads["measure"] == HEADS_MEASURE
    assert jaccard["image_ids"] == [1] and jaccard["n_left_out"] == 1 == heads["n_left_out"]
    assert jaccard["value"] == pytest.approx(100 * (4 / 5 + 3 / 12) / 2, abs=1e-12)
    assert tally.record_fields()["left_out"] == [2]


def test_a_label_map_smaller_than_the_crop_is_refused():
    attention, objects = hand_image()
    with pytest.raises(AttentionError, match="smaller than the reading's 6 x 4 crop"):
        score_image(mass_masks(attention), objects[:3], 2)


def test_grid_masks_survive_their_text_form():
    masks = np.random.default_rng(0).random((3, 5, 7)) > 0.5
    rows = mask_rows(masks)
    assert len(rows) == 3 and rows[0][0] == "".join("1" if v else "0" for v in masks[0, 0])
    assert np.array_equal(masks_from_rows(rows), masks)


# ----------------------------------------------------------------------------------------------------- the reading


def seeded_network(registers: int = REGISTERS, seed: int = 0) -> vit.VisionTransformer:
    """A small DINOv2-form ViT (patch 16, 128 wide: 2 heads, 2 LayerScale blocks, class token, registers, final
    norm) with values that make its attention uneven: unit-variance linears, LayerNorm gains near 1, LayerScale near
    0.5, a position table of std 0.5."""
    model = vit.vision_transformer(Geometry(16, 128, 2, registers), "layerscale", pos_grid=14, class_token=True,
                                   registers=registers, final_norm=True)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            if name.endswith(("norm1.weight", "norm2.weight")) or name == "norm.weight":
                param.copy_(1 + 0.2 * noise)
            elif name.endswith(("gamma_1", "gamma_2")):
                param.copy_(0.5 + 0.1 * noise)
            elif name.endswith(".weight"):
                param.copy_(noise / math.sqrt(math.prod(param.shape[1:])))
            elif name.endswith(".bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.5 * noise)
    return model.eval()


def layer_norm(x: torch.Tensor, state: dict, name: str) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + LN_EPS) * state[name + ".weight"] + state[name + ".bias"]


def dino_last_selfattention(state: dict, pixels: np.ndarray, patch: int) -> torch.Tensor:
    """DINO's `get_last_selfattention(img)[0, :, 0, 1 + R:]` written out from a state dict: the image (H, W, 3)
    uint8 cropped at the bottom and right to multiples of p, / 255, mean and std; the table resampled by DINO's
    rule; class token plus its row, registers, patches; pre-norm LayerScale blocks; softmax(q k^T / sqrt(d)).
    Returns (heads, gh, gw) float32."""
    height, width = pixels.shape[0] // patch * patch, pixels.shape[1] // patch * patch
    x = torch.from_numpy(((pixels[:height, :width] / np.float32(255) - MEAN) / STD).astype(np.float32))
    x = x.permute(2, 0, 1)[None]
    dim = state["cls_token"].shape[-1]
    heads = dim // 64
    z = F.conv2d(x, state["patch_embed.proj.weight"], state["patch_embed.proj.bias"], stride=patch)
    gh, gw = z.shape[-2:]
    g0 = math.isqrt(state["pos_embed"].shape[1] - 1)
    table = state["pos_embed"][:, 1:].reshape(1, g0, g0, dim).permute(0, 3, 1, 2)
    table = F.interpolate(table, scale_factor=((gh + 0.1) / g0, (gw + 0.1) / g0), mode="bicubic", align_corners=False)
    z = z.flatten(2).transpose(1, 2) + table.permute(0, 2, 3, 1).reshape(1, gh * gw, dim)
    front = [state["cls_token"] + state["pos_embed"][:, :1]]
    if "register_tokens" in state:
        front.append(state["register_tokens"])
    z = torch.cat([*front, z], dim=1)
    extra, n = z.shape[1] - gh * gw, z.shape[1]
    depth = 1 + max(int(key.split(".")[1]) for key in state if key.startswith("blocks."))
    for i in range(depth):
        p = f"blocks.{i}."
        qkv = layer_norm(z, state, p + "norm1") @ state[p + "attn.qkv.weight"].T + state[p + "attn.qkv.bias"]
        q, k, v = qkv.reshape(1, n, 3, heads, 64).permute(2, 0, 3, 1, 4)
        attn = torch.softmax((q @ k.transpose(-2, -1)) * 64**-0.5, dim=-1)
        if i == depth - 1:
            return attn[0, :, 0, extra:].reshape(heads, gh, gw)
        branch = (attn @ v).transpose(1, 2).reshape(1, n, dim) @ state[p + "attn.proj.weight"].T
        z = z + (branch + state[p + "attn.proj.bias"]) * state[p + "gamma_1"]
        hidden = F.gelu(layer_norm(z, state, p + "norm2") @ state[p + "mlp.fc1.weight"].T + state[p + "mlp.fc1.bias"])
        z = z + (hidden @ state[p + "mlp.fc2.weight"].T + state[p + "mlp.fc2.bias"]) * state[p + "gamma_2"]
    raise AssertionError("no block")


@pytest.fixture(scope="module")
def voc_root(coco_mini, tmp_path_factory):
    root = tmp_path_factory.mktemp("voc") / "VOC2012"
    write_voc_from_coco(coco_mini, root, 5)
    return root


@pytest.fixture(scope="module")
def read_set(voc_root):
    """(the VOC split, [(image id, patch, class-token attention (heads, gh, gw))]) of the seeded network, read once
    for the tests that score it."""
    model = seeded_network()
    dataset = VocSegmentation(voc_root)
    return dataset, [(i, 16, read_class_attention(model, dataset.open_image(i)).attention) for i in dataset.image_ids]


def test_the_input_is_the_image_at_its_own_size_cropped_to_patch_multiples():
    from PIL import Image

    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (37, 50, 3), dtype=np.uint8)
    x = network_input(Image.fromarray(pixels), 16)
    want = (pixels[:32, :48] / np.float32(255) - MEAN) / STD
    assert tuple(x.shape) == (3, 32, 48) and x.dtype == torch.float32
    assert np.allclose(x.permute(1, 2, 0).numpy(), want, atol=1e-6)
    with pytest.raises(ClassAttentionError, match="holds no 16-px patch"):
        network_input(Image.fromarray(pixels[:15]), 16)


@pytest.mark.parametrize("registers", [0, REGISTERS])
def test_the_reading_is_dinos_last_selfattention_of_the_class_token(voc_root, registers):
    model = seeded_network(registers)
    state = {k: v.detach() for k, v in model.state_dict().items()}
    dataset = VocSegmentation(voc_root)
    for image_id in dataset.image_ids[:2]:
        img = dataset.open_image(image_id)
        reading = read_class_attention(model, img)
        want = dino_last_selfattention(state, np.asarray(img), 16).numpy()
        assert reading.size == (img.height, img.width) and reading.grid == (img.height // 16, img.width // 16)
        assert reading.attention.shape == (2, *reading.grid) and reading.attention.dtype == np.float32
        assert np.allclose(reading.attention, want, rtol=1e-4, atol=1e-7)
        # a softmax over every row, its patch columns kept: the class and register columns hold the rest
        sums = reading.attention.reshape(2, -1).sum(axis=1)
        assert np.all(sums < 1 - 1e-4) and np.all(sums > 0)


def test_the_scores_equal_design_15_written_out_pixel_by_pixel(read_set):
    dataset, readings = read_set
    measures, fields = score_set(dataset, readings, sealed=False, **BOOT)
    best, mean_heads, per_head = [], [], []
    for image_id, _, attention in readings:
        labels = dataset.labels(image_id)
        ids, jaccard = design_jaccards(attention, labels.objects, 16)
        got = fields["images"][str(image_id)]
        assert got["objects"] == ids and got["grid"] == list(attention.shape[1:])
        assert np.allclose(got["jaccard"], jaccard, rtol=0, atol=1e-12)
        assert got["best_head"] == [int(np.argmax(row)) for row in jaccard]
        assert got["classes"] == [labels.class_of[o] for o in ids]
        best.append(jaccard.max(axis=1).mean())
        mean_heads.append(jaccard.mean(axis=1).mean())
        per_head.append(jaccard.mean(axis=0))
    values = {m["measure"]: m for m in measures}
    assert values[MEASURE]["value"] == pytest.approx(100 * np.mean(best), abs=1e-9)
    assert values[MEASURE]["per_image"] == pytest.approx(best, abs=1e-12)
    assert values[HEADS_MEASURE]["value"] == pytest.approx(100 * np.mean(mean_heads), abs=1e-9)
    assert values[MEASURE]["image_ids"] == dataset.image_ids and values[MEASURE]["n_left_out"] == 0
    assert values[MEASURE]["ci_low"] <= values[MEASURE]["value"] <= values[MEASURE]["ci_high"]
    assert fields["head_jaccard"] == pytest.approx(list(100 * np.mean(per_head, axis=0)), abs=1e-9)
    assert 0 < min(best) and max(best) < 1  # a seeded network finds the objects in part
    assert fields["mass"] == 0.6 and fields["names"] == {str(i): dataset.name(i) for i in dataset.image_ids}


def test_the_class_table_averages_each_objects_best_head(read_set):
    dataset, readings = read_set
    _, fields = score_set(dataset, readings, sealed=False, **BOOT)
    by_class: dict[int, list[float]] = {}
    for image in fields["images"].values():
        for cls, row in zip(image["classes"], image["jaccard"]):
            by_class.setdefault(cls, []).append(max(row))
    assert set(fields["class_jaccard"]) == {str(c) for c in by_class}
    for cls, values in by_class.items():
        assert fields["class_jaccard"][str(cls)] == {"value": pytest.approx(100 * np.mean(values)),
                                                     "objects": len(values)}


def test_the_record_keeps_the_first_images_for_the_figures_and_a_sealed_set_no_truth(read_set):
    dataset, readings = read_set
    _, open_fields = score_set(dataset, readings, sealed=False, **BOOT)
    _, sealed_fields = score_set(dataset, readings, sealed=True, **BOOT)
    assert len(open_fields["figure_images"]) == FIGURE_IMAGES == len(sealed_fields["figure_images"])
    for k, entry in enumerate(open_fields["figure_images"]):
        image_id, _, attention = readings[k]
        assert entry["name"] == dataset.name(image_id) and entry["image"] == str(dataset.image_path(image_id))
        assert np.array_equal(masks_from_rows(entry["masks"]), mass_masks(attention))
        objects = dataset.labels(image_id).objects
        gh, gw = attention.shape[1:]
        truths = figure_truths(entry)
        assert sorted(truths) == entry["objects"]
        for object_id, truth in truths.items():
            assert np.array_equal(truth, objects[: 16 * gh, : 16 * gw] == object_id)
        assert "truth_rle" not in sealed_fields["figure_images"][k]
        assert figure_truths(sealed_fields["figure_images"][k]) is None
        assert sealed_fields["figure_images"][k]["masks"] == entry["masks"]


# ----------------------------------------------------------------------------------------------------- applicability


def test_a_selfpatch_backbone_and_xcit_have_no_reading_said_by_name(tmp_path):
    from evaluate.networks.checkpoints import load_backbone
    from evaluate.networks.registry import full_form
    from evaluate.networks.xcit import xcit_small_12_p16

    torch.manual_seed(0)
    backbone = vit.vit_small().state_dict()
    torch.save(backbone, tmp_path / "selfpatch.pth")
    torch.save(full_form(backbone, layout="dino"), tmp_path / "dino.pth")
    selfpatch = load_backbone(tmp_path / "selfpatch.pth", which="teacher", form="released").model
    dino = load_backbone(tmp_path / "dino.pth", which="teacher", form="released").model
    assert not_applicable(selfpatch) == NO_CLASS_TOKEN == "SelfPatch backbone: no class token"
    assert not_applicable(xcit_small_12_p16()) == NO_TOKEN_ATTENTION and NO_TOKEN_ATTENTION.startswith("XCiT: ")
    assert not_applicable(dino) is None and not_applicable(seeded_network()) is None
    x = torch.zeros(1, 3, 32, 48)
    with pytest.raises(ClassAttentionError, match="SelfPatch backbone: no class token"):
        class_token_attention(selfpatch, x)
    assert class_token_attention(dino, x).shape == (1, 6, 2, 3)


def test_the_published_rows_are_dinos_figure_4_table():
    from evaluate.datasets.benchmarks import benchmark_size, published_rows

    assert benchmark_size("voc12-seg") == 1449
    for architecture, want in (("vit-s16", {"Random": 22.0, "Supervised": 27.3, "DINO": 45.9}),
                               ("vit-s8", {"Random": 21.8, "Supervised": 23.7, "DINO": 44.7})):
        rows = published_rows(architecture, "voc12-seg")
        assert {r.method: r.value for r in rows} == want and {r.measure for r in rows} == {MEASURE}
        assert all("Figure 4" in r.source for r in rows)
