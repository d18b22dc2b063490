"""The job layer: one module per rule file, and `run_job`, which the one script adapter hands every job to.

A stage's path is short and one-way: `workflow/rules/<stage>.smk` -> `evaluate/jobs/<stage>.py` -> one entry
function of the stage's package, where every line that decides a number lives and is unit-tested. A job function
turns Snakemake's object into typed arguments in its first lines, from `params`, `input`, `output`, `wildcards`,
`threads` and `log` only (never `config`: what a job reads of the config when it runs comes as a `RunTime` param,
docs/design.md §8), then makes that one call. `workflow/scripts/run_job.py` is the one adapter: every rule names
its job function in `params.job`. Each rule's code hash is computed from the imports of its job function
(`evaluate.plumbing.provenance.job_code_hash`).

`run_job`: the job's torch and BLAS threads are its rule's `threads` (`torch_threads`,
`evaluate.plumbing.threads.blas_threads`: two one-thread jobs no longer contend for every core); its progress goes
to its log file; an `EvaluationError` (bad checkpoint, corrupt image, broken
annotation, exhausted budget...) ends the job with its one-line message on the console and in the log, with no
traceback to dig through, a ConfigError's preceded by the experiment file the workflow read
(`evaluate.plumbing.config.experiment_file`); any other exception is a bug and keeps its full traceback.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import sys
import time
from typing import Any, Callable

from evaluate import EvaluationError
from evaluate.plumbing.config import experiment_file, in_file
from evaluate.plumbing.threads import blas_threads


class _ThreadsOnImport(importlib.abc.MetaPathFinder):
    """Sets torch's threads as the job first imports torch, once torch has run its own import."""

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            load, threads = spec.loader.exec_module, self.threads

            def exec_module(module: Any) -> None:
                load(module)
                module.set_num_threads(threads)

            spec.loader.exec_module = exec_module
        return spec


def torch_threads(threads: int) -> None:
    """torch's intra-op threads = `threads` for this process, now if torch is imported, else as it is imported: a job
    that never uses torch (listings, merges, scoring from files, tables) does not pay the seconds its import costs."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
        return
    waiting = [finder for finder in sys.meta_path if isinstance(finder, _ThreadsOnImport)]
    if waiting:
        waiting[0].threads = threads
    else:
        sys.meta_path.insert(0, _ThreadsOnImport(threads))


def run_job(smk: Any, job: Callable[[Any], None]) -> None:
    """Run `job(smk)` with its log file as stderr and `smk.threads` torch/BLAS threads."""
    log_path = smk.log[0] if len(smk.log) else None
    console = sys.__stderr__
    log_file = open(log_path, "w", buffering=1) if log_path else None
    stream = log_file or console
    sys.stderr = stream
    logging.basicConfig(
        level=logging.INFO, stream=stream, force=True, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    log = logging.getLogger(f"rule.{smk.rule}")
    # matplotlib's font cache stays inside the working directory (read-only HOME on cluster nodes is fine)
    os.environ.setdefault("MPLCONFIGDIR", os.path.abspath(os.path.join(".snakemake", "matplotlib")))
    torch_threads(max(1, int(smk.threads)))
    blas_threads(max(1, int(smk.threads)))
    started = time.time()
    try:
        with in_file(experiment_file()):
            job(smk)
    except EvaluationError as err:
        message = f"ERROR in rule {smk.rule} ({dict(smk.wildcards.items())}): {err}"
        log.error("%s", err)
        if log_file is not None:
            print(message, file=console, flush=True)
        sys.exit(1)
    except BaseException:
        log.exception("job failed (this is a bug, please report it with this log)")
        raise
    else:
        log.info("done in %.1f s", time.time() - started)
    finally:
        sys.stderr = console
        if log_file is not None:
            log_file.close()
