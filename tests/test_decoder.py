"""The normalized-cut decoder (docs/design.md §5): planted structure, invariances, parity with a dense reference written
here, sweeps, determinism, settings, grid -> image masks, COCO RLE, multi-mask rules; and on coco2017-mini."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.linalg
import scipy.ndimage
from pycocotools import mask as mask_utils

import decoders
from decoders import ncut as ncut_module
from decoders.masks import coco_results, encode_rle, grid_to_image
from decoders.ncut import cut as ncut_cut
from decoders.ncut.cut import GridMask, cut_mask, ncut_decode, ncut_sweep, stop_reason
from decoders.ncut.settings import MASKCUT, TOKENCUT, NcutSettings, settings_grid
from decoders.ncut.solver import SolverStats
from decoders.registry import DecoderError, SettingsError
from evaluate import EvaluationError
from evaluate.experiment import config_defaults

GRID = (30, 30)
N = GRID[0] * GRID[1]
RUN = config_defaults("decoder")  # the schema's decoder defaults: centre, masks and the sweep grid
DEFAULT = TOKENCUT.replace(centre=RUN["centre"], masks=RUN["masks"])  # TokenCut's cut with the run's defaults
ONE = {field: [value] for field, value in DEFAULT.to_dict().items()}  # a one-setting grid spec


def setting(**changes) -> NcutSettings:
    """DEFAULT with some fields changed."""
    return DEFAULT.replace(**changes)


# ---------------------------------------------------------------------------------------------------------------
# Inputs


def planted_keys(rects, noise, seed, grid=GRID, channels=384):
    """Keys with planted regions: region r (rows r0:r1, cols c0:c1) near base vector r + 1, the rest near base 0.

    Base vectors are random with norm ~1; noise is isotropic with norm ~`noise`. -> (keys float32 (N, C), labels).
    """
    rng = np.random.default_rng(seed)
    bases = rng.standard_normal((len(rects) + 1, channels)) / math.sqrt(channels)
    labels = np.zeros(grid, dtype=int)
    for index, (r0, r1, c0, c1) in enumerate(rects):
        labels[r0:r1, c0:c1] = index + 1
    keys = bases[labels.ravel()] + noise * rng.standard_normal((grid[0] * grid[1], channels)) / math.sqrt(channels)
    return keys.astype(np.float32), labels


def structured_keys(seed, grid=GRID, channels=384):
    """Image-like keys: spatially smooth random fields, a blob with its own direction, a common offset, noise."""
    rng = np.random.default_rng(seed)
    fields = scipy.ndimage.gaussian_filter(rng.standard_normal((channels, *grid)), sigma=(0, 3, 3), mode="wrap")
    fields /= fields.std()
    keys = fields.reshape(channels, -1).T
    rows, cols = np.mgrid[: grid[0], : grid[1]]
    cy, cx, radius = rng.uniform(8, 22), rng.uniform(8, 22), rng.uniform(4, 8)
    blob = (rows - cy) ** 2 + (cols - cx) ** 2 < radius**2
    keys[blob.ravel()] += 1.5 * rng.standard_normal(channels)
    keys += 1.0 * rng.standard_normal(channels)  # shared offset: uncentred cosines are large, as real keys' are
    keys += 0.8 * rng.standard_normal(keys.shape)
    return keys.astype(np.float32)


# ---------------------------------------------------------------------------------------------------------------
# The independent dense reference (TokenCut's recipe), written here on purpose


def reference_tokencut(keys, grid=GRID, tau=0.2, eps=1e-5):
    """TokenCut: normalise, A = 1 where S > tau else eps, eigh(D - A, D, subset_by_index=[1, 2]), split at the mean,
    seed = argmax |x|, its 4-connected component. -> (mask bool (N,), x, A)."""
    k = np.asarray(keys, dtype=np.float64)
    k = k / np.linalg.norm(k, axis=1, keepdims=True)
    affinity = np.where(k @ k.T > tau, 1.0, eps)
    degree = np.diag(affinity.sum(axis=1))
    _, vectors = scipy.linalg.eigh(degree - affinity, degree, subset_by_index=[1, 2])
    x = vectors[:, 0]
    bipartition = x > np.sum(x) / len(x)
    seed = int(np.argmax(np.abs(x)))
    if not bipartition[seed]:
        bipartition = ~bipartition
    labels, _ = scipy.ndimage.label(bipartition.reshape(grid))
    return labels.ravel() == labels.ravel()[seed], x, affinity


def reference_tied_masks(x, grid=GRID, tie=1e-9):
    """The reference's masks for every seed whose |x| ties the maximum (within `tie`, relative)."""
    magnitude = np.abs(x)
    bipartition = x > np.sum(x) / len(x)
    masks = []
    for seed in np.flatnonzero(magnitude >= magnitude.max() * (1 - tie)):
        side = bipartition if bipartition[seed] else ~bipartition
        labels, _ = scipy.ndimage.label(side.reshape(grid))
        masks.append(labels.ravel() == labels.ravel()[seed])
    return masks


def margins(x):
    """(seed margin, split margin) of an eigenvector: relative gap between the two largest |x|, and the distance
    of the patch nearest the mean split to it, relative to max |x|."""
    magnitude = np.sort(np.abs(x))[::-1]
    threshold = np.sum(x) / len(x)
    return float((magnitude[0] - magnitude[1]) / magnitude[0]), float(np.min(np.abs(x - threshold)) / magnitude[0])


def reference_ncut(mask, affinity):
    """Ncut(P, Q) = cut/assoc(P) + cut/assoc(Q) from a dense affinity."""
    p = mask.ravel()
    cut = affinity[np.ix_(p, ~p)].sum()
    return cut / affinity[p].sum() + cut / affinity[~p].sum()


def iou(a, b):
    return np.count_nonzero(a & b) / max(1, np.count_nonzero(a | b))


def all_masks(results):
    return [m.mask for ms in results for m in ms]


# ---------------------------------------------------------------------------------------------------------------
# Planted structure and invariances


@pytest.mark.parametrize(
    "settings, noise",
    [(setting(), 0.8), (TOKENCUT, 1.7), (setting(component="all"), 0.8)],
    ids=["centred", "tokencut", "centred-all"],
)
def test_planted_region_is_found_exactly(settings, noise):
    keys, labels = planted_keys([(5, 20, 6, 24)], noise=noise, seed=0)
    stats = SolverStats()
    (mask,) = ncut_decode(keys, settings, GRID, stats=stats)
    assert mask.mask.shape == GRID and mask.mask.dtype == bool
    assert np.array_equal(mask.mask, labels == 1)
    assert stats.lanczos == 1 and stats.fallbacks == 0  # the fast path did the work
    assert 0.9 < mask.score <= 1.0


def test_offset_moves_nothing_when_centred_and_something_when_not():
    keys, labels = planted_keys([(5, 20, 6, 24)], noise=0.8, seed=0)
    offset = np.random.default_rng(7).standard_normal(keys.shape[1])
    offset *= 28.25 / np.linalg.norm(offset)
    shifted = keys.astype(np.float64) + offset
    centred = setting(masks=2)
    base = ncut_decode(keys, centred)
    moved = ncut_decode(shifted, centred)
    assert len(base) == len(moved)
    for a, b in zip(base, moved):
        assert np.array_equal(a.mask, b.mask)
        assert a.ncut == pytest.approx(b.ncut, rel=1e-9)
    # the same offset without centring changes the answer, so the check above can fail
    plain = setting(centre=False)
    assert np.array_equal(ncut_decode(keys, plain)[0].mask, labels == 1)
    assert not np.array_equal(ncut_decode(shifted, plain)[0].mask, labels == 1)


# ---------------------------------------------------------------------------------------------------------------
# Parity with the dense reference (centre off, tau 0.2, eps 1e-5, seed rule, one mask)


def _check_parity(keys, solver):
    stats = SolverStats()
    (ours,) = ncut_decode(keys, TOKENCUT, GRID, solver=solver, stats=stats)
    ref_mask, x, affinity = reference_tokencut(keys)
    seed_margin, split_margin = margins(x)
    mask = ours.mask.ravel()
    same = np.array_equal(mask, ref_mask)
    tied = any(np.array_equal(mask, m) for m in reference_tied_masks(x))
    assert same or tied, (
        f"mask differs from the dense reference in {np.count_nonzero(mask != ref_mask)} patches "
        f"(seed margin {seed_margin:.3g}, split margin {split_margin:.3g})"
    )
    assert ours.ncut == pytest.approx(reference_ncut(mask, affinity), rel=1e-9, abs=1e-12)
    assert ours.score == pytest.approx(1 - ours.ncut / 2)
    return stats


@pytest.mark.parametrize("seed", range(5))
def test_tokencut_setting_equals_dense_reference_structured(seed):
    stats = _check_parity(structured_keys(seed), "lanczos")
    assert stats.eigenproblems == 1
    if seed < 2:
        _check_parity(structured_keys(seed), "dense")


@pytest.mark.parametrize("seed", range(1))
def test_tokencut_setting_equals_dense_reference_random(seed):
    rng = np.random.default_rng(100 + seed)
    keys = rng.standard_normal((N, 384)) + 0.6 * rng.standard_normal(384)  # cosines straddle 0.2
    _check_parity(keys.astype(np.float32), "lanczos")


def test_structured_inputs_use_lanczos():
    stats = SolverStats()
    for seed in range(6):
        ncut_decode(structured_keys(seed), TOKENCUT, stats=stats)
    assert stats.lanczos == 6 and stats.fallbacks == 0, stats.as_dict()


def test_lanczos_agrees_with_dense_solver_on_many_settings():
    keys = structured_keys(11)
    grid = settings_grid({**ONE, "tau": [0.0, 0.15, 0.3], "eps": [1e-5, 1e-3], "split": ["mean", "zero", "median"]})
    grid += [MASKCUT, setting(masks=3, foreground="corners")]
    fast, dense = SolverStats(), SolverStats()
    ours = ncut_sweep(keys, grid, GRID, stats=fast)
    reference = ncut_sweep(keys, grid, GRID, solver="dense", stats=dense)
    assert dense.dense == dense.eigenproblems > 0 and fast.lanczos > 0
    for settings, a, b in zip(grid, ours, reference):
        assert [m.mask.tolist() for m in a] == [m.mask.tolist() for m in b], settings.name
        assert [m.ncut for m in a] == pytest.approx([m.ncut for m in b], rel=1e-8, abs=1e-12)


def test_eigenvector_sign_is_fixed_and_solvers_agree():
    keys = structured_keys(6)
    for solver in ("lanczos", "dense"):
        image = ncut_cut._ImageCuts(*ncut_cut.check_keys(keys), solver, SolverStats())
        graph, x = image.cut(TOKENCUT, np.zeros(N, bool))
        assert x[np.argmax(np.abs(x))] > 0
        assert float(x @ (graph.d * x)) == pytest.approx(1.0, rel=1e-9)  # x' D x = 1, as LAPACK normalises
        if solver == "lanczos":
            first = x
    assert np.max(np.abs(first - x)) < 1e-9 * np.max(np.abs(x))


# ---------------------------------------------------------------------------------------------------------------
# Hand-computed values


def test_two_by_two_hand_computed_ncut_and_score():
    """Keys e1, e1, e2, e2 on a 2 x 2 grid: A = [[1,1,e,e],[1,1,e,e],[e,e,1,1],[e,e,1,1]], d = 2 + 2e.
    Cutting the top row off: cut = 4e, assoc = 2(2 + 2e) each side, Ncut = 2e / (1 + e)."""
    eps = 1e-5
    keys = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    stats = SolverStats()
    (mask,) = ncut_decode(keys, TOKENCUT, grid=(2, 2), stats=stats)
    assert mask.mask.tolist() == [[True, True], [False, False]]  # all |x| tie: the lowest index seeds
    assert mask.ncut == pytest.approx(2 * eps / (1 + eps), rel=1e-9)
    assert mask.score == pytest.approx(1 - eps / (1 + eps), rel=1e-12)
    assert stats.fallbacks == 1  # a perfectly blocky graph is an invariant subspace for Lanczos: dense answers


def test_degenerate_image_falls_back_to_dense_and_is_counted():
    keys = np.tile(np.linspace(1.0, 2.0, 384), (N, 1))  # every key the same: S = 1 everywhere
    stats = SolverStats()
    ncut_decode(keys, TOKENCUT, stats=stats)
    assert stats.eigenproblems == 1 and stats.fallbacks == 1 and stats.lanczos == 0
    stats = SolverStats()
    ncut_decode(structured_keys(0), TOKENCUT, solver="dense", stats=stats)
    assert stats.dense == 1 and stats.lanczos == 0 and stats.fallbacks == 0


# ---------------------------------------------------------------------------------------------------------------
# Foreground, component and split rules on hand-built eigenvectors


def test_seed_rule_and_corners_rule_on_a_hand_built_vector():
    # 4 x 4 grid; the ring (12 border patches) has large positive x, the 2 x 2 centre small negative x
    x = np.full((4, 4), 1.0)
    x[1:3, 1:3] = -0.2
    x[0, 1] = 2.0  # the seed: largest |x|, on the ring
    x = x.ravel()
    ring = np.ones((4, 4), bool)
    ring[1:3, 1:3] = False
    seed_rule = cut_mask(x, setting(foreground="seed"), (4, 4))
    assert np.array_equal(seed_rule, ring.ravel())
    corners_rule = cut_mask(x, setting(foreground="corners"), (4, 4))
    assert np.array_equal(corners_rule, ~ring.ravel())  # 4 corners foreground: flipped


def test_corners_rule_keeps_a_side_with_two_corners():
    x = np.zeros((4, 4))
    x[:, :2] = 1.0  # left half: two corners
    x[:, 2:] = -0.5
    x[1, 0] = 3.0
    mask = cut_mask(x.ravel(), setting(foreground="corners"), (4, 4))
    expected = np.zeros((4, 4), bool)
    expected[:, :2] = True
    assert np.array_equal(mask, expected.ravel())


def test_component_rule_and_splits():
    # two separate high blobs; the seed's blob alone with component "seed", both with "all"
    x = np.full((5, 5), -1.0)
    x[0, 0:2] = 4.0  # seed blob
    x[4, 3:5] = 3.0  # second blob, not 4-connected to the first
    x[2, 2] = 0.5  # above the mean (-0.2) but below zero
    flat = x.ravel()
    seed_blob = np.zeros((5, 5), bool)
    seed_blob[0, 0:2] = True
    other = np.zeros((5, 5), bool)
    other[4, 3:5] = True
    middle = np.zeros((5, 5), bool)
    middle[2, 2] = True
    def side(split):
        return cut_mask(x.ravel(), setting(split=split, component="all"), (5, 5)).reshape(5, 5)

    assert np.array_equal(cut_mask(flat, setting(split="mean"), (5, 5)), seed_blob.ravel())
    assert np.array_equal(side("mean"), seed_blob | other | middle)
    assert np.array_equal(side("zero"), seed_blob | other | middle)
    # median of x is -1 (21 of 25 entries): x > -1 is the 5 raised patches
    assert np.array_equal(side("median"), seed_blob | other | middle)
    x[2, 2] = -0.1  # between the mean (-0.244) and zero
    assert np.array_equal(side("zero"), seed_blob | other)
    assert np.array_equal(side("mean"), seed_blob | other | middle)


def test_component_is_four_connected():
    x = np.full((4, 4), -1.0)
    x[0, 0] = x[0, 1] = 3.0  # the seed's component
    x[1, 2] = 2.0  # touches (0, 1) only diagonally: another 4-connected component
    flat = x.ravel()
    expected = np.zeros((4, 4), bool)
    expected[0, :2] = True
    assert np.array_equal(cut_mask(flat, setting(), (4, 4)), expected.ravel())
    expected[1, 2] = True
    assert np.array_equal(cut_mask(flat, setting(component="all"), (4, 4)), expected.ravel())


def test_thresholding_matches_float64_cosines_near_tau():
    """float32 S cannot tell S = tau +- 1e-10 apart; the float64 recheck near tau must."""
    keys = structured_keys(9).astype(np.float64)
    unit = keys / np.linalg.norm(keys, axis=1, keepdims=True)
    features = ncut_cut._Features(keys, centre=False)
    rng = np.random.default_rng(0)
    for i, j in rng.integers(0, N, size=(6, 2)):
        exact = float(unit[i] @ unit[j])
        if not 0.0 <= exact < 0.999:
            continue
        for tau, expected in ((exact - 1e-10, True), (exact + 1e-10, False)):
            above = features.above(tau, out=np.empty((N, N), bool, order="F"))
            assert above[min(i, j), max(i, j)] == expected, (i, j, tau)  # S is held as its upper triangle
            assert not np.tril(above, -1).any()
            above = np.triu(above) | np.triu(above, 1).T
            reference = (unit @ unit.T) > tau
            off = np.argwhere(above != reference)
            # only entries whose float64 value itself sits within rounding of tau may differ from this reference
            assert all(abs(float(unit[a] @ unit[b]) - tau) < 1e-14 for a, b in off), off[:5]


def test_corners_rule_through_the_decoder():
    """A one-patch frame is the small, tightly knit cluster: the seed rule takes the frame, the corners rule the
    interior."""
    rng = np.random.default_rng(3)
    frame = np.zeros(GRID, bool)
    frame[0, :] = frame[-1, :] = frame[:, 0] = frame[:, -1] = True
    bases = rng.standard_normal((2, 384)) / math.sqrt(384)
    keys = bases[frame.ravel().astype(int)] + 0.8 * rng.standard_normal((N, 384)) / math.sqrt(384)
    seed_rule = ncut_decode(keys, setting(centre=False))[0].mask
    corners_rule = ncut_decode(keys, setting(centre=False, foreground="corners"))[0].mask
    assert np.array_equal(seed_rule, frame)
    assert np.array_equal(corners_rule, ~frame)


# ---------------------------------------------------------------------------------------------------------------
# Multi-mask (MaskCut style)


def test_stop_reason_rules():
    n = 900
    earlier = np.zeros(n, bool)
    earlier[:100] = True
    cut = np.zeros(n, bool)
    cut[40:140] = True  # IoU 60 / 140 = 0.43 with earlier: kept
    assert stop_reason(cut, earlier, [earlier]) is None
    cut = np.zeros(n, bool)
    cut[25:125] = True  # IoU 75 / 125 = 0.6 > 0.5
    assert stop_reason(cut, earlier, [earlier]) == "overlap"
    cut = np.zeros(n, bool)
    cut[50:150] = True  # IoU 50 / 150 = 1/3: kept
    assert stop_reason(cut, earlier, [earlier]) is None
    cut = np.zeros(n, bool)
    cut[:50] = True  # IoU 0.5 exactly is not > 0.5, but adds nothing new: small
    assert stop_reason(cut, earlier, [earlier]) == "small"
    cut = np.zeros(n, bool)
    cut[100:109] = True  # 9 new patches = 1% of 900: dropped
    assert stop_reason(cut, earlier, [earlier]) == "small"
    cut[109] = True  # 10 new patches: kept
    assert stop_reason(cut, earlier, [earlier]) is None


def test_two_planted_objects_two_masks_then_overlap_stop():
    keys, labels = planted_keys([(3, 13, 3, 15), (16, 27, 14, 27)], noise=0.6, seed=0)
    stats = SolverStats()
    masks = ncut_decode(keys, setting(masks=3), stats=stats)
    assert len(masks) == 2
    found = sorted((m.mask for m in masks), key=lambda m: int(m.sum()))
    assert np.array_equal(found[0], labels == 1) and np.array_equal(found[1], labels == 2)
    assert not (masks[0].mask & masks[1].mask).any()
    assert stats.stop_overlap == 1 and stats.stop_small == 0
    # masks=1 keeps only the first of them
    first = ncut_decode(keys, setting(masks=1))
    assert len(first) == 1 and np.array_equal(first[0].mask, masks[0].mask)


def test_tiny_second_object_is_dropped_by_the_one_percent_rule():
    keys, labels = planted_keys([(3, 13, 3, 15), (20, 22, 20, 23)], noise=0.6, seed=0)  # the second: 6 patches
    stats = SolverStats()
    masks = ncut_decode(keys, MASKCUT, stats=stats)
    assert len(masks) == 1 and np.array_equal(masks[0].mask, labels == 1)
    assert stats.stop_small == 1 and stats.stop_overlap == 0


def test_multi_mask_invariants_on_structured_keys():
    for seed in range(3):
        keys = structured_keys(seed)
        for settings in (MASKCUT, setting(masks=4), setting(masks=4, tau=0.0, component="all")):
            masks = ncut_decode(keys, settings)
            assert 1 <= len(masks) <= settings.masks
            union = np.zeros(GRID, bool)
            for index, m in enumerate(masks):
                assert not (m.mask & union).any()  # earlier patches are not repeated
                if index:
                    assert m.mask.sum() > 0.01 * N
                assert 0.0 <= m.score <= 1.0 and m.score == pytest.approx(1 - m.ncut / 2)
                union |= m.mask


# ---------------------------------------------------------------------------------------------------------------
# Sweep, determinism


def test_sweep_equals_per_setting_decode():
    keys = structured_keys(4)
    grid = decoders.sweep_settings(RUN) + [MASKCUT, TOKENCUT, setting(masks=3), setting(masks=2, tau=0.1, eps=1e-3)]
    assert len(grid) == 148
    stats = SolverStats()
    swept = ncut_sweep(keys, grid, GRID, stats=stats)
    assert stats.eigenproblems < len(grid)  # work is shared: 12 eigenproblems serve the 144-setting grid
    for settings, masks in zip(grid, swept):
        single = ncut_decode(keys, settings)
        assert len(single) == len(masks), settings.name
        for a, b in zip(single, masks):
            assert np.array_equal(a.mask, b.mask), settings.name
            assert a.score == b.score and a.ncut == b.ncut, settings.name


def test_sweep_keeps_the_order_given():
    keys = structured_keys(5)
    grid = [setting(tau=0.3), TOKENCUT, setting(tau=0.0), setting(tau=0.3, split="median")]
    forward = ncut_sweep(keys, grid)
    backward = ncut_sweep(keys, grid[::-1])[::-1]
    assert [m.mask.tolist() for ms in forward for m in ms] == [m.mask.tolist() for ms in backward for m in ms]


def test_deterministic_across_runs_and_interleaved_images():
    a, b = structured_keys(1), structured_keys(2)
    settings = [TOKENCUT, MASKCUT, setting(), setting(split="median", tau=0.1)]
    first = ncut_sweep(a, settings)
    ncut_sweep(b, settings + [setting(tau=0.3, masks=2)])  # reuses the same work buffers
    again = ncut_sweep(a, settings)
    for x, y in zip(first, again):
        assert [m.mask.tolist() for m in x] == [m.mask.tolist() for m in y]
        assert [(m.score, m.ncut) for m in x] == [(m.score, m.ncut) for m in y]


def test_key_dtypes_give_the_same_masks():
    keys = structured_keys(3).astype(np.float16)
    results = [ncut_decode(keys.astype(dtype), setting(masks=2)) for dtype in (np.float16, np.float32, np.float64)]
    for other in results[1:]:
        assert [m.mask.tolist() for m in other] == [m.mask.tolist() for m in results[0]]


# ---------------------------------------------------------------------------------------------------------------
# Bad input


def test_bad_keys_and_grid_are_named():
    keys = structured_keys(0)
    with pytest.raises(DecoderError, match="900 rows but the grid 20 x 20"):
        ncut_decode(keys, TOKENCUT, grid=(20, 20))
    with pytest.raises(DecoderError, match="2-D"):
        ncut_decode(keys[None], TOKENCUT)
    bad = keys.copy()
    bad[17, 3] = np.nan
    with pytest.raises(DecoderError, match="non-finite value .*row 17"):
        ncut_decode(bad, TOKENCUT)
    with pytest.raises(DecoderError, match="unknown ncut solver 'arpack'"):
        ncut_decode(keys, TOKENCUT, solver="arpack")
    with pytest.raises(DecoderError, match="NcutSettings"):
        ncut_decode(keys, {"tau": 0.2})
    assert issubclass(DecoderError, EvaluationError)


# ---------------------------------------------------------------------------------------------------------------
# Settings


def test_settings_presets_and_names():
    assert DEFAULT.to_dict() == {  # the schema's decoder.centre and decoder.masks on TokenCut's cut
        "centre": True, "tau": 0.2, "eps": 1e-5, "split": "mean", "foreground": "seed", "component": "seed", "masks": 1,
    }
    assert DEFAULT.name == "centre=1,tau=0.2,eps=1e-05,split=mean,fg=seed,cc=seed,masks=1"
    assert TOKENCUT.to_dict() == {**DEFAULT.to_dict(), "centre": False}
    assert MASKCUT.to_dict() == {
        "centre": False, "tau": 0.15, "eps": 1e-5, "split": "mean", "foreground": "corners", "component": "seed",
        "masks": 3,
    }
    for settings in decoders.sweep_settings(RUN) + [TOKENCUT, MASKCUT]:
        assert NcutSettings.from_name(settings.name) == settings
        assert NcutSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings
        assert set(settings.name) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._=,-")
    assert setting(tau=0).name == setting(tau=0.0).name and setting(tau=0) == setting(tau=0.0)
    assert NcutSettings.from_dict({**DEFAULT.to_dict(), "tau": 0.1}) == setting(tau=0.1)


def test_settings_have_no_defaults_of_their_own():
    """Every field is given: the run's defaults live in the config schema alone."""
    with pytest.raises(TypeError):
        NcutSettings()
    with pytest.raises(SettingsError, match="lack the field.*centre, eps, split, foreground, component, masks"):
        NcutSettings.from_dict({"tau": 0.1})
    with pytest.raises(SettingsError, match="names no values for eps, split"):
        settings_grid({field: values for field, values in ONE.items() if field not in ("eps", "split")})


@pytest.mark.parametrize(
    "field, value",
    [
        ("centre", 1), ("centre", "yes"), ("tau", -0.1), ("tau", 1.0), ("tau", float("nan")), ("tau", "0.2"),
        ("tau", True), ("eps", 0.0), ("eps", 1.0), ("split", "max"), ("foreground", "center"),
        ("component", "largest"), ("masks", 0), ("masks", 2.0), ("masks", 51), ("masks", True),
    ],
)
def test_settings_validation_names_the_field(field, value):
    with pytest.raises(SettingsError, match=f"'{field}'"):
        setting(**{field: value})
    with pytest.raises(ValueError):
        NcutSettings.from_dict({**DEFAULT.to_dict(), field: value})


def test_settings_mapping_errors():
    with pytest.raises(SettingsError, match="unknown ncut setting field.*colour"):
        NcutSettings.from_dict({**DEFAULT.to_dict(), "colour": 1})
    with pytest.raises(SettingsError, match="not an ncut setting name"):
        NcutSettings.from_name("tau=0.2")
    with pytest.raises(SettingsError, match="canonical"):
        NcutSettings.from_name("centre=1,tau=0.20,eps=1e-05,split=mean,fg=seed,cc=seed,masks=1")
    with pytest.raises(SettingsError, match="unknown ncut setting field.*alpha"):
        settings_grid({**ONE, "alpha": [1]})
    with pytest.raises(SettingsError, match="'tau' has no values"):
        settings_grid({**ONE, "tau": []})
    with pytest.raises(SettingsError, match="repeats"):
        settings_grid({**ONE, "tau": [0.1, 0.1]})
    with pytest.raises(SettingsError, match="'tau'"):
        settings_grid({**ONE, "tau": [0.1, 2.0]})


def test_the_schema_s_default_sweep_order_and_size():
    grid = decoders.sweep_settings(RUN)
    assert len(grid) == 6 * 2 * 2 * 3 * 2 == 144
    assert len({s.name for s in grid}) == 144
    # fields vary in declaration order, the first outermost: centre, tau, eps, split, foreground, component
    assert grid[0] == setting(tau=0.0, eps=1e-5, split="mean", foreground="seed", component="seed")
    assert grid[1] == setting(tau=0.0, eps=1e-5, split="mean", foreground="seed", component="all")
    assert grid[2] == setting(tau=0.0, eps=1e-5, split="mean", foreground="corners", component="seed")
    assert grid[4] == setting(tau=0.0, eps=1e-5, split="zero", foreground="seed", component="seed")
    assert grid[12] == setting(tau=0.0, eps=1e-3)
    assert grid[24] == setting(tau=0.05)
    assert grid[-1] == setting(tau=0.3, eps=1e-3, split="median", foreground="corners", component="all")
    assert all(s.centre and s.masks == 1 for s in grid)
    assert settings_grid({**ONE, "masks": [1, 3], "centre": [False, True]}) == [
        setting(centre=False), setting(centre=False, masks=3), setting(), setting(masks=3),
    ]
    # the run's centre and masks enter the grid from decoder.centre and decoder.masks
    assert {(s.centre, s.masks) for s in decoders.sweep_settings({**RUN, "centre": False, "masks": 3})} == {(False, 3)}



# ---------------------------------------------------------------------------------------------------------------
# Registry


def test_registry():
    decoder = decoders.get_decoder("ncut")
    assert decoders.DECODERS["ncut"] is decoder is ncut_module
    assert decoder.NAME == "ncut" and decoder.Settings is NcutSettings and decoder.Stats is SolverStats
    keys = structured_keys(0)
    assert [m.mask.tolist() for m in decoder.decode(keys, TOKENCUT, GRID)] == [
        m.mask.tolist() for m in ncut_decode(keys, TOKENCUT)
    ]
    with pytest.raises(DecoderError, match="unknown decoder 'maskcut'; known decoders: lost, ncut, tokencut"):
        decoders.get_decoder("maskcut")


def test_register_refuses_an_incomplete_decoder_and_a_second_one_of_the_same_name():
    from types import SimpleNamespace

    from decoders.registry import register

    with pytest.raises(DecoderError, match="lacks READS, GIVES, Stats, sweep"):
        register(SimpleNamespace(NAME="half", Settings=NcutSettings, settings_grid=settings_grid, decode=ncut_decode))
    impostor = SimpleNamespace(**{member: getattr(ncut_module, member) for member in ncut_module.__all__})
    with pytest.raises(DecoderError, match="two decoders are named 'ncut'"):
        register(impostor)
    assert decoders.DECODERS["ncut"] is ncut_module and sorted(decoders.DECODERS) == ["lost", "ncut", "tokencut"]


# ---------------------------------------------------------------------------------------------------------------
# Grid -> image, COCO results


def bilinear_reference(grid, height, width):
    """Independent align_corners=False bilinear resize (PyTorch's convention: source coordinate
    (i + 0.5) * in / out - 0.5, clamped at 0 below and at the last index above)."""

    def weights(n_in, n_out):
        src = np.maximum((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0.0)
        low = np.minimum(np.floor(src).astype(int), n_in - 1)
        high = np.minimum(low + 1, n_in - 1)
        frac = src - low
        matrix = np.zeros((n_out, n_in))
        matrix[np.arange(n_out), low] += 1 - frac
        matrix[np.arange(n_out), high] += frac
        return matrix

    return weights(grid.shape[0], height) @ grid.astype(float) @ weights(grid.shape[1], width).T


def test_grid_to_image_hand_computed():
    one = np.array([[1, 0], [0, 0]], bool)
    # 2 -> 4 per side: weights along a side (1, 0.75, 0.25, 0); products >= 0.5: (0,0) 1, (0,1) 0.75, (1,1) 0.5625
    assert grid_to_image(one, 4, 4).astype(int).tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    # same size: identity
    grid = np.random.default_rng(0).random((5, 7)) > 0.5
    assert np.array_equal(grid_to_image(grid, 5, 7), grid)
    # 2 -> 1 per side: the source coordinate 0.5 averages the four cells
    assert grid_to_image(np.array([[1, 1], [0, 1]], bool), 1, 1).tolist() == [[True]]  # 0.75
    assert grid_to_image(np.array([[1, 0], [0, 1]], bool), 1, 1).tolist() == [[True]]  # 0.5 kept (>=)
    assert grid_to_image(np.array([[1, 0], [0, 0]], bool), 1, 1).tolist() == [[False]]  # 0.25


def test_grid_to_image_matches_reference_resize():
    rng = np.random.default_rng(1)
    for height, width in [(480, 640), (427, 640), (37, 101), (30, 30), (15, 45)]:
        grid = rng.random((30, 30)) > 0.6
        ours = grid_to_image(grid, height, width)
        values = bilinear_reference(grid, height, width)
        clear = np.abs(values - 0.5) > 1e-5  # float32 vs float64 may differ only at exactly 0.5
        assert ours.shape == (height, width) and ours.dtype == bool
        assert np.array_equal(ours[clear], values[clear] >= 0.5)


def test_grid_to_image_bad_input():
    with pytest.raises(DecoderError, match="2-D"):
        grid_to_image(np.zeros(9, bool), 3, 3)
    with pytest.raises(DecoderError, match="image size"):
        grid_to_image(np.zeros((3, 3), bool), 0, 3)
    with pytest.raises(DecoderError, match="0/1"):
        grid_to_image(np.full((3, 3), 2), 3, 3)


def test_coco_results_rle_round_trip():
    rng = np.random.default_rng(2)
    grid_masks = [GridMask(rng.random((30, 30)) > 0.5, 0.75, 0.5), GridMask(np.eye(30, dtype=bool), 0.1, 1.8)]
    results = coco_results(139, grid_masks, 426, 640)
    assert json.loads(json.dumps(results)) == results  # JSON-ready: counts are str
    assert [r["score"] for r in results] == [0.75, 0.1]
    for result, grid_mask in zip(results, grid_masks):
        assert result["image_id"] == 139 and result["category_id"] == 1
        assert result["segmentation"]["size"] == [426, 640]
        assert isinstance(result["segmentation"]["counts"], str)
        rle = {"size": result["segmentation"]["size"], "counts": result["segmentation"]["counts"].encode("ascii")}
        decoded = mask_utils.decode(rle).astype(bool)
        assert np.array_equal(decoded, grid_to_image(grid_mask.mask, 426, 640))
    assert coco_results(5, [], 10, 10) == []
    with pytest.raises(DecoderError, match="score"):
        coco_results(5, [GridMask(np.eye(3, dtype=bool), 1.5, -1.0)], 10, 10)
    empty = encode_rle(np.zeros((4, 6), bool))
    assert mask_utils.area({"size": empty["size"], "counts": empty["counts"].encode()}) == 0


def test_coco_results_loadable_by_cocoeval_api():
    from pycocotools.coco import COCO

    gt = COCO()
    gt.dataset = {
        "images": [{"id": 1, "height": 60, "width": 60}],
        "categories": [{"id": 1, "name": "object"}],
        "annotations": [],
    }
    gt.createIndex()
    keys, labels = planted_keys([(5, 20, 6, 24)], noise=0.8, seed=0)
    results = coco_results(1, ncut_decode(keys, setting()), 60, 60)
    loaded = gt.loadRes(results)
    ann = loaded.loadAnns(loaded.getAnnIds())[0]
    assert ann["area"] == pytest.approx(np.count_nonzero(np.kron(labels == 1, np.ones((2, 2)))))


# ---------------------------------------------------------------------------------------------------------------
# Real photos: coco2017-mini val through a seeded backbone


@pytest.mark.coco
@pytest.mark.slow
def test_coco_mini_tokencut_setting_matches_dense_reference(coco_mini_features):
    """keys480 of all 79 coco2017-mini val images through the seeded backbone, as the product stores them."""
    from evaluate.readings.features import FeatureReader

    _, _, dirs = coco_mini_features["val"]
    reader = FeatureReader(dirs)
    stats = SolverStats()
    identical, tied, differing = 0, 0, []
    for shard_ids, shard_keys in reader.iter_shards("keys480"):
        keys = np.asarray(shard_keys, dtype=np.float32)
        for image_id, image_keys in zip(shard_ids, keys):
            (ours,) = ncut_decode(image_keys, TOKENCUT, stats=stats)
            ref_mask, x_ref, _ = reference_tokencut(image_keys)
            mask = ours.mask.ravel()
            if np.array_equal(mask, ref_mask):
                identical += 1
                continue
            seed_margin, split_margin = margins(x_ref)
            is_tie = any(np.array_equal(mask, m) for m in reference_tied_masks(x_ref))
            tied += is_tie
            report = (
                f"image {image_id}: {np.count_nonzero(mask != ref_mask)} patches differ, IoU "
                f"{iou(mask, ref_mask):.4f}, seed margin {seed_margin:.3g}, split margin {split_margin:.3g}"
                + (" (exact seed tie: ours is the reference's mask for another tied seed)" if is_tie else "")
            )
            print(report)
            if not is_tie:
                differing.append((report, iou(mask, ref_mask)))
    total = len(reader)
    print(f"coco2017-mini val: {identical}/{total} identical, {tied} differ only by an exact seed tie; "
          f"{stats.as_dict()}")
    assert total == 79
    assert identical + tied >= 0.99 * total, [r for r, _ in differing]
    assert all(value >= 0.99 for _, value in differing), [r for r, _ in differing]


def test_eigenvector_is_the_dense_generalised_eigenvector_of_the_first_cut():
    """decoders.ncut.eigenvector (the figure's map) equals scipy's dense (D - A) x = lambda D x solution."""
    import scipy.linalg

    from decoders.ncut.cut import eigenvector

    rng = np.random.default_rng(7)
    keys = rng.normal(size=(12 * 10, 16))
    keys[:30] += 3.0
    x = eigenvector(keys, TOKENCUT, (12, 10))
    unit = keys / np.linalg.norm(keys, axis=1, keepdims=True)
    a = np.where(unit @ unit.T > TOKENCUT.tau, 1.0, TOKENCUT.eps)
    d = np.diag(a.sum(axis=1))
    _, vecs = scipy.linalg.eigh(d - a, d, subset_by_index=[1, 1])
    ref = vecs[:, 0]
    ref = ref * np.sign(ref[np.argmax(np.abs(ref))])
    assert x.shape == (12, 10)
    np.testing.assert_allclose(x.reshape(-1), ref, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# Other networks' keys480 grids (docs/design.md §5, §11): the grid is the keys' own square grid


def _check_parity_on(keys, grid):
    """The decoder with no grid given (the keys' square grid) against the dense reference on `grid`."""
    (ours,) = ncut_decode(keys, TOKENCUT)
    assert ours.mask.shape == grid and ours.mask.dtype == bool
    ref_mask, x, affinity = reference_tokencut(keys, grid)
    tied = [np.array_equal(ours.mask.ravel(), m) for m in reference_tied_masks(x, grid)]
    assert np.array_equal(ours.mask.ravel(), ref_mask) or any(tied)
    assert ours.ncut == pytest.approx(reference_ncut(ours.mask.ravel(), affinity), rel=1e-9, abs=1e-12)
    return ours


def test_patch14_keys_on_a_34_by_34_grid_equal_the_dense_reference():
    """DINOv2 /14 at 476 px: keys (1156, 768); the grid 34 x 34 comes from the keys, the mask equals eigh(D - A, D)'s
    and goes back to the image's own size."""
    ours = _check_parity_on(structured_keys(0, (34, 34), 768), (34, 34))
    (result,) = coco_results(5, [ours], 37, 53)
    assert result["segmentation"]["size"] == [37, 53]
    assert np.array_equal(mask_utils.decode(result["segmentation"]).astype(bool), grid_to_image(ours.mask, 37, 53))


@pytest.mark.slow
def test_patch8_keys_on_a_60_by_60_grid_equal_the_dense_reference():
    """ViT-S/8 at 480 px: keys (3600, 384) on 60 x 60 (the dense reference takes seconds at 3,600 nodes)."""
    _check_parity_on(structured_keys(1, (60, 60), 384), (60, 60))


def test_patch8_grid_is_read_from_the_keys_and_a_non_square_count_is_refused():
    keys = structured_keys(2, (60, 60), 64)
    (mask,) = ncut_decode(keys, TOKENCUT)
    assert mask.mask.shape == (60, 60)
    (explicit,) = ncut_decode(keys, TOKENCUT, (60, 60))
    assert np.array_equal(mask.mask, explicit.mask)
    assert decoders.square_grid(3600) == (60, 60) and decoders.square_grid(1156) == (34, 34)
    with pytest.raises(DecoderError, match="899 rows, not a square grid"):
        ncut_decode(keys[:899], TOKENCUT)


def test_sweep_shard_round_trip_on_a_34_by_34_grid(tmp_path):
    """A sweep of p-14 keys: packed masks on 34 x 34 read back with the grid of the features' geometry; read with
    the seed's 30 x 30 grid the shard is refused, not misread."""
    from decoders.shards import read_sweep, sweep_keys, write_sweep

    keys = np.stack([structured_keys(seed, (34, 34), 32) for seed in range(2)])
    settings = [TOKENCUT, setting(masks=2)]
    shard = sweep_keys(ncut_module, settings, [4, 9], keys)
    write_sweep(tmp_path / "000.npz", shard)
    back = read_sweep(tmp_path / "000.npz")
    for row in range(2):
        for s, one in enumerate(settings):
            union = np.zeros((34, 34), bool)
            for m in ncut_decode(keys[row], one):
                union |= m.mask
            assert np.array_equal(back.union(row, s, (34, 34)), union)
    with pytest.raises(DecoderError, match="not the 113 of a 30 x 30 grid"):
        back.union(0, 0, (30, 30))
