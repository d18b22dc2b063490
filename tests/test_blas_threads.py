"""BLAS threads as the rule says (issue 34, point 6; docs/design.md §8): inside a job the BLAS libraries (numpy's and
scipy's OpenBLAS) run with its rule's `threads`, those loaded before the job and those it loads alike, and so do the
processes it starts; the decoder's masks, whose rules run on one thread, are those of any thread count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import threadpoolctl

from sources import REPO

# A job run through the one adapter's function, in a fresh process whose environment sets no thread count: numpy is
# loaded before the job starts (as the job module's imports load it), scipy's BLAS by the job itself, and the job
# starts a child process; each reports the BLAS libraries' thread counts.
JOB = """
import json, subprocess, sys
from types import SimpleNamespace
import numpy, threadpoolctl
from evaluate.jobs import run_job

def counts():
    return sorted(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")

def job(smk):
    import scipy.linalg  # its own OpenBLAS, loaded inside the job
    child = subprocess.run([sys.executable, "-c", "import numpy, threadpoolctl; print(json.dumps(sorted("
                            "i['num_threads'] for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas')))"
                            .replace("import numpy", "import json, numpy")], capture_output=True, text=True, check=True)
    print(json.dumps({"libraries": len(counts()), "job": counts(), "child": json.loads(child.stdout)}),
          file=sys.__stdout__)

print(json.dumps({"before": counts()}), file=sys.__stdout__)
run_job(SimpleNamespace(log=[], rule="probe", threads=int(sys.argv[1]), wildcards={}), job)
"""


def _run_job(threads: int) -> dict:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}  # no OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, ...
    out = subprocess.run([sys.executable, "-c", JOB, str(threads)], capture_output=True, text=True, cwd=REPO,
                         env=env, check=True).stdout.splitlines()
    return {**json.loads(out[0]), **json.loads(out[1])}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: a BLAS library starts one thread by itself")
def test_a_job_s_blas_libraries_run_with_its_rule_s_threads():
    found = _run_job(1)
    assert found["before"] == [os.cpu_count()], found  # control: left alone, OpenBLAS starts a thread per core
    assert found["libraries"] == 2, found  # numpy's and scipy's OpenBLAS
    assert found["job"] == [1, 1], found
    assert found["child"] == [1], found


@pytest.mark.skipif((os.cpu_count() or 1) < 3, reason="fewer than 3 cores: 2 threads is OpenBLAS's own choice")
def test_the_rule_s_threads_are_kept_when_more_than_one():
    found = _run_job(2)
    assert found["job"] == [2, 2] and found["child"] == [2], found


# ----------------------------------------------------------------------- the decoder's rules at one thread, not all

COUNTS = (1, 2, 4)  # more threads than cores is allowed: OpenBLAS splits the work as it would on a larger machine


def test_the_decoder_s_masks_and_scores_are_the_same_at_any_blas_thread_count():
    """What let the decoder's rules (threads: 1) go from every core's BLAS threads to one without changing a mask:
    the cosine GEMM's float32 band is decided again in float64, Lanczos runs on one thread, and the Ncut values too."""
    from decoders.ncut.cut import ncut_sweep
    from decoders.ncut.settings import TOKENCUT
    from decoders.ncut.solver import SolverStats

    from test_decoder import structured_keys  # image-like keys: smooth fields, a blob, a shared offset, noise

    keys = structured_keys(seed=1)
    settings = [TOKENCUT.replace(tau=tau, centre=centre) for tau in (0.2, 0.3) for centre in (False, True)]
    results = []
    for threads in COUNTS:
        stats = SolverStats()
        with threadpoolctl.threadpool_limits(limits=threads, user_api="blas"):
            masks = ncut_sweep(keys, settings, (30, 30), stats=stats)
        assert stats.fallbacks == 0  # Lanczos answered every eigenproblem (the dense solver takes the job's threads)
        results.append([[(m.mask.tobytes(), m.score) for m in per_setting] for per_setting in masks])
    assert len({mask for per_setting in results[0] for mask, _ in per_setting}) > 1  # the settings cut differently
    assert results[1] == results[0] and results[2] == results[0]
