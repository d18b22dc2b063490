"""Barron and Poole's fast bilateral solver as TokenCut ships it (docs/design.md §16), on scipy's sparse matrices.

Grid: the RGB image (H, W, 3) in YUV (Y = 0.299 R + 0.587 G + 0.114 B; U, V from the JPEG matrix plus 128, float64);
each pixel's vertex is (x / s, y / s, Y / l, U / c, V / c) truncated to integers (s, l, c: `BilateralSettings`'
sigma_spatial 16, sigma_luma 16, sigma_chroma 8). The occupied vertices, sorted as the reference's hash sorts them
(V most significant, then U, Y, y, x), are the grid's n_v unknowns.

- splat S (n_v, n_px): S[v, i] = 1 where pixel i lies on vertex v; slice = S^T.
- blur B (n_v, n_v): B x = 2 * 5 * x plus each vertex's occupied neighbours at -1 and +1 along each of the 5 axes.
- bistochastisation: m = S 1, n = 1; 10 times n = sqrt(n * m / B n); then m = n * B n.
- system: A = lam (diag(m) - diag(n) B diag(n)) + diag(S c), b = S (t * c); t the target (the decoder's 0/1 mask
  at full size), c the confidence (0.999 everywhere); Jacobi preconditioner 1 / max(diag(A), a_diag_min).
- solve: conjugate gradient from y0 = S(t c) / S(c), at most 25 iterations, relative tolerance 1e-5 (scipy's `rtol`);
  output S^T y: a SOFT map (H, W) float64, what TokenCut scores.

Deterministic: the grid is built from integer coordinates, every product is scipy's serial sparse product, and CG
runs a fixed number of steps from a fixed start, so a run gives the same bytes run after run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import cg

from decoders.registry import DecoderError

RGB_TO_YUV = np.array([  # the JPEG (full-range BT.601) matrix of the reference
    [0.299, 0.587, 0.114],
    [-0.168736, -0.331264, 0.5],
    [0.5, -0.418688, -0.081312],
])
YUV_OFFSET = np.array([0.0, 128.0, 128.0])
AXES = 5  # x, y, luma, U, V


@dataclass(frozen=True)
class BilateralSettings:
    """TokenCut's parameters of the solver (its saliency script's command-line values), recorded with results."""

    sigma_spatial: float = 16.0
    sigma_luma: float = 16.0
    sigma_chroma: float = 8.0
    lam: float = 256.0
    confidence: float = 0.999
    bistochastic_iterations: int = 10
    cg_maxiter: int = 25
    cg_rtol: float = 1e-5
    a_diag_min: float = 1e-5

    def as_record(self) -> dict[str, Any]:
        return {"method": "bilateral-solver", **asdict(self)}


TOKENCUT_SOLVER = BilateralSettings()


def rgb_to_yuv(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 RGB -> (H, W, 3) float64 YUV, U and V offset by 128 (the reference's `rgb2yuv`)."""
    return np.tensordot(rgb.astype(np.float64), RGB_TO_YUV, ([2], [1])) + YUV_OFFSET


def vertex_coordinates(rgb: np.ndarray, settings: BilateralSettings = TOKENCUT_SOLVER) -> np.ndarray:
    """Each pixel's grid vertex, row by row: (H * W, 5) int64 (x / s, y / s, Y / l, U / c, V / c) truncated."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise DecoderError(f"bilateral solver: the reference image must be (H, W, 3) uint8, got {rgb.shape} "
                            f"{rgb.dtype}")
    h, w = rgb.shape[:2]
    yuv = rgb_to_yuv(rgb)
    iy, ix = np.mgrid[:h, :w]
    coords = np.stack([
        (ix / settings.sigma_spatial).astype(np.int64),
        (iy / settings.sigma_spatial).astype(np.int64),
        (yuv[..., 0] / settings.sigma_luma).astype(np.int64),
        (yuv[..., 1] / settings.sigma_chroma).astype(np.int64),
        (yuv[..., 2] / settings.sigma_chroma).astype(np.int64),
    ], axis=-1)
    return coords.reshape(-1, AXES)


@dataclass(frozen=True)
class BilateralGrid:
    """The occupied vertices of an image: splat S (n_v, n_px) csr float64, blur's neighbour part N (n_v, n_v) csr
    float64 (B = 2 * 5 * I + N), vertices (n_v, 5) int64 in hash order, `shape` (H, W)."""

    splat: sp.csr_matrix
    neighbours: sp.csr_matrix
    vertices: np.ndarray
    shape: tuple[int, int]

    @property
    def n_vertices(self) -> int:
        return self.vertices.shape[0]

    def blur(self, x: np.ndarray) -> np.ndarray:
        """B x = 2 * 5 * x + N x: x (n_v,) -> (n_v,)."""
        return 2 * AXES * x + self.neighbours @ x


def bilateral_grid(rgb: np.ndarray, settings: BilateralSettings = TOKENCUT_SOLVER) -> BilateralGrid:
    """The grid of an RGB image (H, W, 3) uint8 (see the module docstring)."""
    coords = vertex_coordinates(rgb, settings)
    n_px = coords.shape[0]
    # A mixed-radix hash with room for the -1 and +1 neighbours (coordinates shifted by 1): unlike the reference's
    # 255 ** d, it never collides on a large image; its order (x least significant) is the reference's.
    shifted = coords + 1
    radix = shifted.max(axis=0) + 2
    weights = np.concatenate([[1], np.cumprod(radix[:-1])]).astype(np.int64)
    hashes = shifted @ weights
    unique, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    n_v = unique.size
    splat = sp.csr_matrix((np.ones(n_px), (inverse.ravel(), np.arange(n_px))), shape=(n_v, n_px))
    rows, cols = [], []
    for axis in range(AXES):
        for step in (-1, 1):
            neighbour = unique + step * weights[axis]
            at = np.clip(np.searchsorted(unique, neighbour), 0, n_v - 1)
            found = np.flatnonzero(unique[at] == neighbour)
            rows.append(found)
            cols.append(at[found])
    rows_all, cols_all = np.concatenate(rows), np.concatenate(cols)
    neighbours = sp.csr_matrix((np.ones(rows_all.size), (rows_all, cols_all)), shape=(n_v, n_v))
    return BilateralGrid(splat, neighbours, coords[first], rgb.shape[:2])


def bistochastic(grid: BilateralGrid, iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """(m, n), each (n_v,) float64: m = S 1, n = 1; `iterations` times n = sqrt(n * m / B n); then m = n * B n."""
    m = np.asarray(grid.splat.sum(axis=1)).ravel()
    n = np.ones(grid.n_vertices)
    for _ in range(iterations):
        n = np.sqrt(n * m / grid.blur(n))
    return n * grid.blur(n), n


@dataclass(frozen=True)
class BilateralSystem:
    """The grid-space system A y = b of one image and target: A (n_v, n_v) csr float64 symmetric positive
    definite, b and y0 (n_v,) float64, the Jacobi preconditioner's diagonal `inverse_diagonal` (n_v,), the grid."""

    grid: BilateralGrid
    matrix: sp.csr_matrix
    rhs: np.ndarray
    start: np.ndarray
    inverse_diagonal: np.ndarray


def bilateral_system(rgb: np.ndarray, target: np.ndarray,
                     settings: BilateralSettings = TOKENCUT_SOLVER) -> BilateralSystem:
    """The system of an RGB image (H, W, 3) uint8 and a target (H, W) (0/1 or soft, any real dtype)."""
    if target.shape != rgb.shape[:2]:
        raise DecoderError(f"bilateral solver: target is {target.shape} but the image is {rgb.shape[:2]}")
    grid = bilateral_grid(rgb, settings)
    m, n = bistochastic(grid, settings.bistochastic_iterations)
    t = target.astype(np.float64).ravel()
    c = np.full(t.size, settings.confidence)
    c_splat = grid.splat @ c
    b = grid.splat @ (t * c)
    blur = sp.identity(grid.n_vertices, format="csr") * (2 * AXES) + grid.neighbours
    d_n = sp.diags(n)
    smooth = sp.diags(m) - d_n @ blur @ d_n
    matrix = (settings.lam * smooth + sp.diags(c_splat)).tocsr()
    inverse_diagonal = 1.0 / np.maximum(matrix.diagonal(), settings.a_diag_min)
    return BilateralSystem(grid, matrix, b, b / c_splat, inverse_diagonal)


def solve_vertices(system: BilateralSystem, settings: BilateralSettings = TOKENCUT_SOLVER) -> np.ndarray:
    """y (n_v,) float64: Jacobi-preconditioned CG on A y = b from y0 (module docstring)."""
    preconditioner = sp.diags(system.inverse_diagonal)
    y, _ = cg(system.matrix, system.rhs, x0=system.start, M=preconditioner, maxiter=settings.cg_maxiter,
              rtol=settings.cg_rtol)
    return y


def slice_vertices(grid: BilateralGrid, y: np.ndarray) -> np.ndarray:
    """S^T y: each pixel takes its vertex's value, (H, W) float64."""
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (grid.n_vertices,):
        raise DecoderError(f"bilateral solver: {y.shape[0] if y.ndim else 0} vertex values for a grid of "
                            f"{grid.n_vertices} vertices")
    return (grid.splat.T @ y).reshape(grid.shape)


def solve_system(system: BilateralSystem, settings: BilateralSettings = TOKENCUT_SOLVER) -> np.ndarray:
    """The solver's soft output S^T y: (H, W) float64."""
    return slice_vertices(system.grid, solve_vertices(system, settings))


def bilateral_refine(rgb: np.ndarray, target: np.ndarray, settings: BilateralSettings = TOKENCUT_SOLVER
                     ) -> np.ndarray:
    """TokenCut's refinement of a mask: rgb (H, W, 3) uint8 the original image, target (H, W) its 0/1 mask ->
    the soft output (H, W) float64 (not clipped: values may leave [0, 1] slightly)."""
    return solve_system(bilateral_system(rgb, target, settings), settings)


def refined_from_vertices(rgb: np.ndarray, y: np.ndarray, settings: BilateralSettings = TOKENCUT_SOLVER
                          ) -> np.ndarray:
    """The soft output again from the solved vertex values `y` (n_v,) float64 and the image they were solved on:
    the same (H, W) float64 bytes as `bilateral_refine` (the grid is a function of the image alone), so a reading
    stores y (a few thousand values) rather than the map."""
    return slice_vertices(bilateral_grid(rgb, settings), y)
