# Saliency as the field publishes it (docs/design.md §16): every checkpoint's TokenCut reading of each shard of each
# saliency set (through the one reading runner; label-free, with the bilateral solver where the set asks for it),
# and one scoring job per checkpoint and set that opens the masks and writes a ledger record.
stage_jobs("saliency", "read_saliency", "score_saliency")
SALIENCY = in_section("saliency")
RECORDS.extend(expand(paths.SALIENCY_RECORD, checkpoint=CHECKPOINTS, dataset=SALIENCY))


rule read_saliency:
    """TokenCut's reading of one shard by one checkpoint: each image's seed component and the solver's solution."""
    input:
        checkpoint=checkpoint_path,
        manifest=paths.MANIFEST,
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
        dataset=dataset_of,
        job=JOBS["read_saliency"],
        code=code_of("read_saliency"),
    script:
        "../scripts/run_job.py"


rule score_saliency:
    """Opens a saliency set's masks: TokenCut's and PySODMetrics' measures, before and after the solver -> one
    ledger record."""
    input:
        manifest=paths.MANIFEST,
        readings=per_shard(paths.SALIENCY_READING),
        metas=per_shard(paths.SALIENCY_META),
        checkpoint=checkpoint_path,
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
        dataset=dataset_of,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_saliency"],
        code=code_of("score_saliency"),
    script:
        "../scripts/run_job.py"
