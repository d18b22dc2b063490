"""Mean-centred normalized cut on keys480 (docs/design.md §5): masks on the patch grid, label-free.

Per image, keys (N, C) on a (gh, gw) grid, N = gh * gw (keys480: N480 x D on the square grid of side sqrt(N480),
30 x 30 for p 16, 60 x 60 for p 8, 34 x 34 for p 14; a grid of None is that square grid):

1. centre: subtract the image's mean key (setting `centre`); L2-normalise each key. A key whose norm is below
   1e-9 of the image's largest key norm counts as a zero vector (cosine 0 with every key, itself included).
2. cosine matrix S (once per image and centre flag, shared by every setting of a sweep); affinity
   A = 1 where S > tau, else eps; d = row sums of A, D = diag(d).
3. x = second-smallest generalised eigenvector of (D - A) x = lambda D x, x' D x = 1 (`decoders.ncut.solver`:
   Lanczos on the symmetric normalised form, the dense reference `scipy.linalg.eigh(D - A, D, subset_by_index=[1,
   2])` where Lanczos cannot answer). x's sign is fixed: its entry of largest |x| is positive.
4. bipartition at the threshold t of `split` (mean: sum(x) / N as TokenCut writes it; zero; median): the two
   sides are x > t and x <= t. The seed is the patch of largest |x|, the lowest index among entries within a
   relative 1e-9 of the maximum (binary affinities make exact ties; this makes the choice deterministic).
   foreground "seed" (TokenCut): the side holding the seed. "corners" (MaskCut): the seed rule, then flip when
   >= 3 of the grid's 4 corner patches are foreground; the seed becomes the foreground patch of largest |x|.
   (MaskCut's code tests the corners of the x > mean side before the seed rule, which depends on the arbitrary
   sign of the eigenvector; testing the chosen foreground does not, and the kept foreground never holds >= 3
   corners.) component "seed": the 4-connected component (scipy.ndimage.label) holding the seed; "all": the side.
5. masks > 1 (MaskCut): the keys are centred and normalised once; before each further cut the normalised keys
   of every patch already taken (the union of the earlier cuts' masks) are set to 0, as MaskCut does, so their
   cosine with every patch, themselves included, is 0: their affinity is eps everywhere (for tau >= 0) and they
   stay in the graph as weakly tied nodes. A new cut whose mask has IoU > 0.5 with an earlier kept cut's mask is
   dropped and the image's cutting stops; so it does when the patches the new cut adds (its mask minus the
   patches already taken) cover at most 1% of the grid. As in MaskCut, the mask kept is the new cut's mask minus
   the patches already taken, so an image's masks are disjoint; the first mask is always kept.
6. Each kept mask carries ncut = Ncut(P, rest) = cut/assoc(P) + cut/assoc(rest) under the affinity of its own
   cut, and score = 1 - ncut / 2 in [0, 1]; a mask covering the whole grid is no cut: ncut 2, score 0.

Numerics: S's upper triangle is computed in float32 BLAS (ssyrk), then every entry within 4e-5 of tau (for 384
channels; a bound on float32's error for a dot product of unit vectors) is recomputed in float64, so the
thresholded affinity equals the one a float64 S gives. The 0/1 matrix of S > tau is held as its float64 upper
triangle and applied by dsymv (a third of a dense matrix-vector product's time at N = 900). With centre off,
tau 0.2, eps 1e-5, seed rule and one mask the masks equal those of the dense reference (docs/design.md §5);
tests/test_decoder.py checks this.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.linalg.blas as _blas
import scipy.ndimage

from decoders.ncut.settings import NcutSettings
from decoders.ncut.solver import SOLVERS, SolverStats, fiedler
from decoders.registry import DecoderError, square_grid
from evaluate.plumbing.threads import one_blas_thread

# |float32 S - exact S| for unit vectors of C entries is below C * 2^-24 (accumulation) plus input rounding:
# entries within S_BAND_PER_CHANNEL * (C + 16) of tau (4e-5 for keys480's 384 channels) are recomputed in float64.
S_BAND_PER_CHANNEL = 1e-7
ZERO_KEY = 1e-9  # relative norm below which a (centred) key counts as zero
SEED_TIE = 1e-9  # relative |x| difference treated as a tie when choosing the seed
IOU_STOP = 0.5
MIN_COVER = 0.01
_PAIR_CHUNK = 16384
LOWER_SENTINEL = -2.0  # below any cosine and any tau: marks the unused triangle of S


@dataclass
class GridMask:
    """One decoded mask on the patch grid.

    mask:  bool (gh, gw), True = foreground patch.
    score: 1 - ncut / 2, in [0, 1].
    ncut:  normalized-cut value of `mask` against the rest of the grid under the affinity of its cut, in [0, 2].
    """

    mask: np.ndarray
    score: float
    ncut: float



def check_keys(keys, grid: Sequence[int] | None = None) -> tuple[np.ndarray, tuple[int, int]]:
    """Validate one image's keys against its grid: -> (keys float64 (N, C), (gh, gw)); DecoderError if bad.

    grid None: the square grid of the keys' N rows (`decoders.registry.square_grid`), as keys480 always is."""
    arr = np.asarray(keys)
    if arr.ndim != 2:
        raise DecoderError(f"keys must be a 2-D array (patches, channels), got shape {arr.shape}")
    if grid is None:
        grid = square_grid(arr.shape[0])
    try:
        gh, gw = (int(v) for v in grid)
    except (TypeError, ValueError):
        raise DecoderError(f"grid must be two integers (rows, columns), got {grid!r}") from None
    if gh < 2 or gw < 2:
        raise DecoderError(f"grid must be at least 2 x 2 patches, got {gh} x {gw}")
    if arr.shape[0] != gh * gw:
        raise DecoderError(f"keys have {arr.shape[0]} rows but the grid {gh} x {gw} has {gh * gw} patches")
    if arr.shape[1] < 1:
        raise DecoderError(f"keys have no channels: shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(arr.dtype, np.integer):
        raise DecoderError(f"keys must be numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
        raise DecoderError(f"keys hold a non-finite value (first in patch row {bad})")
    return arr, (gh, gw)


class _Workspace(threading.local):
    """Per-thread reusable buffers (about 25 MB for keys480): allocating and freeing megabyte arrays per image and
    per tau costs page faults that, in gVisor sandboxes, took longer than the arithmetic. Contents are only valid
    inside one ncut_sweep call."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: int | tuple[int, ...], dtype, order: str = "C") -> np.ndarray:
        """A buffer of `shape` ((n, n) for an int), dtype and memory order, reused by name; contents undefined."""
        shape = (shape, shape) if isinstance(shape, int) else tuple(shape)
        arr = self.arrays.get(name)
        if arr is None or arr.shape != shape or arr.dtype != np.dtype(dtype) or not arr.flags[f"{order}_CONTIGUOUS"]:
            arr = np.empty(shape, dtype=dtype, order=order)
            self.arrays[name] = arr
        return arr

    def upper_square(self, name: str, n: int) -> np.ndarray:
        """float32 (n, n) Fortran-order buffer whose strict lower triangle holds LOWER_SENTINEL (written once: the
        symmetric BLAS routines that fill it touch only the upper triangle)."""
        arr = self.arrays.get(name)
        if arr is None or arr.shape != (n, n):
            arr = np.empty((n, n), dtype=np.float32, order="F")
            arr[np.tril_indices(n, -1)] = LOWER_SENTINEL
            self.arrays[name] = arr
        return arr


_WORKSPACE = _Workspace()


class _Features:
    """Centred (or not), L2-normalised keys of one image and the upper triangle of their float32 cosine matrix."""

    def __init__(self, keys64: np.ndarray, centre: bool):
        n, c = keys64.shape
        tag = int(centre)
        scale = float(np.sqrt(np.einsum("ij,ij->i", keys64, keys64).max()))
        kn = _WORKSPACE.get(f"kn-{tag}", (n, c), np.float64)
        if centre:
            np.subtract(keys64, keys64.mean(axis=0), out=kn)
        else:
            np.copyto(kn, keys64)
        norms = np.sqrt(np.einsum("ij,ij->i", kn, kn))
        self.live = norms > ZERO_KEY * scale if scale > 0 else np.zeros(n, dtype=bool)
        kn /= np.where(self.live, norms, 1.0)[:, None]
        if not self.live.all():
            kn[~self.live] = 0.0
        self.kn = kn  # float64 (N, C), zero rows for zero keys
        kn32 = _WORKSPACE.get(f"kn32-{tag}", (n, c), np.float32)
        np.copyto(kn32, kn, casting="same_kind")
        # S = kn32 kn32' by ssyrk: the upper triangle only (half a GEMM), written into a Fortran-order buffer whose
        # strict lower triangle keeps LOWER_SENTINEL (below every tau), so thresholds see only i <= j.
        s32 = _WORKSPACE.upper_square(f"s32-{tag}", n)
        out = _blas.ssyrk(1.0, kn32.T, beta=0.0, c=s32, trans=1, lower=0, overwrite_c=1)
        if not np.shares_memory(out, s32):  # pragma: no cover - f2py copies only if the buffer's layout is wrong
            raise RuntimeError("ssyrk did not write into its Fortran-order buffer")
        self.s32 = s32  # float32 (N, N) Fortran order: S[i, j] for i <= j, LOWER_SENTINEL below the diagonal

    def above(self, tau: float, out: np.ndarray) -> np.ndarray:
        """`out` bool (N, N) Fortran order := S > tau for i <= j exactly as float64 S decides (entries within the
        float32 error band of tau recomputed in float64); False below the diagonal."""
        s32 = self.s32
        n = s32.shape[0]
        band = np.float32(S_BAND_PER_CHANNEL * (self.kn.shape[1] + 16))
        above = np.greater(s32, np.float32(tau) + band, out=out)  # certainly above; the band is decided below
        near = np.greater(s32, np.float32(tau) - band, out=_WORKSPACE.get("near", n, np.bool_, "F"))
        np.not_equal(near, above, out=near)  # within the band
        cols, rows = np.divmod(np.flatnonzero(near.T), n)  # .T: C-contiguous view, no copy
        keep = self.live[rows] & self.live[cols]  # zero keys: S is exactly 0 in float32 too
        rows, cols = rows[keep], cols[keep]
        for start in range(0, rows.size, _PAIR_CHUNK):
            r, c = rows[start : start + _PAIR_CHUNK], cols[start : start + _PAIR_CHUNK]
            exact = np.einsum("ij,ij->i", self.kn[r], self.kn[c])
            above[r, c] = exact > tau
        return above


class _Graph:
    """The affinity of one cut: A = 1 where S > tau else eps, rows and columns of taken patches at eps.

    Held as the upper triangle of the 0/1 float64 matrix B of S > tau (Fortran order, shared by all cuts of one
    (image, centre, tau); products by dsymv, which reads that triangle only) and an `active` mask:
    A u = (1 - eps) B_T u + eps sum(u), B_T = diag(active) B diag(active).
    """

    def __init__(self, binary64: np.ndarray, eps: float, taken: np.ndarray):
        self.binary64 = binary64
        self.eps = eps
        self.n = binary64.shape[0]
        self.taken = taken
        self.any_taken = bool(taken.any())
        self.active = (~taken).astype(np.float64)
        ones = np.ones(self.n)
        counts = self.binary_apply(ones)  # exact integers: ones per row of B_T
        self.d = counts + eps * (self.n - counts)
        self._ncut: dict[bytes, float] = {}  # settings of a sweep often share a mask

    def binary_apply(self, u: np.ndarray, scale: float = 1.0) -> np.ndarray:
        """scale * B_T @ u, float64 (N,)."""
        if self.any_taken:
            return self.active * _blas.dsymv(scale, self.binary64, self.active * u)
        return _blas.dsymv(scale, self.binary64, u)

    def affinity_apply(self, u: np.ndarray) -> np.ndarray:
        """A @ u, float64 (N,)."""
        r = self.binary_apply(u, 1.0 - self.eps)
        r += self.eps * u.sum()
        return r

    def dense_affinity(self) -> np.ndarray:
        """A as a dense float64 (N, N) matrix, built as the references build it."""
        upper = np.triu(self.binary64 > 0.5)
        binary = upper | upper.T
        if self.any_taken:
            binary = binary & ~self.taken[:, None] & ~self.taken[None, :]
        return np.where(binary, 1.0, self.eps)

    def ncut_value(self, mask: np.ndarray) -> float:
        """Ncut(P, rest) = cut/assoc(P) + cut/assoc(rest); 2.0 when P or the rest is empty (no cut)."""
        key = np.packbits(mask).tobytes()
        value = self._ncut.get(key)
        if value is None:
            with one_blas_thread():
                value = self._ncut[key] = self._ncut_value(mask)
        return value

    def _ncut_value(self, mask: np.ndarray) -> float:
        p = mask.astype(np.float64)
        size_p = float(p.sum())
        size_q = self.n - size_p
        if size_p == 0 or size_q == 0:
            return 2.0
        q = 1.0 - p
        cut = (1.0 - self.eps) * float(p @ self.binary_apply(q)) + self.eps * size_p * size_q
        assoc_p = float(self.d[mask].sum())
        assoc_q = float(self.d[~mask].sum())
        return float(min(2.0, max(0.0, cut / assoc_p + cut / assoc_q)))


def _seed_of(magnitude: np.ndarray, among: np.ndarray | None = None) -> int:
    """Index of the largest magnitude (within `among` if given); near-ties (1e-9 relative) -> lowest index."""
    values = magnitude if among is None else np.where(among, magnitude, -np.inf)
    top = float(values.max())
    return int(np.flatnonzero(values >= top - SEED_TIE * abs(top))[0])


def _fix_sign(x: np.ndarray) -> np.ndarray:
    """x with its largest-|x| entry (seed rule's tie-break) positive."""
    seed = _seed_of(np.abs(x))
    return -x if x[seed] < 0 else x


def _threshold(x: np.ndarray, split: str) -> float:
    if split == "mean":
        return float(np.sum(x) / len(x))  # TokenCut's expression
    if split == "zero":
        return 0.0
    return float(np.median(x))


def cut_mask(x: np.ndarray, settings: NcutSettings, grid: tuple[int, int]) -> np.ndarray:
    """One cut's mask from its eigenvector: bool (N,) flat in row order.

    x: float (N,) with its sign fixed (largest |x| positive). Bipartition at the split threshold, foreground by
    the seed or corners rule, then the seed's 4-connected component or the whole side.
    """
    gh, gw = grid
    magnitude = np.abs(x)
    high = x > _threshold(x, settings.split)
    seed = _seed_of(magnitude)
    foreground = high if high[seed] else ~high
    if settings.foreground == "corners":
        corners = foreground[[0, gw - 1, (gh - 1) * gw, gh * gw - 1]]
        if int(corners.sum()) >= 3:
            foreground = ~foreground
            seed = _seed_of(magnitude, among=foreground)
    if settings.component == "all":
        return foreground
    labels, _ = scipy.ndimage.label(foreground.reshape(gh, gw))  # default structure: 4-connectivity
    flat = labels.ravel()
    return flat == flat[seed]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = int(np.count_nonzero(a | b))
    return int(np.count_nonzero(a & b)) / union if union else 0.0


def stop_reason(cut: np.ndarray, taken: np.ndarray, kept_cuts: Sequence[np.ndarray]) -> str | None:
    """Whether a further cut (not the first) is dropped, ending the image's cutting (docs/design.md §5 step 5).

    cut: bool (N,) mask of the new cut; taken: bool (N,) union of the earlier kept cuts; kept_cuts: their masks.
    -> "overlap" when IoU(cut, an earlier kept cut) > 0.5; "small" when the patches it adds (cut minus taken)
    cover at most 1% of the grid; None when it is kept.
    """
    if any(_iou(cut, earlier) > IOU_STOP for earlier in kept_cuts):
        return "overlap"
    if np.count_nonzero(cut & ~taken) <= MIN_COVER * cut.size:
        return "small"
    return None


class _ImageCuts:
    """Caches for one image: features per centre flag, the current (centre, tau) affinity, eigenvectors per cut."""

    def __init__(self, keys64: np.ndarray, grid: tuple[int, int], solver: str, stats: SolverStats):
        self.keys64 = keys64
        self.grid = grid
        self.solver = solver
        self.stats = stats
        self.n = keys64.shape[0]
        self._features: dict[bool, _Features] = {}
        self._binary_key: tuple[bool, float] | None = None
        self._binary64: np.ndarray | None = None
        self._cuts: dict[tuple, tuple[_Graph, np.ndarray]] = {}

    def features(self, centre: bool) -> _Features:
        if centre not in self._features:
            self._features[centre] = _Features(self.keys64, centre)
        return self._features[centre]

    def binary64(self, centre: bool, tau: float) -> np.ndarray:
        """float64 0/1 (N, N) Fortran order of S > tau, upper triangle (zeros below); only the latest (centre, tau)
        is held (6.5 MB for keys480)."""
        if self._binary_key != (centre, tau):
            self._cuts.clear()  # their graphs share the buffer about to be overwritten
            above = self.features(centre).above(tau, out=_WORKSPACE.get("above", self.n, np.bool_, "F"))
            self._binary64 = _WORKSPACE.get("binary64", self.n, np.float64, "F")
            np.copyto(self._binary64, above)
            self._binary_key = (centre, tau)
        return self._binary64

    def cut(self, settings: NcutSettings, taken: np.ndarray) -> tuple[_Graph, np.ndarray]:
        """(graph, x) of the cut with patches `taken` zeroed; x sign-fixed. Cached per (centre, tau, eps, taken)."""
        key = (settings.centre, settings.tau, settings.eps, taken.tobytes())
        hit = self._cuts.get(key)
        if hit is None:
            binary64 = self.binary64(settings.centre, settings.tau)
            graph = _Graph(binary64, settings.eps, taken.copy())
            x = _fix_sign(fiedler(graph, self.solver, self.stats))
            hit = (graph, x)
            self._cuts[key] = hit
        return hit

    def decode(self, settings: NcutSettings) -> list[GridMask]:
        taken = np.zeros(self.n, dtype=bool)
        kept_cuts: list[np.ndarray] = []
        masks: list[GridMask] = []
        for index in range(settings.masks):
            if index > 0 and taken.all():
                break
            graph, x = self.cut(settings, taken)
            cut = cut_mask(x, settings, self.grid)
            new = cut & ~taken
            if index > 0:
                reason = stop_reason(cut, taken, kept_cuts)
                if reason is not None:
                    setattr(self.stats, f"stop_{reason}", getattr(self.stats, f"stop_{reason}") + 1)
                    break
            ncut = graph.ncut_value(new)
            masks.append(GridMask(mask=new.reshape(self.grid), score=float(1.0 - ncut / 2.0), ncut=ncut))
            kept_cuts.append(cut)
            taken = taken | cut
        return masks


def _check_settings(settings) -> NcutSettings:
    if not isinstance(settings, NcutSettings):
        raise DecoderError(f"ncut settings must be an NcutSettings, got {type(settings).__name__}")
    return settings


def _image_cuts(keys, grid: Sequence[int], solver: str, stats: SolverStats | None) -> _ImageCuts:
    """One image's cut cache after checking the solver name and the keys' shape against the grid."""
    if solver not in SOLVERS:
        raise DecoderError(f"unknown ncut solver {solver!r}; known: {', '.join(SOLVERS)}")
    keys64, grid_t = check_keys(keys, grid)
    return _ImageCuts(keys64, grid_t, solver, stats if stats is not None else SolverStats())


def ncut_sweep(
    keys,
    settings_list: Sequence[NcutSettings],
    grid: Sequence[int] | None = None,
    solver: str = "lanczos",
    stats: SolverStats | None = None,
) -> list[list[GridMask]]:
    """Decode one image under many settings: -> one list of GridMask per setting, in the order given.

    keys: (N, C) float array of one image (keys480: (N480, D)); grid (gh, gw) with gh * gw = N, None for the square
    grid of N.
    The cosine matrix is computed once per centre flag, the thresholded affinity once per (centre, tau), each
    eigenproblem once per (centre, tau, eps, patches taken); results equal `ncut_decode` setting by setting.
    """
    image = _image_cuts(keys, grid, solver, stats)
    settings_list = [_check_settings(s) for s in settings_list]
    order = sorted(range(len(settings_list)), key=lambda i: (settings_list[i].centre, settings_list[i].tau, i))
    out: list[list[GridMask] | None] = [None] * len(settings_list)
    for i in order:
        out[i] = image.decode(settings_list[i])
    return out  # type: ignore[return-value]


def ncut_decode(
    keys,
    settings: NcutSettings,
    grid: Sequence[int] | None = None,
    solver: str = "lanczos",
    stats: SolverStats | None = None,
) -> list[GridMask]:
    """Decode one image: keys (N, C) float on grid (gh, gw) -> up to `settings.masks` GridMask, first cut first."""
    return ncut_sweep(keys, [settings], grid, solver=solver, stats=stats)[0]


def eigenvector(
    keys,
    settings: NcutSettings,
    grid: Sequence[int] | None = None,
    solver: str = "lanczos",
    stats: SolverStats | None = None,
) -> np.ndarray:
    """The first cut's generalised eigenvector x of one image, sign fixed: float64 (gh, gw) (for figures)."""
    image = _image_cuts(keys, grid, solver, stats)
    _, x = image.cut(_check_settings(settings), np.zeros(image.n, dtype=bool))
    return x.reshape(image.grid)

