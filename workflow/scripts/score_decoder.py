# Thin adapter: the logic lives in evaluate.pipeline.score_decoder_job, where it is importable and tested.
from evaluate.jobs import run_job
from evaluate.pipeline import score_decoder_job

run_job(snakemake, score_decoder_job)  # noqa: F821 - `snakemake` is injected by Snakemake's script directive
