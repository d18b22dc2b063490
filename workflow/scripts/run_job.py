# The one script adapter: every rule names its job function in `params.job` ("evaluate.jobs.<stage>:<function>");
# the job turns Snakemake's object into typed arguments and calls its stage's package.
import importlib

from evaluate.jobs import run_job

module, _, function = snakemake.params.job.partition(":")  # noqa: F821 - injected by Snakemake's script directive
run_job(snakemake, getattr(importlib.import_module(module), function))  # noqa: F821
