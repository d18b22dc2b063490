# Stage 4: one linear layer on the frozen tokens224, trained once per checkpoint on `probe-train`, and scored by
# its own job on each `eval` data set, so a new eval data set runs only its own scoring jobs.
stage_jobs("probe", "train_probe", "score_probe")
if PROBE_TRAIN_DATASET:
    RECORDS.extend(expand(paths.PROBE_RECORD, checkpoint=CHECKPOINTS, dataset=PROBE_EVAL_DATASETS))


rule train_probe:
    """Opens the probe-train set's labels once: the probe's weights and what it was trained on."""
    input:
        unpack(train_probe_inputs),
    output:
        weights=paths.PROBE_WEIGHTS,
        training=paths.PROBE_TRAINING,
    log:
        "logs/train_probe/{checkpoint}.log",
    benchmark:
        "benchmarks/train_probe/{checkpoint}.tsv"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=120,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_params(PROBE_TRAIN_DATASET) if PROBE_TRAIN_DATASET else None,
        probe=config["probe"],
        bootstrap=config["bootstrap"],
        run_time=run_time(PROBE_TRAIN_DATASET),
        job=JOBS["train_probe"],
        code=job_code("train_probe"),
    script:
        "../scripts/run_job.py"


rule score_probe:
    """Opens one eval data set's labels once: probe mIoU and patch accuracy -> one ledger record."""
    input:
        unpack(score_probe_inputs),
    output:
        record=paths.PROBE_RECORD,
    log:
        "logs/score_probe/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/score_probe/{checkpoint}/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(PROBE_EVAL_DATASETS),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_probe"],
        code=job_code("score_probe"),
    script:
        "../scripts/run_job.py"
