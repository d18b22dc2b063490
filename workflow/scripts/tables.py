# Thin adapter: the logic lives in evaluate.pipeline.tables_job, where it is importable and tested.
from evaluate.jobs import run_job
from evaluate.pipeline import tables_job

run_job(snakemake, tables_job)  # noqa: F821 - `snakemake` is injected by Snakemake's script directive
