# The attention-spread reading (docs/design.md §13): label-free, in jobs of its own, so adding it to a finished run
# re-runs nothing else. Per checkpoint and eval data set: one job per shard on the shard's decoded 224-px inputs,
# then one ledger record; and one image's rows of one query patch for the per-patch figure. Both readings go through
# the one reading runner, the network in the backbone form whatever `features.form` says (the reading's definition).
stage_jobs("attention", "attention_shard", "attention_record", "attention_rows")
if config["attention"]:
    RECORDS.extend(expand(paths.ATTENTION_RECORD, checkpoint=CHECKPOINTS, dataset=EVAL_DATASETS))


rule attention_shard:
    """Per image and (block, head): the mean entropy (nats) and spread (e^H / N) of the attention rows; for XCiT a
    file that says the reading is absent."""
    input:
        checkpoint=checkpoint_path,
        manifest=paths.MANIFEST,
        inputs=paths.INPUTS_RECORD,
    output:
        shard=paths.ATTENTION_SHARD,
        meta=paths.ATTENTION_META,
    log:
        "logs/attention_shard/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/attention_shard/{checkpoint}/{dataset}/{shard}.tsv"
    # before the shard's extract jobs where both are ready: with features.keep false the last of those drops the
    # decoded inputs, which this job would then decode again
    priority: 1
    threads: config["features"]["threads"]
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        features=features("batch_size", "device"),
        run_time=run_time_of,
        job=JOBS["attention_shard"],
        code=code_of("attention_shard"),
    script:
        "../scripts/run_job.py"


rule attention_record:
    """The label-free `attention` record of a checkpoint on an eval data set: opens no labels."""
    input:
        shards=per_shard(paths.ATTENTION_SHARD),
        metas=per_shard(paths.ATTENTION_META),
    output:
        record=paths.ATTENTION_RECORD,
    log:
        "logs/attention_record/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/attention_record/{checkpoint}/{dataset}.tsv"
    params:
        checkpoint=checkpoint_of,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["attention_record"],
        code=job_code("attention_record"),
    script:
        "../scripts/run_job.py"


rule attention_rows:
    """One image's last-block attention rows of the query patch `figures.attention_patch`, per head."""
    input:
        checkpoint=checkpoint_path,
        manifest=paths.MANIFEST,
    output:
        rows=paths.ATTENTION_ROWS,
        meta=paths.ATTENTION_ROWS_META,
    log:
        "logs/attention_rows/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/attention_rows/{checkpoint}/{dataset}.tsv"
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        features=features("device"),
        image=config["figures"]["attention_image"],
        patch=config["figures"]["attention_patch"],
        job=JOBS["attention_rows"],
        code=code_of("attention_rows"),
    script:
        "../scripts/run_job.py"
