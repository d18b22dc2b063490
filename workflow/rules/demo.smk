# The embedded demo: procedurally drawn scenes with exact masks, and seeded random networks in the real formats.
# Only data sets and checkpoints that carry a `demo:` entry in config.yaml are generated.

DEMO_DATASETS = [n for n, d in DATASETS.items() if d.demo]
DEMO_CHECKPOINTS = [n for n, c in CHECKPOINTS.items() if c.demo]


rule demo_dataset:
    output:
        annotations="results/demo/datasets/{dataset}/annotations.json",
        images=directory("results/demo/datasets/{dataset}/images"),
    params:
        demo=lambda w: DATASETS[w.dataset].demo,
        code=CODE["demo_dataset"],
    wildcard_constraints:
        dataset=_alternatives(DEMO_DATASETS),
    log:
        "logs/demo_dataset/{dataset}.log",
    benchmark:
        "benchmarks/demo_dataset/{dataset}.tsv"
    script:
        "../scripts/demo_dataset.py"


rule demo_checkpoint:
    output:
        "results/demo/checkpoints/{checkpoint}.pth",
    params:
        demo=lambda w: CHECKPOINTS[w.checkpoint].demo,
        code=CODE["demo_checkpoint"],
    wildcard_constraints:
        checkpoint=_alternatives(DEMO_CHECKPOINTS),
    log:
        "logs/demo_checkpoint/{checkpoint}.log",
    benchmark:
        "benchmarks/demo_checkpoint/{checkpoint}.tsv"
    script:
        "../scripts/demo_checkpoint.py"
