"""The BLAS libraries' threads (numpy's and scipy's OpenBLAS, or an MKL): a job's are its rule's `threads`
(docs/design.md §8).

- `blas_threads(n)`: this process's BLAS threads = n. Libraries loaded already are set through threadpoolctl; those
  a later import loads read the environment as they load (OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, OMP_NUM_THREADS;
  OpenBLAS takes at most the machine's cores there), as do the processes the job starts. Left alone, OpenBLAS
  starts a thread per core in every job, so two one-thread jobs contended for every core, and a number whose last
  bits depend on the thread count (a long dot product, a GEMM, LAPACK's dense eigensolver) depended on the machine.
  Now it depends at most on the rule's `threads`, a fixed number per rule (1 for the decoder's and every scoring
  rule; `features.threads` for the readings, whose torch arithmetic depends on it too, recorded in their meta.json).
- `one_blas_thread()`: a context in which BLAS runs on one thread, for work that is faster so: Lanczos's 900 x 900
  matrix-vector products are a fraction of a millisecond, and waking BLAS threads for each cost more than they
  saved (4x slower on 2 cores).
- `blas_thread_counts()`: the thread count of each BLAS library loaded, for tests and logs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")

_CONTROLLERS: dict[int, Any] = {}


def _controller() -> Any:
    """threadpoolctl's controller of the libraries loaded now (threadpoolctl is a dependency: pyproject.toml). Made
    again once a module was imported since (a BLAS library loads with the module that needs it: scipy's after
    numpy's); building one costs about a millisecond, using it a hundredth of that."""
    import threadpoolctl

    loaded = len(sys.modules)
    if loaded not in _CONTROLLERS:
        _CONTROLLERS.clear()
        _CONTROLLERS[loaded] = threadpoolctl.ThreadpoolController()
    return _CONTROLLERS[loaded]


def blas_threads(threads: int) -> None:
    """This process's BLAS threads = `threads`: the libraries loaded now, and those loaded later (module docstring)."""
    threads = max(1, int(threads))
    for variable in BLAS_VARIABLES:
        os.environ[variable] = str(threads)
    import threadpoolctl

    threadpoolctl.threadpool_limits(limits=threads, user_api="blas")


def one_blas_thread() -> contextlib.AbstractContextManager:
    """A context running BLAS on one thread; on leaving it the libraries have their threads back."""
    return _controller().limit(limits=1, user_api="blas")


def blas_thread_counts() -> list[int]:
    """The thread count of each BLAS library loaded in this process (numpy's, scipy's, ...)."""
    import threadpoolctl

    return [info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]
