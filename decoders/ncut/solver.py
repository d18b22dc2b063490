"""The eigenvector of one cut (docs/design.md §5 step 3): x of (D - A) x = lambda D x for the second-smallest lambda.

Solved in the symmetric normalised form: M = D^-1/2 A D^-1/2 has the known top eigenvector y0 = sqrt(d)
(eigenvalue 1); Lanczos with full re-orthogonalisation (classical Gram-Schmidt, twice) against y0 and the Krylov
basis finds M's largest eigenvector y on the complement of y0, and x = D^-1/2 y (so x' D x = 1, as LAPACK's
generalised solver normalises). The start vector is deterministic: sqrt(d) * (d / mean(d) - 1) plus a fixed-seed
perturbation (never global random state). When Lanczos breaks down, does not converge, or finds the two top
eigenvalues too close to separate (gap < 1e-4), the dense reference `scipy.linalg.eigh(D - A, D,
subset_by_index=[1, 2])` answers instead, counted in `SolverStats`. `solver="dense"` always uses that reference.
Lanczos runs BLAS on one thread (`evaluate.plumbing.threads.one_blas_thread`, for speed); the dense reference on the
caller's threads (in a job, its rule's).

The graph is the cut's affinity (`decoders.ncut.cut._Graph`): `n`, degrees `d`, `affinity_apply(u)` = A u and
`dense_affinity()` = A as a dense matrix.
"""

from __future__ import annotations

from dataclasses import dataclass, fields as dc_fields
from typing import Any, Callable

import numpy as np
import scipy.linalg

from evaluate.plumbing.threads import one_blas_thread

SOLVERS = ("lanczos", "dense")
LANCZOS_TOL = 1e-11  # residual of the top Ritz pair, relative to the spectral gap
LANCZOS_GAP_MIN = 1e-4  # top two eigenvalues of M closer than this: dense fallback
LANCZOS_MAX_STEPS = 150


@dataclass
class SolverStats:
    """Counts of how eigenproblems were solved and why multi-mask cutting stopped.

    One eigenproblem per distinct (image, centre, tau, eps, patches taken).

    lanczos: solved by Lanczos; dense: solved densely because solver="dense" was asked for;
    fallback_breakdown / fallback_close / fallback_unconverged: Lanczos gave up (invariant subspace found, top two
    eigenvalues closer than 1e-4, no convergence within 150 steps) and the dense reference answered;
    matvecs: products with the affinity matrix spent by Lanczos;
    stop_overlap / stop_small: further cuts dropped (ending an image's cutting) by the IoU > 0.5 / 1% rule.
    """

    eigenproblems: int = 0
    lanczos: int = 0
    dense: int = 0
    fallback_breakdown: int = 0
    fallback_close: int = 0
    fallback_unconverged: int = 0
    matvecs: int = 0
    stop_overlap: int = 0
    stop_small: int = 0

    @property
    def fallbacks(self) -> int:
        """Eigenproblems Lanczos handed to the dense solver."""
        return self.fallback_breakdown + self.fallback_close + self.fallback_unconverged

    def as_dict(self) -> dict[str, int]:
        out = {f.name: int(getattr(self, f.name)) for f in dc_fields(self)}
        out["fallbacks"] = self.fallbacks
        return out

    def add(self, other: "SolverStats") -> None:
        """Accumulate another stats object into this one."""
        for f in dc_fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


_PERTURBATIONS: dict[int, np.ndarray] = {}


def _perturbation(n: int) -> np.ndarray:
    """A fixed unit vector of length n (seeded generator 0): part of Lanczos's deterministic start."""
    vec = _PERTURBATIONS.get(n)
    if vec is None:
        vec = np.random.default_rng(0).standard_normal(n)
        vec /= np.linalg.norm(vec)
        vec.setflags(write=False)
        _PERTURBATIONS[n] = vec
    return vec


def _lanczos_top(apply_m: Callable[[np.ndarray], np.ndarray], y0: np.ndarray, v0: np.ndarray):
    """Largest eigenvector of symmetric M on the complement of its known unit eigenvector y0.

    Lanczos with full (twice repeated) re-orthogonalisation against y0 and the basis. Returns (y, steps, status):
    status "ok" with y a unit float64 (N,) vector, or "breakdown" / "close" / "unconverged" with y None.
    """
    n = y0.size
    steps_max = min(LANCZOS_MAX_STEPS, n - 2)
    basis = np.empty((steps_max + 2, n))
    basis[0] = y0
    v = v0 - (y0 @ v0) * y0
    v_norm = np.linalg.norm(v)
    if not v_norm > 0:
        return None, 0, "breakdown"
    basis[1] = v / v_norm
    alphas = np.zeros(steps_max)
    betas = np.zeros(steps_max)
    for j in range(1, steps_max + 1):
        w = apply_m(basis[j])
        # full re-orthogonalisation, classical Gram-Schmidt twice against y0 and the basis so far; the projection
        # onto basis[j] is alpha and the one onto basis[j - 1] is the previous beta (up to rounding)
        block = basis[: j + 1]
        h = block @ w
        w -= h @ block
        h2 = block @ w
        w -= h2 @ block
        alpha = float(h[j] + h2[j])
        beta = float(np.linalg.norm(w))
        alphas[j - 1] = alpha
        betas[j - 1] = beta
        broke = beta <= 1e-10
        if j >= 2 and (j % 2 == 0 or broke or j == steps_max):
            tri = np.diag(alphas[:j]) + np.diag(betas[: j - 1], 1) + np.diag(betas[: j - 1], -1)
            theta, vecs = np.linalg.eigh(tri)
            gap = float(theta[-1] - theta[-2])
            res1 = beta * abs(float(vecs[-1, -1]))
            res2 = beta * abs(float(vecs[-1, -2]))
            if gap < LANCZOS_GAP_MIN and res1 <= 1e-8:
                return None, j, "close"
            if not broke and res1 <= LANCZOS_TOL * gap and res2 <= 1e-3 * gap:
                y = vecs[:, -1] @ basis[1 : j + 1]
                return y / np.linalg.norm(y), j, "ok"
        if broke:
            return None, j, "breakdown"
        basis[j + 1] = w / beta
    return None, steps_max, "unconverged"


def _dense_fiedler(graph: Any) -> np.ndarray:
    """The dense reference: x = eigh(D - A, D, subset_by_index=[1, 2]) first column, float64 (N,), on the caller's
    BLAS threads (a job's: its rule's; its last bits depend on that count, `evaluate.plumbing.threads`)."""
    affinity = graph.dense_affinity()
    degree = np.diag(affinity.sum(axis=1))
    _, vectors = scipy.linalg.eigh(degree - affinity, degree, subset_by_index=[1, 2])
    return np.array(vectors[:, 0])


def fiedler(graph: Any, solver: str, stats: SolverStats) -> np.ndarray:
    """x of (D - A) x = lambda D x for the second-smallest lambda, x' D x = 1, sign not yet fixed."""
    stats.eigenproblems += 1
    if solver == "dense":
        stats.dense += 1
        return _dense_fiedler(graph)
    d = graph.d
    inv_sqrt_d = 1.0 / np.sqrt(d)
    y0 = np.sqrt(d)
    y0 /= np.linalg.norm(y0)

    def apply_m(y: np.ndarray) -> np.ndarray:
        u = inv_sqrt_d * y
        r = graph.affinity_apply(u)
        r *= inv_sqrt_d
        return r

    v0 = np.sqrt(d) * (d / d.mean() - 1.0)
    v0_norm = np.linalg.norm(v0)
    v0 = (v0 / v0_norm if v0_norm > 0 else v0) + 1e-2 * _perturbation(graph.n)
    with one_blas_thread():
        y, steps, status = _lanczos_top(apply_m, y0, v0)
    stats.matvecs += steps
    if status == "ok":
        stats.lanczos += 1
        return inv_sqrt_d * y
    setattr(stats, f"fallback_{status}", getattr(stats, f"fallback_{status}") + 1)
    return _dense_fiedler(graph)
