# Thin adapter: the logic lives in evaluate.pipeline.html_report_job, where it is importable and tested.
from evaluate.jobs import run_job
from evaluate.pipeline import html_report_job

run_job(snakemake, html_report_job)  # noqa: F821 - `snakemake` is injected by Snakemake's script directive
