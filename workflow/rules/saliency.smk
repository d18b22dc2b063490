# Saliency as the field publishes it (docs/design.md §16): each saliency set's pairs listed once (a Snakemake
# checkpoint), every checkpoint's TokenCut reading per shard (label-free, with the bilateral solver where the set
# asks for it), and one scoring job per checkpoint and set that opens the masks and writes a ledger record.


checkpoint saliency_manifest:
    """A saliency set's pairs and shards, and its masks' identity (listings and hashes: no opening)."""
    input:
        saliency_source,
    output:
        manifest=paths.SALIENCY_MANIFEST,
    log:
        "logs/saliency_manifest/{dataset}.log",
    benchmark:
        "benchmarks/saliency_manifest/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SALIENCY),
    params:
        spec=saliency_of,
        shard_size=config["features"]["shard_size"],
        job=JOBS["saliency_manifest"],
        code=CODE["saliency_manifest"],
    script:
        "../scripts/run_job.py"


rule read_saliency:
    """TokenCut's reading of one shard by one checkpoint: each image's seed component and the solver's solution."""
    input:
        checkpoint=checkpoint_path,
        manifest=paths.SALIENCY_MANIFEST,
    output:
        reading=paths.SALIENCY_READING,
        meta=paths.SALIENCY_META,
    log:
        "logs/read_saliency/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/read_saliency/{checkpoint}/{dataset}/{shard}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SALIENCY),
    threads: config["features"]["threads"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        checkpoint=checkpoint_of,
        spec=saliency_of,
        job=JOBS["read_saliency"],
        code=CODE["read_saliency"],
    script:
        "../scripts/run_job.py"


rule score_saliency:
    """Opens a saliency set's masks: TokenCut's and PySODMetrics' measures, before and after the solver -> one
    ledger record."""
    input:
        unpack(score_saliency_inputs),
    output:
        record=paths.SALIENCY_RECORD,
    log:
        "logs/score_saliency/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/score_saliency/{checkpoint}/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SALIENCY),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        checkpoint=checkpoint_of,
        spec=saliency_of,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_saliency"],
        code=CODE["score_saliency"],
    script:
        "../scripts/run_job.py"
