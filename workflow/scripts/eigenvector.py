# Thin adapter: the logic lives in evaluate.pipeline.eigenvector_job, where it is importable and tested.
from evaluate.jobs import run_job
from evaluate.pipeline import eigenvector_job

run_job(snakemake, eigenvector_job)  # noqa: F821 - `snakemake` is injected by Snakemake's script directive
