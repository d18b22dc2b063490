# Thin adapter: the logic lives in evaluate.pipeline.preprocess_job, where it is importable and tested.
from evaluate.jobs import run_job
from evaluate.pipeline import preprocess_job

run_job(snakemake, preprocess_job)  # noqa: F821 - `snakemake` is injected by Snakemake's script directive
