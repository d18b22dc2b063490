# The embedded demo: procedurally drawn scenes with exact masks, and seeded random networks in the real formats.
# Only data sets and checkpoints that carry a `demo:` entry in the config are generated.


rule demo_dataset:
    output:
        annotations=paths.DEMO_ANNOTATIONS,
        images=directory(paths.DEMO_IMAGES),
    params:
        demo=demo_dataset_of,
        job=JOBS["demo_dataset"],
        code=CODE["demo_dataset"],
    wildcard_constraints:
        dataset=_alternatives(DEMO_DATASETS),
    log:
        "logs/demo_dataset/{dataset}.log",
    benchmark:
        "benchmarks/demo_dataset/{dataset}.tsv"
    script:
        "../scripts/run_job.py"


rule demo_checkpoint:
    output:
        paths.DEMO_CHECKPOINT,
    params:
        demo=demo_checkpoint_of,
        job=JOBS["demo_checkpoint"],
        code=CODE["demo_checkpoint"],
    wildcard_constraints:
        checkpoint=_alternatives(DEMO_CHECKPOINTS),
    log:
        "logs/demo_checkpoint/{checkpoint}.log",
    benchmark:
        "benchmarks/demo_checkpoint/{checkpoint}.tsv"
    script:
        "../scripts/run_job.py"
