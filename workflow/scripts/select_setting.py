# Thin adapter: the logic lives in evaluate.pipeline.select_setting_job, where it is importable and tested.
from evaluate.jobs import run_job
from evaluate.pipeline import select_setting_job

run_job(snakemake, select_setting_job)  # noqa: F821 - `snakemake` is injected by Snakemake's script directive
