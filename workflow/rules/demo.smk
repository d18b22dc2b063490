# The embedded demo: procedurally drawn scenes and videos with exact masks, and seeded random networks in the real
# formats. Only data sets, video sets and checkpoints that carry a `demo:` entry in the config are generated.


rule demo_dataset:
    output:
        annotations=paths.DEMO_ANNOTATIONS,
        images=directory(paths.DEMO_IMAGES),
    log:
        "logs/demo_dataset/{dataset}.log",
    benchmark:
        "benchmarks/demo_dataset/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DEMO_DATASETS),
    params:
        demo=demo_dataset_of,
        job=JOBS["demo_dataset"],
        code=CODE["demo_dataset"],
    script:
        "../scripts/run_job.py"


rule demo_checkpoint:
    output:
        paths.DEMO_CHECKPOINT,
    log:
        "logs/demo_checkpoint/{checkpoint}.log",
    benchmark:
        "benchmarks/demo_checkpoint/{checkpoint}.tsv"
    wildcard_constraints:
        checkpoint=_alternatives(DEMO_CHECKPOINTS),
    params:
        demo=demo_checkpoint_of,
        job=JOBS["demo_checkpoint"],
        code=CODE["demo_checkpoint"],
    script:
        "../scripts/run_job.py"


rule demo_video:
    """The demo's video set: moving shapes with exact masks, in DAVIS's layout (evaluate.demo.videos)."""
    output:
        directory(paths.DEMO_VIDEO),
    log:
        "logs/demo_video/{dataset}.log",
    benchmark:
        "benchmarks/demo_video/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DEMO_VIDEOS),
    params:
        demo=demo_video_of,
        job=JOBS["demo_video"],
        code=CODE["demo_video"],
    script:
        "../scripts/run_job.py"


rule demo_discovery:
    """The demo's object-discovery set: the demo scenes as a VOC year folder (evaluate.demo.discovery)."""
    output:
        directory(paths.DEMO_DISCOVERY),
    log:
        "logs/demo_discovery/{dataset}.log",
    benchmark:
        "benchmarks/demo_discovery/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DEMO_DISCOVERY),
    params:
        demo=lambda wildcards: DISCOVERY[wildcards.dataset].demo,
        job=JOBS["demo_discovery"],
        code=CODE["demo_discovery"],
    script:
        "../scripts/run_job.py"


rule demo_saliency:
    """The demo's saliency set: the demo scenes and their salient masks in ECSSD's layout (evaluate.demo.saliency)."""
    output:
        directory(paths.DEMO_SALIENCY),
    log:
        "logs/demo_saliency/{dataset}.log",
    benchmark:
        "benchmarks/demo_saliency/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DEMO_SALIENCY),
    params:
        demo=lambda wildcards: SALIENCY[wildcards.dataset].demo,
        job=JOBS["demo_saliency"],
        code=CODE["demo_saliency"],
    script:
        "../scripts/run_job.py"
