# The embedded demo: seeded random networks in the real formats, and procedurally drawn data sets with exact masks,
# each in its kind's own layout (evaluate.datasets.KINDS names the drawing). Only data sets and checkpoints that
# carry a `demo:` entry in the config are generated.
stage_jobs("demo", "demo_dataset", "demo_checkpoint")


rule demo_dataset:
    """A demo data set drawn in its kind's layout at results/demo/<section>/<name>."""
    output:
        directory(paths.DEMO_DATASET),
    log:
        "logs/demo_dataset/{section}/{dataset}.log",
    benchmark:
        "benchmarks/demo_dataset/{section}/{dataset}.tsv"
    wildcard_constraints:
        section=_alternatives({d.section for d in ALL_DATASETS.values()}),
        dataset=_alternatives(DEMO_DATASETS),
    params:
        writer=lambda wildcards: ALL_DATASETS[wildcards.dataset].demo_writer,
        demo=lambda wildcards: ALL_DATASETS[wildcards.dataset].demo,
        job=JOBS["demo_dataset"],
        code=code_of("demo_dataset"),
    script:
        "../scripts/run_job.py"


rule demo_checkpoint:
    output:
        paths.DEMO_CHECKPOINT,
    log:
        "logs/demo_checkpoint/{checkpoint}.{suffix}.log",
    benchmark:
        "benchmarks/demo_checkpoint/{checkpoint}.{suffix}.tsv"
    wildcard_constraints:
        checkpoint=_alternatives(DEMO_CHECKPOINTS),
        suffix="pth|safetensors",
    params:
        demo=demo_checkpoint_of,
        job=JOBS["demo_checkpoint"],
        code=job_code("demo_checkpoint"),
    script:
        "../scripts/run_job.py"
