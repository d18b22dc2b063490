"""The object-discovery decoders (docs/design.md §15): TokenCut's and LOST's components and boxes, against hand-made
grids and against references written here from the contract's text (TokenCut with the dense generalised solver);
the registry's reads/gives; the fixed settings."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.ndimage

import decoders
from decoders import lost, tokencut
from decoders.boxes import box_of
from decoders.registry import DecoderError, SettingsError

# ---------------------------------------------------------------------------------------------------------------
# References written from DESIGN 12's text


def reference_tokencut(keys, grid, tau=0.2, eps=1e-5):
    """TokenCut: normalise; A = 1 where F F^T > tau else eps; dense eigh(D - A, D); v > mean(v); seed argmax |v|;
    flip if the seed is not foreground; the seed's 4-connected component. -> bool (gh, gw)."""
    f = np.asarray(keys, dtype=np.float64)
    f = f / np.linalg.norm(f, axis=1, keepdims=True)
    a = f @ f.T
    a = np.where(a > tau, 1.0, eps)
    d = np.diag(a.sum(axis=1))
    _, vectors = scipy.linalg.eigh(d - a, d, subset_by_index=[1, 2])
    v = vectors[:, 0]
    foreground = v > np.sum(v) / len(v)
    seed = int(np.argmax(np.abs(v)))
    if not foreground[seed]:
        foreground = ~foreground
    labels, _ = scipy.ndimage.label(foreground.reshape(grid))
    return labels == labels.ravel()[seed]


def reference_lost(keys, grid, k=100):
    """LOST: A = K K^T; degree = positive entries off the diagonal; sorted ascending, ties by index; seed the
    first; similars among the first k with A[seed, j] > 0; M = sum of their rows; the seed's component of M > 0."""
    kk = np.asarray(keys, dtype=np.float64)
    a = kk @ kk.T
    degree = np.array([sum(1 for j in range(len(a)) if j != i and a[i, j] > 0) for i in range(len(a))])
    order = sorted(range(len(a)), key=lambda i: (degree[i], i))
    seed = order[0]
    similars = [j for j in order[:k] if a[seed, j] > 0]
    m = a[similars].sum(axis=0)
    labels, _ = scipy.ndimage.label((m > 0).reshape(grid))
    return labels == labels.ravel()[seed]


def reference_box(component, p, height, width):
    ys, xs = np.nonzero(component)
    return (int(xs.min()) * p, int(ys.min()) * p, min((int(xs.max()) + 1) * p, width),
            min((int(ys.max()) + 1) * p, height))


def image_keys(seed, grid, channels=32, offset=0.8):
    """Keys like a real image's: smooth random fields, an object blob with its own direction, a shared offset."""
    rng = np.random.default_rng(seed)
    fields = scipy.ndimage.gaussian_filter(rng.standard_normal((channels, *grid)), sigma=(0, 1.5, 1.5))
    keys = fields.reshape(channels, -1).T / fields.std()
    rows, cols = np.mgrid[: grid[0], : grid[1]]
    cy, cx = rng.uniform(1, grid[0] - 1), rng.uniform(1, grid[1] - 1)
    blob = (rows - cy) ** 2 + (cols - cx) ** 2 < rng.uniform(2, 3.5) ** 2
    keys[blob.ravel()] += 2.0 * rng.standard_normal(channels)
    keys += offset * rng.standard_normal(channels) + 0.6 * rng.standard_normal(keys.shape)
    return keys.astype(np.float32)


# ---------------------------------------------------------------------------------------------------------------
# Hand-made grids


def test_tokencut_hand_made_grid():
    """4 x 4: an L-shaped object (3 patches) whose keys share one direction, the rest another (cosine 0): the cut
    separates them, the object is the smaller side (largest |v|), its box rows 2-3, columns 2-3, clipped."""
    keys = np.tile([0.0, 1.0], (16, 1))
    obj = [(2, 2), (2, 3), (3, 2)]
    for r, c in obj:
        keys[r * 4 + c] = [1.0, 0.0]
    comp = tokencut.component(keys, (4, 4))
    expected = np.zeros((4, 4), dtype=bool)
    expected[tuple(zip(*obj))] = True
    np.testing.assert_array_equal(comp, expected)
    # a 60 x 50 image pads to 64 x 64 at p 16 (grid 4 x 4): the box is clipped to the image's own size
    assert box_of(comp, 16, 50, 60) == (32, 32, 60, 50)
    assert box_of(comp, 16, 64, 64) == (32, 32, 64, 64)


def test_lost_hand_made_grid_and_ties_by_index():
    """4 x 4: three object patches, (0, 0), (0, 1) and (3, 3), share a direction orthogonal to the background's, so
    each has degree 2 and every background patch 12. The tie is broken by index: the seed is patch 0, its
    component {(0, 0), (0, 1)}, box (0, 0, 32, 16); by the highest index it would be (3, 3)'s (48, 48, 64, 64)."""
    keys = np.tile([0.0, 1.0], (16, 1))
    for index in (0, 1, 15):
        keys[index] = [2.0, 0.0]
    stats = lost.LostStats()
    comp = lost.component(keys, (4, 4), stats=stats)
    expected = np.zeros((4, 4), dtype=bool)
    expected[0, 0:2] = True
    np.testing.assert_array_equal(comp, expected)
    assert box_of(comp, 16, 64, 64) == (0, 0, 32, 16)
    assert stats.tied_seeds == 1 and stats.images == 1 and stats.empty == 0
    # reversing the patch order puts the single patch at index 0: the answer follows the index
    flipped = lost.component(keys[::-1], (4, 4))
    assert flipped.sum() == 1 and flipped[0, 0]


def test_lost_similars_limited_to_k_and_zero_seed_key():
    """k bounds the similars: with k = 1 only the seed itself adds its row. A zero key has degree 0 and is the
    seed: its component is empty (no box)."""
    keys = np.tile([0.0, 1.0], (16, 1))
    keys[5] = [1.0, 0.1]  # degree 15 (positive with every key)
    keys[0] = [1.0, -0.2]  # degree: only with patch 5 -> 1
    only_seed = lost.component(keys, (4, 4), k=1)
    # M = A[0]: positive at 0 (itself) and 5; 0 and 5 are not 4-neighbours
    assert only_seed.sum() == 1 and only_seed[0, 0]
    keys[3] = 0.0
    stats = lost.LostStats()
    assert not lost.component(keys, (4, 4), stats=stats).any() and stats.empty == 1
    assert lost.decode(keys, lost.LostSettings(), (4, 4)) == []


# ---------------------------------------------------------------------------------------------------------------
# Parity with the references, on padded non-square grids


@pytest.mark.parametrize("seed", range(6))
def test_tokencut_equals_dense_reference(seed):
    grid = [(5, 7), (7, 5), (6, 9), (4, 4), (8, 6), (3, 10)][seed]
    keys = image_keys(seed, grid)
    stats = tokencut.Stats()
    comp = tokencut.component(keys, grid, stats=stats)
    ref = reference_tokencut(keys, grid)
    np.testing.assert_array_equal(comp, ref)
    height, width = grid[0] * 16 - 5, grid[1] * 16 - 11  # the padded grid's last row and column are partial
    assert box_of(comp, 16, height, width) == reference_box(ref, 16, height, width)
    assert stats.eigenproblems == 1


@pytest.mark.parametrize("seed", range(6))
def test_lost_equals_reference(seed):
    grid = [(5, 7), (7, 5), (6, 9), (4, 4), (12, 11), (3, 10)][seed]
    keys = image_keys(100 + seed, grid, offset=0.0)  # raw keys: many negative products
    k = 100 if seed != 4 else 20  # grid 12 x 11 has 132 patches: k = 100 and 20 both bind
    comp = lost.component(keys, grid, k=k)
    np.testing.assert_array_equal(comp, reference_lost(keys, grid, k=k))
    assert comp.any()
    if seed == 4:  # k binds: 100 similars reach further than 20
        wide = lost.component(keys, grid)
        np.testing.assert_array_equal(wide, reference_lost(keys, grid, k=100))
        assert comp.sum() < wide.sum() < wide.size


def test_decode_returns_the_component():
    keys, grid = image_keys(7, (5, 6)), (5, 6)
    (mask,) = tokencut.decode(keys, tokencut.TokenCutSettings(), grid)
    np.testing.assert_array_equal(mask.mask, tokencut.component(keys, grid))
    assert 0.0 <= mask.score <= 1.0
    (mask,) = lost.sweep(keys, [lost.LostSettings()], grid)[0]
    np.testing.assert_array_equal(mask.mask, lost.component(keys, grid))


# ---------------------------------------------------------------------------------------------------------------
# Boxes, settings, registry


def test_box_of_rows_and_columns():
    comp = np.zeros((3, 5), dtype=bool)
    comp[1, 3] = comp[2, 1] = True  # not connected: the box spans both
    assert box_of(comp, 8, 24, 40) == (8, 8, 32, 24)
    assert box_of(comp, 8, 20, 30) == (8, 8, 30, 20)
    assert box_of(np.zeros((3, 5), dtype=bool), 8, 24, 40) is None
    assert all(type(v) is int for v in box_of(comp, np.int64(8), np.int64(24), np.int64(40)))
    with pytest.raises(DecoderError):
        box_of(np.zeros(4, dtype=bool), 8, 24, 40)


def test_fixed_settings():
    assert tokencut.TokenCutSettings().name == "tau=0.2,eps=1e-05"
    assert lost.LostSettings().name == "k=100"
    assert lost.LostSettings.from_name("k=100") == lost.LostSettings()
    assert tokencut.Settings.from_dict({"tau": 0.2, "eps": 1e-5}).to_dict() == {"tau": 0.2, "eps": 1e-5}
    assert tokencut.settings_grid({}) == [tokencut.TokenCutSettings()]
    assert lost.settings_grid({"k": [100]}) == [lost.LostSettings()]
    with pytest.raises(SettingsError, match="fixed at 0.2"):
        tokencut.TokenCutSettings(tau=0.3)
    with pytest.raises(SettingsError, match="not swept"):
        lost.settings_grid({"k": [50, 100]})
    with pytest.raises(SettingsError, match="not a lost setting name"):
        lost.LostSettings.from_name("k=50")
    with pytest.raises(SettingsError):
        lost.LostSettings(k=100.0)


def test_registry_reads_and_gives():
    assert decoders.decoders_that(reads="keys-native", gives="boxes") == ["lost", "tokencut"]
    assert decoders.decoders_that(reads="keys480") == ["ncut"]
    assert (decoders.get_decoder("ncut").READS, decoders.get_decoder("ncut").GIVES) == ("keys480", "masks")
    with pytest.raises(DecoderError, match="swept decoder reads keys480"):
        decoders.sweep_settings({"name": "tokencut", "sweep": {}, "centre": False, "masks": 1})


def test_bad_keys_refused():
    with pytest.raises(DecoderError, match="grid 4 x 4 has 16"):
        tokencut.component(np.ones((15, 3)), (4, 4))
    with pytest.raises(DecoderError, match="non-finite"):
        lost.component(np.full((16, 3), np.nan), (4, 4))


def test_demo_voc_folder(tmp_path):
    """The demo's VOC-layout set: same seed, same bytes; read back, its XML boxes are the scenes' visible pixels."""
    from evaluate.datasets.boxes import VocBoxes
    from evaluate.demo.discovery import make_demo_voc
    from evaluate.demo.scenes import make_scene

    a, b = make_demo_voc(tmp_path / "a", n_images=2, seed=5), make_demo_voc(tmp_path / "b", n_images=2, seed=5)
    for path in sorted(p for p in a.rglob("*") if p.is_file()):
        assert path.read_bytes() == (b / path.relative_to(a)).read_bytes()
    dataset = VocBoxes(a, "trainval")
    assert dataset.names == ["demo_000001", "demo_000002"]
    _, anns, painted = make_scene(5, 1)
    expected = []
    for k, ann in enumerate(anns):
        rows, cols = np.nonzero(painted == k + 1)
        if not ann["iscrowd"] and rows.size:
            expected.append((int(cols.min()), int(rows.min()), int(cols.max()) + 1, int(rows.max()) + 1))
    assert dataset.boxes()[1] == expected
