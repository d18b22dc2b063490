# Thin adapter: the logic lives in evaluate.pipeline.demo_checkpoint_job, where it is importable and tested.
from evaluate.jobs import run_job
from evaluate.pipeline import demo_checkpoint_job

run_job(snakemake, demo_checkpoint_job)  # noqa: F821 - `snakemake` is injected by Snakemake's script directive
