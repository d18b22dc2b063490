"""Spherical k-means of DESIGN 16 (evaluate.semseg.cluster): parity with the contract's text written out here on the
whole token set in memory, chunk invariance to the bit, the seeding's N - 1 rule, renumbering, empty clusters, the
iteration cap, and what is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluate.semseg import SemsegError
from evaluate.semseg.cluster import (
    BLOCK_ROWS,
    SUM_BLOCK,
    ClusterFit,
    ClusterSettings,
    TokenStream,
    _carried_cumsum,
    _lloyd,
    _seed_indices,
    _TokenState,
    fit_clusters,
)

# ------------------------------------------------------------------------------ the contract, written out in full


def reference_unit(tokens: np.ndarray) -> np.ndarray:
    """X: float64 tokens each divided by its norm; a zero token stays 0."""
    x = tokens.astype(np.float64)
    norms = np.sqrt((x * x).sum(axis=1))
    out = np.zeros_like(x)
    out[norms > 0] = x[norms > 0] / norms[norms > 0, None]
    return out


def reference_fit(tokens: np.ndarray, k: int, seed: int, n_init: int, max_iter: int) -> dict:
    """DESIGN 16's clustering, line by line, on X held whole: per restart its seeds, assignments made, objective,
    centres; then the best restart renumbered by first appearance."""
    x = reference_unit(tokens)
    n = x.shape[0]
    rng = np.random.default_rng(seed)
    restarts = []
    for _ in range(n_init):
        seeds = [int(rng.integers(n))]
        d = np.maximum(0.0, 1.0 - x @ x[seeds[0]])
        for _ in range(1, k):
            q = np.cumsum(d)
            i = min(int(np.searchsorted(q, rng.random() * q[-1], side="right")), n - 1)
            seeds.append(i)
            d = np.minimum(d, np.maximum(0.0, 1.0 - x @ x[i]))
        centres = x[seeds].copy()
        previous, made = None, 0
        while made < max_iter:
            a = np.argmax(x @ centres.T, axis=1)
            made += 1
            if previous is not None and np.array_equal(a, previous):
                break
            for cluster in range(k):
                members = x[a == cluster]
                if len(members):
                    total = members.sum(axis=0)
                    norm = np.sqrt((total * total).sum())
                    centres[cluster] = total / norm if norm > 0 else 0.0
            previous = a
        objective = float(np.max(x @ centres.T, axis=1).sum())
        restarts.append({"seeds": seeds, "made": made, "objective": objective, "centres": centres})
    best = 0
    for r in range(1, n_init):
        if restarts[r]["objective"] > restarts[best]["objective"]:
            best = r
    centres = restarts[best]["centres"]
    final = np.argmax(x @ centres.T, axis=1)
    order = list(dict.fromkeys(final.tolist()))
    order += [c for c in range(k) if c not in order]
    sizes = [int((final == c).sum()) for c in order]
    return {"restarts": restarts, "best": best, "centres": centres[order], "sizes": sizes}


def clustered_tokens(n: int, width: int, k: int, seed: int, spread: float = 0.6) -> np.ndarray:
    """float32 tokens around k random directions, of random norms, with a few zero tokens among them."""
    rng = np.random.default_rng(seed)
    directions = rng.standard_normal((k, width))
    tokens = directions[rng.integers(0, k, n)] + spread * rng.standard_normal((n, width))
    tokens *= rng.uniform(0.5, 3.0, size=(n, 1))
    tokens[rng.choice(n, size=3, replace=False)] = 0.0
    return tokens.astype(np.float32)


def split(tokens: np.ndarray, cuts: list[int]) -> list[np.ndarray]:
    return [part for part in np.split(tokens, cuts)]


# -------------------------------------------------------------------------------------------------- parity


@pytest.mark.parametrize("k, n_init, max_iter", [(4, 3, 100), (6, 2, 3)])
def test_the_fit_follows_the_contract_written_out_on_the_whole_set(k, n_init, max_iter):
    """Seeds (token indices), Lloyd's assignments made per restart, objectives, the chosen restart, renumbered
    centres and cluster sizes equal the contract's text computed on X held whole; max_iter 3 stops Lloyd early with
    the centres updated after the third assignment."""
    tokens = clustered_tokens(6000, 12, k, seed=k)
    ref = reference_fit(tokens, k, seed=0, n_init=n_init, max_iter=max_iter)
    fit = fit_clusters(TokenStream.from_arrays(split(tokens, [1000, 4500])), ClusterSettings(k, 0, n_init, max_iter))
    assert [list(s) for s in fit.seeds] == [r["seeds"] for r in ref["restarts"]]
    assert list(fit.iterations) == [r["made"] for r in ref["restarts"]]
    if max_iter == 3:
        assert set(fit.iterations) == {3}
    np.testing.assert_allclose(fit.objectives, [r["objective"] for r in ref["restarts"]], rtol=1e-12)
    assert fit.restart == ref["best"]
    np.testing.assert_allclose(fit.centres, ref["centres"], atol=1e-12)
    assert list(fit.sizes) == ref["sizes"] and sum(fit.sizes) == 6000


def test_identical_tokens_seed_the_last_token_once_every_distance_is_zero():
    """Five equal tokens: after the first centre d is 0 everywhere, q[-1] = 0, searchsorted gives N and the rule's
    min(., N - 1) picks the last token; the first seed is the generator's first integer."""
    tokens = np.tile(np.array([[3.0, 4.0]], dtype=np.float32), (5, 1))
    fit = fit_clusters(TokenStream.from_arrays([tokens]), ClusterSettings(3, seed=7, n_init=1))
    first = int(np.random.default_rng(7).integers(5))
    assert fit.seeds == ((first, 4, 4),)
    np.testing.assert_allclose(fit.centres[0], [0.6, 0.8], atol=1e-15)
    assert fit.sizes == (5, 0, 0)  # every token takes the first of the equal centres; the others are token-less


def held(d: np.ndarray) -> _TokenState:
    """d (N,) or (N, m) as the fit's per-token state."""
    d = d.reshape(d.shape[0], -1)
    state = _TokenState(d.shape[0], d.shape[1], np.float64, 0.0)
    state.write(0, d)
    return state


def test_the_seed_index_is_the_first_running_sum_above_the_draw_carried_across_steps():
    """i = min(searchsorted(q, u * q[-1], side="right"), N - 1) with q = cumsum(d): a token at distance 0 (already a
    centre) is never drawn, not even by u = 0; over several steps of the running sum the index and the bits of q are
    numpy's sequential cumsum's, for each restart's column alike."""
    d = np.array([0.0, 0.0, 0.25, 0.0, 0.75])
    assert [_seed_indices(held(d), [u])[0] for u in (0.0, 0.25, 0.2499, 0.9999)] == [2, 4, 2, 4]
    assert _seed_indices(held(np.zeros(6)), [0.3]) == [5]
    rng = np.random.default_rng(11)
    n = 2 * SUM_BLOCK + 123
    d = rng.uniform(0, 2, size=(n, 3)) * (rng.uniform(size=(n, 3)) > 0.3)
    draws = [0.0, SUM_BLOCK / n, 0.999999]
    expected = []
    for r, u in enumerate(draws):
        q = np.cumsum(d[:, r])
        expected.append(min(int(np.searchsorted(q, u * q[-1], side="right")), n - 1))
    assert _seed_indices(held(d), draws) == expected
    carried = np.concatenate([part for _, part in _carried_cumsum(held(d))])
    assert all(carried[:, r].tobytes() == np.cumsum(d[:, r]).tobytes() for r in range(3))


# --------------------------------------------------------------------------------------------- streaming


def test_chunks_of_any_sizes_give_the_same_fit_to_the_bit(tmp_path):
    """One chunk, chunks cut across the fixed blocks, single-token and empty chunks, and memory-mapped .npy shards
    give byte-identical centres and records."""
    tokens = clustered_tokens(2 * BLOCK_ROWS + 777, 16, 5, seed=3)
    settings = ClusterSettings(5, seed=1, n_init=2)
    whole = fit_clusters(TokenStream.from_arrays([tokens]), settings)
    chunkings = [
        split(tokens, [1, 2, BLOCK_ROWS - 1, BLOCK_ROWS + 5, 7000]),
        split(tokens, list(range(333, tokens.shape[0], 333))),
        [tokens[:10], tokens[10:10], tokens[10:]],
    ]
    paths = []
    for i, part in enumerate(split(tokens, [2500, 5100])):
        paths.append(tmp_path / f"shard{i}.npy")
        np.save(paths[-1], part)
    streams = [TokenStream.from_arrays(c) for c in chunkings] + [TokenStream.from_npy(paths)]
    for stream in streams:
        fit = fit_clusters(stream, settings)
        assert fit.centres.tobytes() == whole.centres.tobytes()
        assert json.dumps(fit.record()) == json.dumps(whole.record())


def test_per_token_state_in_a_temporary_file_gives_the_same_fit(monkeypatch):
    """Past STATE_MEMORY bytes the seeding's distances and Lloyd's assignments live in a temporary file, read and
    written a block at a time: the fit is the in-memory one, to the bit."""
    from evaluate.semseg import cluster

    tokens = clustered_tokens(BLOCK_ROWS + 1500, 8, 4, seed=12)
    settings = ClusterSettings(4, seed=3, n_init=3)
    in_memory = fit_clusters(TokenStream.from_arrays([tokens]), settings)
    monkeypatch.setattr(cluster, "STATE_MEMORY", 0)
    on_disk = fit_clusters(TokenStream.from_arrays(split(tokens, [999])), settings)
    assert json.dumps(on_disk.record()) == json.dumps(in_memory.record())


def test_streamed_tokens_and_threads_give_the_same_fit(monkeypatch):
    """A set too large to hold its unit tokens (TOKENS_MEMORY) is streamed anew every pass, and the restarts' work
    may run in threads: the fit is the held, single-threaded one, to the bit."""
    from evaluate.semseg import cluster

    tokens = clustered_tokens(BLOCK_ROWS + 1500, 8, 4, seed=13)
    settings = ClusterSettings(4, seed=5, n_init=3)
    held = fit_clusters(TokenStream.from_arrays([tokens]), settings)
    threaded = fit_clusters(TokenStream.from_arrays([tokens]), settings, threads=3)
    monkeypatch.setattr(cluster, "TOKENS_MEMORY", 0)
    streamed = fit_clusters(TokenStream.from_arrays(split(tokens, [10, 4100])), settings, threads=2)
    assert json.dumps(threaded.record()) == json.dumps(held.record()) == json.dumps(streamed.record())


def test_a_new_centre_is_the_token_as_its_block_normalises_it():
    """`unit_row(i)` (a seed read alone) has the bits of row i inside its block, wherever the chunks cut."""
    tokens = clustered_tokens(BLOCK_ROWS + 50, 9, 3, seed=4)
    stream = TokenStream.from_arrays(split(tokens, [17, 3000]))
    for start, block in stream.blocks():
        for i in (0, 16, 17, block.shape[0] - 1):
            assert stream.unit_row(start + i).tobytes() == block[i].tobytes()


def test_the_float64_unit_tokens_are_the_stored_float32_divided_by_their_norm():
    tokens = clustered_tokens(300, 7, 2, seed=5)
    stream = TokenStream.from_arrays([tokens])
    ((_, block),) = list(stream.blocks())
    np.testing.assert_allclose(block, reference_unit(tokens), atol=1e-15)
    zero = np.flatnonzero(~tokens.any(axis=1))
    assert zero.size == 3 and not block[zero].any()


# -------------------------------------------------------------------------------------------- renumbering


def test_clusters_are_numbered_by_first_appearance_in_token_order():
    tokens = clustered_tokens(3000, 10, 6, seed=6)
    fit = fit_clusters(TokenStream.from_arrays([tokens]), ClusterSettings(6, n_init=2))
    labels = np.argmax(reference_unit(tokens) @ fit.centres.T, axis=1)
    assert list(dict.fromkeys(labels.tolist())) == list(range(6))
    assert list(fit.sizes) == np.bincount(labels, minlength=6).tolist()


def test_an_empty_cluster_keeps_its_centre():
    """Tokens all in the half-space x0 > 0; a seed centre pointing along -x0 never wins a token: Lloyd keeps it as it
    was, to the bit."""
    rng = np.random.default_rng(8)
    tokens = np.abs(rng.standard_normal((500, 3))) + [1.0, 0.0, 0.0]
    x = reference_unit(tokens)
    start = np.array([x[0], [-1.0, 0.0, 0.0], x[1]])
    (outcome,) = _lloyd(TokenStream.from_arrays([tokens.astype(np.float32)]), start[None].copy(), max_iter=100)
    assert outcome.made >= 2 and outcome.sizes[1] == 0 and set(outcome.first) == {0, 2}
    assert outcome.centres[1].tobytes() == start[1].tobytes()


def test_equal_maxima_go_to_the_first_cluster():
    """Two equal centres: every token nearer them than the third goes to the first of the two, so after one
    assignment the first has moved to those tokens' mean and the second, token-less, is where it was."""
    rng = np.random.default_rng(10)
    tokens = rng.standard_normal((300, 4))
    x = reference_unit(tokens)
    start = np.array([x[5], x[5], x[9]])
    (outcome,) = _lloyd(TokenStream.from_arrays([tokens.astype(np.float32)]), start[None].copy(), max_iter=1)
    first = x @ x[5] >= x @ x[9]
    assert outcome.made == 1 and outcome.centres[1].tobytes() == start[1].tobytes()
    np.testing.assert_allclose(outcome.centres[0], reference_unit(x[first].sum(axis=0, keepdims=True))[0],
                               atol=1e-12)
    assert first.sum() > 50


def test_the_best_restart_wins_and_an_equal_later_one_does_not():
    """Equal tokens: every restart reaches the same objective, so the first is chosen."""
    tokens = np.tile(np.array([[1.0, 2.0, 2.0]], dtype=np.float32), (40, 1))
    fit = fit_clusters(TokenStream.from_arrays([tokens]), ClusterSettings(2, n_init=4))
    assert len(set(fit.objectives)) == 1 and fit.restart == 0
    assert fit.objective == pytest.approx(40.0, rel=1e-12)


# ------------------------------------------------------------------------------------------------- the record


def test_the_record_names_the_setting_and_rebuilds_the_fit():
    tokens = clustered_tokens(400, 5, 3, seed=9)
    fit = fit_clusters(TokenStream.from_arrays([tokens]), ClusterSettings(3, seed=2, n_init=2, max_iter=50))
    record = json.loads(json.dumps(fit.record()))
    assert record["setting"] == "k=3,seed=2,n_init=2,iter=50"
    assert ClusterSettings(27).setting == "k=27,seed=0,n_init=5,iter=100"
    again = ClusterFit.from_record(record)
    assert again.centres.tobytes() == fit.centres.tobytes() and again.record() == fit.record()
    record["centres"][0][0] += 1e-9
    with pytest.raises(SemsegError, match="sha256"):
        ClusterFit.from_record(record)


# -------------------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("field, value", [("k", 0), ("n_init", 0), ("max_iter", 0), ("seed", -1), ("k", 2.5)])
def test_settings_out_of_range_are_refused(field, value):
    args = {"k": 3, "seed": 0, "n_init": 1, "max_iter": 10, field: value}
    with pytest.raises(SemsegError, match=field):
        ClusterSettings(**args)


def test_fewer_tokens_than_clusters_non_finite_tokens_and_ragged_chunks_are_refused():
    with pytest.raises(SemsegError, match="3 tokens cannot make 4 clusters"):
        fit_clusters(TokenStream.from_arrays([np.ones((3, 2), np.float32)]), ClusterSettings(4))
    bad = np.ones((10, 2), np.float32)
    bad[6, 1] = np.nan
    with pytest.raises(SemsegError, match="row 6 holds a non-finite value"):
        fit_clusters(TokenStream.from_arrays([bad]), ClusterSettings(2, n_init=1))
    with pytest.raises(SemsegError, match="token chunk 1 is 3 wide"):
        fit_clusters(TokenStream.from_arrays([np.ones((4, 2), np.float32), np.ones((4, 3), np.float32)]),
                     ClusterSettings(2))
    with pytest.raises(SemsegError, match="no tokens"):
        fit_clusters(TokenStream.from_arrays([np.ones((0, 2), np.float32)]), ClusterSettings(2))
