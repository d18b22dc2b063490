# Thin adapter: the logic lives in evaluate.pipeline.merge_masks_job, where it is importable and tested.
from evaluate.jobs import run_job
from evaluate.pipeline import merge_masks_job

run_job(snakemake, merge_masks_job)  # noqa: F821 - `snakemake` is injected by Snakemake's script directive
