"""Video label propagation against an independent implementation of DESIGN §10 read literally (plain loops), the
neighbourhood, ties, the output step, and every architecture of the registry end to end (docs/design.md §12)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image
from videos import moving_shapes, small_davis

from evaluate import ConfigError, EvaluationError
from evaluate.datasets.davis import DavisDataset, VideoSequence, read_mask
from evaluate.demo.videos import write_sequence
from evaluate.networks.registry import REGISTRY, SEED_ARCHITECTURES
from evaluate.pixels.geometry import Geometry
from evaluate.video import propagate
from evaluate.video.measures import jaccard
from evaluate.video.propagate import (
    PropagationError,
    PropagationSettings,
    Propagator,
    labels_from_soft,
    neighbourhood_window,
    one_hot,
    one_thread,
    propagate_sequence,
    tiles,
)

# ------------------------------------------------------------------------------------- the literal reference


def reference_soft_labels(features, first_ids, channels, grid, n_last, topk, radius, temperature):
    """DESIGN §10 read literally, one query at a time, in float64: features (T, N, D) of frames 0..T-1, first_ids
    (N,) frame 0's ids at patch resolution; returns the soft labels (N, C) of frames 1..T-1."""
    gh, gw = grid
    n = gh * gw

    def unit(f):
        return f / np.linalg.norm(f, axis=1, keepdims=True)

    first = (unit(features[0]), np.eye(channels)[first_ids])
    previous, out = [], []
    for f in features[1:]:
        query = unit(f)
        context = [first, *previous]
        soft = np.zeros((n, channels))
        for i in range(n):
            qr, qc = divmod(i, gw)
            weights, labels = [], []
            for feats, labs in context:
                for s in range(n):
                    sr, sc = divmod(s, gw)
                    if radius > 0 and (abs(sr - qr) > radius or abs(sc - qc) > radius):
                        continue
                    weights.append(math.exp(float(query[i] @ feats[s]) / temperature))
                    labels.append(labs[s])
            ranked = sorted(weights, reverse=True)
            kth = ranked[topk - 1] if len(ranked) >= topk else 0.0  # values below the k-th set to 0
            kept = [(w, lab) for w, lab in zip(weights, labels) if w >= kth]
            soft[i] = sum(w * lab for w, lab in kept) / sum(w for w, _ in kept)
        previous = [*previous, (query, soft)][-n_last:] if n_last else []
        out.append(soft)
    return out


def _bilinear_axis(n_in, n_out):
    src = np.maximum((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(int), n_in - 1)
    return lo, np.minimum(lo + 1, n_in - 1), src - lo


def reference_labels(soft, grid, size):
    """Soft labels (N, C) -> ids (H, W): bilinear x16 with half-pixel centres, min-max per channel with max > 0
    (constant -> 1), first argmax, then the pixel under each output centre, floor((i + 0.5) * in / out).
    Also returns the smallest gap between the best and the second-best channel over the pixels."""
    gh, gw = grid
    maps = soft.T.reshape(-1, gh, gw)
    r0, r1, fr = _bilinear_axis(gh, 16 * gh)
    c0, c1, fc = _bilinear_axis(gw, 16 * gw)
    rows = maps[:, r0] * (1 - fr)[None, :, None] + maps[:, r1] * fr[None, :, None]
    up = rows[:, :, c0] * (1 - fc) + rows[:, :, c1] * fc
    for c in range(up.shape[0]):
        if up[c].max() > 0:
            shifted = up[c] - up[c].min()
            up[c] = shifted / shifted.max() if shifted.max() > 0 else 1.0
    ranked = np.sort(up, axis=0)
    gap = float((ranked[-1] - ranked[-2]).min())
    ids = np.argmax(up, axis=0)
    h, w = size
    pick_r = ((2 * np.arange(h) + 1) * 16 * gh) // (2 * h)
    pick_c = ((2 * np.arange(w) + 1) * 16 * gw) // (2 * w)
    return ids[pick_r][:, pick_c], gap


def _settings(**kw):
    base = {"height": 480, "n_last_frames": 3, "topk": 5, "neighbourhood": 2, "temperature": 0.1}
    return PropagationSettings(**{**base, **kw})


def _run(features, first_ids, channels, grid, settings):
    prop = Propagator(torch.from_numpy(features[0]), one_hot(first_ids.reshape(grid), channels), grid, settings)
    return [prop.step(torch.from_numpy(f)).T.numpy() for f in features[1:]]


@pytest.mark.parametrize("tile", [4, propagate.TILE])
def test_propagation_equals_the_literal_reference_on_a_non_square_grid_with_three_objects(monkeypatch, tile):
    monkeypatch.setattr(propagate, "TILE", tile)  # 4: twelve blocks with clipped boxes; 16: one block per row band
    rng = np.random.default_rng(0)
    grid, frames, channels = (9, 13), 7, 4
    base = rng.standard_normal((grid[0] * grid[1], 24))
    features = np.stack([base + 0.6 * rng.standard_normal(base.shape) for _ in range(frames)]).astype(np.float32)
    first_ids = np.zeros(grid, int)
    first_ids[1:5, 2:6], first_ids[5:8, 7:12], first_ids[0:3, 9:13] = 1, 2, 3
    settings = _settings()
    ours = _run(features, first_ids.ravel(), channels, grid, settings)
    reference = reference_soft_labels(features.astype(np.float64), first_ids.ravel(), channels, grid,
                                      settings.n_last_frames, settings.topk, settings.neighbourhood,
                                      settings.temperature)
    size = (160, 192)  # stretch 144 -> 160 rows, shrink 208 -> 192 columns; no output centre on a pixel edge
    for t, (mine, theirs) in enumerate(zip(ours, reference)):
        np.testing.assert_allclose(mine, theirs, atol=2e-6)
        expected, gap = reference_labels(theirs, grid, size)
        assert gap > 1e-5, f"frame {t + 1}: a near tie (gap {gap:.1e}) would make the label comparison meaningless"
        labels = labels_from_soft(torch.from_numpy(mine.T.copy()), grid, size)
        assert labels.dtype == np.uint8 and np.array_equal(labels, expected), f"frame {t + 1}"
        assert set(np.unique(labels)) <= {0, 1, 2, 3}


@pytest.mark.parametrize("radius,n_last,topk", [(0, 2, 5), (1, 0, 5), (3, 5, 1), (1, 1, 30)])
def test_settings_edge_cases_equal_the_literal_reference(radius, n_last, topk):
    # radius 0: no window (DINO's code); n_last 0: frame 0 alone; topk 1; more weights asked than the window holds
    rng = np.random.default_rng(1)
    grid = (3, 5)
    features = rng.standard_normal((5, 15, 8)).astype(np.float32)
    first_ids = rng.integers(0, 3, 15)
    settings = _settings(neighbourhood=radius, n_last_frames=n_last, topk=topk, temperature=0.2)
    ours = _run(features, first_ids, 3, grid, settings)
    theirs = reference_soft_labels(features.astype(np.float64), first_ids, 3, grid, n_last, topk, radius, 0.2)
    for mine, ref in zip(ours, theirs):
        np.testing.assert_allclose(mine, ref, atol=2e-6)


def test_weights_that_tie_at_the_kth_are_all_kept():
    # tokens are axis vectors, so the cosines are exactly 0 or 1: every query ties with many sources
    grid = (2, 4)
    axes = np.eye(4, dtype=np.float32)
    frame0 = axes[[0, 1, 0, 1, 2, 3, 2, 3]]
    frame1 = axes[[0, 0, 1, 1, 2, 2, 3, 3]]
    frame2 = axes[[1, 0, 1, 0, 3, 2, 3, 2]]
    features = np.stack([frame0, frame1, frame2])
    first_ids = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    settings = _settings(neighbourhood=0, n_last_frames=2, topk=2)
    ours = _run(features, first_ids, 3, grid, settings)
    theirs = reference_soft_labels(features.astype(np.float64), first_ids, 3, grid, 2, 2, 0, 0.1)
    for mine, ref in zip(ours, theirs):
        np.testing.assert_allclose(mine, ref, atol=1e-6)
    # query 0 (axis 0) of frame 1 ties with sources 0 and 2 of frame 0 (ids 0 and 2): both kept, half each
    np.testing.assert_allclose(ours[0][0], [0.5, 0.0, 0.5], atol=1e-6)


def test_a_near_tie_below_float32_resolution_is_decided_as_in_exact_arithmetic():
    # sources 4 and 5 differ by one float32 ulp in one coordinate: their cosines with the query differ by ~1e-8,
    # below what a float32 product resolves; exactly one of them is the 5th largest, and its label must win alone
    rng = np.random.default_rng(7)
    query = rng.standard_normal(16).astype(np.float32)
    near = [query + 0.02 * (i + 1) * rng.standard_normal(16).astype(np.float32) for i in range(4)]
    sources = np.stack([*near, query + 0.3 * rng.standard_normal(16).astype(np.float32)])  # the twins: farthest
    twin = sources[4].copy()
    twin[3] = np.nextafter(twin[3], np.float32(np.inf))
    frame0 = np.vstack([sources, twin[None]]).astype(np.float32)  # a 1 x 6 grid
    frame1 = np.vstack([query[None], rng.standard_normal((5, 16))]).astype(np.float32)
    first_ids = np.array([0, 0, 0, 0, 1, 2])
    features = np.stack([frame0, frame1])
    ours = _run(features, first_ids, 3, (1, 6), _settings(neighbourhood=0, n_last_frames=0, topk=5))
    theirs = reference_soft_labels(features.astype(np.float64), first_ids, 3, (1, 6), 0, 5, 0, 0.1)
    assert (theirs[0][0, 1] > 0) != (theirs[0][0, 2] > 0)  # one of the twins kept, not both
    np.testing.assert_allclose(ours[0], theirs[0], atol=1e-6)


def test_the_blocks_hold_exactly_the_neighbourhood_window(monkeypatch):
    for grid, radius, tile in [((30, 52), 12, 16), ((9, 13), 2, 4), ((5, 3), 1, 2), ((4, 6), 0, 16)]:
        monkeypatch.setattr(propagate, "TILE", tile)
        gh, gw = grid
        n = gh * gw
        inside = np.zeros((n, n), bool)
        for block in tiles(grid, radius):
            queries = [r * gw + c for r in range(block.rows.start, block.rows.stop)
                       for c in range(block.cols.start, block.cols.stop)]
            sources = [r * gw + c for r in range(block.source_rows.start, block.source_rows.stop)
                       for c in range(block.source_cols.start, block.source_cols.stop)]
            allowed = np.ones((len(queries), len(sources)), bool)
            if block.outside is not None:
                allowed = ~block.outside[:, 0, :].numpy()
            assert not inside[np.ix_(queries, sources)].any()  # each query in one block only
            inside[np.ix_(queries, sources)] = allowed
        expected = np.zeros((n, n), bool)  # DINO's restrict_neighborhood, by loops
        for i in range(gh):
            for j in range(gw):
                for p in range(gh):
                    for q in range(gw):
                        expected[i * gw + j, p * gw + q] = radius == 0 or (abs(p - i) <= radius and
                                                                             abs(q - j) <= radius)
        assert np.array_equal(inside, expected), (grid, radius)
        window = neighbourhood_window(grid, radius)
        assert (window is None) == (radius == 0)
        if window is not None:
            assert np.array_equal(window.numpy(), expected)


def test_output_scales_each_channel_and_argmax_goes_to_the_lowest_id():
    grid = (1, 2)
    # channel 0 constant positive -> 1 everywhere (DINO's code would divide 0 by 0); channel 1 all zero -> stays 0;
    # channel 2 from 0.2 to 0.6 -> 0 to 1: where it reaches 1 it ties channel 0, and the lowest id wins
    soft = torch.tensor([[0.3, 0.3], [0.0, 0.0], [0.2, 0.6]])
    ids = labels_from_soft(soft, grid, (16, 32))
    assert ids.shape == (16, 32) and ids.dtype == np.uint8
    assert set(np.unique(ids)) == {0}
    # without the constant: channel 0 falls from 1 to 0 as channel 2 rises; they cross in the middle
    soft = torch.tensor([[0.5, 0.1], [0.0, 0.0], [0.2, 0.6]])
    ids = labels_from_soft(soft, grid, (16, 32))
    expected, _ = reference_labels(soft.T.numpy().astype(np.float64), grid, (16, 32))
    assert np.array_equal(ids, expected)
    assert ids[0, :16].tolist() == [0] * 16 and ids[0, 16:].tolist() == [2] * 16  # crossing between 15 and 16


@pytest.mark.parametrize("field,value", [("height", 100), ("n_last_frames", -1), ("topk", 0), ("neighbourhood", 1.5),
                                         ("temperature", 0.0), ("temperature", float("nan"))])
def test_a_bad_setting_is_named(field, value):
    with pytest.raises(ConfigError, match=field):
        _settings(**{field: value})


def test_settings_name_the_ledger_setting():
    assert _settings(height=480, n_last_frames=7, topk=5, neighbourhood=12).name == "h480-n7-k5-r12-t0.1"


# --------------------------------------------------------------------------------------------- end to end


class PatchColours(torch.nn.Module):
    """Tokens that are each 16 x 16 patch's mean colour (3 wide): propagation then follows colour, so the masks of
    the drawn shapes must follow the shapes. A real feature extractor of its own, not a stand-in for a network."""

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.avg_pool2d(x, 16)  # (1, 3, h/16, w/16)
        return pooled.flatten(2).transpose(1, 2) + 1e-3 * torch.arange(3.0)


def test_propagated_masks_follow_the_shapes_and_frame_0_is_the_truth(tmp_path):
    root = tmp_path / "davis"
    write_sequence(root, "walk", moving_shapes(6, (192, 336), 2, seed=5))
    seq = DavisDataset(root).sequence("walk")
    run = propagate_sequence(PatchColours(), seq, _settings(height=192, n_last_frames=3, neighbourhood=4),
                             tmp_path / "out")
    assert (run.n_frames, run.n_objects, run.frame_size, run.grid) == (6, 2, (192, 336), (12, 20))
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == [f"{t:05d}.png" for t in range(6)]  # the frames' own names, no temporary left
    assert np.array_equal(read_mask(tmp_path / "out" / "00000.png", result=True), read_mask(seq.masks[0]))
    for t in range(1, 6):
        out = Image.open(tmp_path / "out" / f"{t:05d}.png")
        assert out.mode == "P" and out.size == (336, 192)
        pred, truth = np.asarray(out), read_mask(seq.masks[t])
        for k in (1, 2):
            assert jaccard(pred == k, truth == k) > 0.7, (t, k)


@pytest.mark.slow  # a network built per architecture: seconds each, more on a busy machine
@pytest.mark.parametrize("architecture", [*SEED_ARCHITECTURES, "vit-s8", "dinov2-s14-reg4"])  # B and L: as S
def test_every_architecture_propagates_on_a_non_square_grid(tmp_path, architecture):
    root = small_davis(tmp_path / "davis")
    # 200 x 96 frames at height 64: patch 16 -> 128 x 64, a 4 x 8 grid; patch 8 -> 128 x 64, 8 x 16;
    # patch 14 -> short side 56, long floor(56 * 200 / 96 / 14) * 14 = 112: 4 x 8
    grid = {16: (4, 8), 8: (8, 16), 14: (4, 8)}[REGISTRY[architecture].geometry.patch]
    whole = DavisDataset(root).sequence("shapes2")
    seq = VideoSequence(whole.name, whole.frames[:4], whole.masks[:4])
    arch = REGISTRY[architecture]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        network = arch.build(arch.variants[0]).eval()
    settings = _settings(height=64, n_last_frames=2, neighbourhood=3)
    run = propagate_sequence(network, seq, settings, tmp_path / "a")
    assert run.grid == grid and run.n_frames == len(seq.frames)
    for frame in seq.frames:
        ids = read_mask(tmp_path / "a" / f"{frame.stem}.png", result=True)
        assert ids.shape == (96, 200) and ids.max() <= 2
    if architecture == "vit-s16":  # the same inputs give the same bytes
        propagate_sequence(network, seq, settings, tmp_path / "b")
        for frame in seq.frames:
            name = f"{frame.stem}.png"
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_frame_of_another_size_is_named(tmp_path):
    root = small_davis(tmp_path / "davis")
    seq = DavisDataset(root).sequence("shapes2")
    Image.new("RGB", (208, 96)).save(seq.frames[3])
    with pytest.raises(PropagationError, match=r"shapes2/00003\.jpg: frame is 208 x 96 px .* 200 x 96"):
        propagate_sequence(PatchColours(), seq, _settings(height=64), tmp_path / "out")


def test_propagation_reads_no_mask_but_the_first(tmp_path):
    root = small_davis(tmp_path / "davis")
    seq = DavisDataset(root).sequence("shapes2")
    for mask in seq.masks[1:]:
        mask.write_bytes(b"labels that propagation must not open")
    run = propagate_sequence(PatchColours(), seq, _settings(height=64), tmp_path / "out")
    assert run.n_frames == 6 and len(list((tmp_path / "out").glob("*.png"))) == 6


def test_a_corrupt_frame_is_named(tmp_path):
    root = small_davis(tmp_path / "davis")
    seq = DavisDataset(root).sequence("shapes2")
    data = seq.frames[2].read_bytes()
    seq.frames[2].write_bytes(data[: len(data) // 3])
    with pytest.raises(EvaluationError, match=r"shapes2/00002\.jpg: corrupt or truncated image"):
        propagate_sequence(PatchColours(), seq, _settings(height=64), tmp_path / "out")
    assert not list((tmp_path / "out").glob(".tmp-*"))  # nothing half-written


def test_the_step_runs_on_one_cpu_thread_and_gives_the_threads_back():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError), one_thread(torch.device("cpu")):
            assert torch.get_num_threads() == 1
            raise RuntimeError("a failing step")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------------------------ other networks' geometry


class PatchColours8(torch.nn.Module):
    """PatchColours on 8 x 8 patches, saying so through its `geometry` (p 8, 3 wide), as the registry's networks do."""

    geometry = Geometry(patch=8, width=3, depth=1)

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.avg_pool2d(x, 8)  # (1, 3, h/8, w/8)
        return pooled.flatten(2).transpose(1, 2) + 1e-3 * torch.arange(3.0)


def test_a_patch8_network_propagates_on_its_own_grid_to_masks_of_the_frame_size(tmp_path):
    """p 8: frames 336 x 192 at height 192 -> 320 x 192, a 24 x 40 grid (the seed's would be 12 x 20), upsampled x8;
    the masks follow the shapes."""
    root = tmp_path / "davis"
    write_sequence(root, "walk", moving_shapes(5, (192, 336), 2, seed=5))
    seq = DavisDataset(root).sequence("walk")
    run = propagate_sequence(PatchColours8(), seq, _settings(height=192, n_last_frames=3, neighbourhood=8),
                             tmp_path / "out")
    assert (run.n_frames, run.frame_size, run.grid) == (5, (192, 336), (24, 40))
    for t in range(1, 5):
        pred, truth = read_mask(tmp_path / "out" / f"{t:05d}.png", result=True), read_mask(seq.masks[t])
        assert pred.shape == (192, 336)
        for k in (1, 2):
            assert jaccard(pred == k, truth == k) > 0.7, (t, k)


def test_a_two_block_patch8_vit_gives_label_maps_of_the_frame_size(tmp_path):
    """A real ViT with 8 x 8 patches (2 blocks, 64 wide): its tokens are read on the 8-px grid, not the seed's."""
    from evaluate.networks.vit import VisionTransformer

    root = small_davis(tmp_path / "davis")
    whole = DavisDataset(root).sequence("shapes2")  # 200 x 96 frames -> 128 x 64 at height 64: an 8 x 16 grid
    seq = VideoSequence(whole.name, whole.frames[:3], whole.masks[:3])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        network = VisionTransformer(patch_size=8, embed_dim=64, depth=2, num_heads=1).eval()
    network.geometry = Geometry(patch=8, width=64, depth=2)  # what the registry's networks carry (issue 25)
    run = propagate_sequence(network, seq, _settings(height=64, n_last_frames=2, neighbourhood=3), tmp_path / "a")
    assert run.grid == (8, 16)
    for frame in seq.frames:
        ids = read_mask(tmp_path / "a" / f"{frame.stem}.png", result=True)
        assert ids.shape == (96, 200) and ids.max() <= 2
    del network.geometry  # without its geometry it is taken for the seed's p 16, and its 128 tokens are refused
    with pytest.raises(PropagationError, match="128 tokens .* not the 4 x 8 patches"):
        propagate_sequence(network, seq, _settings(height=64), tmp_path / "b")


def test_labels_from_soft_upsamples_by_the_patch():
    """x14 for a p-14 network: a 2 x 3 grid becomes 28 x 42 pixels, the frame's own size, with no resampling left."""
    soft = torch.full((2, 6), 0.5)
    soft[0, 4], soft[1, 4] = 0.0, 1.0  # object 1 on the patch at row 1, column 1
    ids = labels_from_soft(soft, (2, 3), (28, 42), patch=14)
    up = torch.nn.functional.interpolate(soft.reshape(1, 2, 2, 3), size=(28, 42), mode="bilinear",
                                         align_corners=False)[0]
    low, high = up.amin(dim=(1, 2), keepdim=True), up.amax(dim=(1, 2), keepdim=True)
    reference = ((up - low) / (high - low)).argmax(dim=0).numpy()
    assert ids.shape == (28, 42) and np.array_equal(ids, reference) and ids[21, 21] == 1
    assert not np.array_equal(labels_from_soft(soft, (2, 3), (28, 42), patch=16), reference)  # x16 is not that
