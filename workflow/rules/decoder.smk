# Stage 3: the label-free decoder. Its settings are swept once, on the `select` data set and the reference
# checkpoint; the best by mean Jaccard is then used for every checkpoint on every `eval` data set.
stage_jobs(
    "decoder",
    "sweep_decode",
    "select_setting",
    "decode",
    "merge_masks",
    "score_decoder",
)
if SELECT_DATASET:
    RECORDS.append(paths.SWEEP_RECORD.format(checkpoint=REFERENCE, dataset=SELECT_DATASET))
    RECORDS.extend(expand(paths.DECODER_RECORD, checkpoint=CHECKPOINTS, dataset=EVAL_DATASETS))


rule sweep_decode:
    """Every setting of the sweep grid on one shard of the select data set (label-free: masks only)."""
    input:
        keys480=paths.KEYS480.replace("{checkpoint}", REFERENCE),
        image_ids=paths.IMAGE_IDS.replace("{checkpoint}", REFERENCE),
        meta=paths.FEATURES_META.replace("{checkpoint}", REFERENCE),
    output:
        paths.SWEEP_SHARD,
    log:
        "logs/sweep_decode/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/sweep_decode/{dataset}/{shard}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=120,
    params:
        decoder=config["decoder"],
        job=JOBS["sweep_decode"],
        code=job_code("sweep_decode"),
    script:
        "../scripts/run_job.py"


rule select_setting:
    """Opens the select data set's labels once, scores every setting, keeps the best by mean Jaccard."""
    input:
        unpack(select_setting_inputs),
    output:
        selected=paths.SELECTED,
        table=paths.SWEEP_TABLE,
        record=paths.SWEEP_RECORD.format(checkpoint=REFERENCE, dataset=SELECT_DATASET),
    log:
        "logs/select_setting.log",
    benchmark:
        "benchmarks/select_setting.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        dataset=dataset_params(SELECT_DATASET) if SELECT_DATASET else None,
        checkpoint=checkpoint_params(REFERENCE),
        decoder=config["decoder"],
        bootstrap=config["bootstrap"],
        run_time=run_time(SELECT_DATASET),
        job=JOBS["select_setting"],
        code=job_code("select_setting"),
    script:
        "../scripts/run_job.py"


rule decode:
    """The selected setting on one shard of one checkpoint's keys: COCO results with RLE masks."""
    input:
        keys480=paths.KEYS480,
        image_ids=paths.IMAGE_IDS,
        meta=paths.FEATURES_META,
        manifest=paths.MANIFEST,
        selected=paths.SELECTED,
    output:
        paths.MASKS_SHARD,
    log:
        "logs/decode/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/decode/{checkpoint}/{dataset}/{shard}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        job=JOBS["decode"],
        code=job_code("decode"),
    script:
        "../scripts/run_job.py"


rule merge_masks:
    """One COCO results file per checkpoint and data set, in image-id order (label-free)."""
    input:
        per_shard(paths.MASKS_SHARD),
    output:
        paths.MASKS,
    log:
        "logs/merge_masks/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/merge_masks/{checkpoint}/{dataset}.tsv"
    params:
        job=JOBS["merge_masks"],
        code=job_code("merge_masks"),
    script:
        "../scripts/run_job.py"


rule score_decoder:
    """Opens the eval data set's labels: Jaccard, mask AP, AP50, AR@10, CorLoc -> one ledger record."""
    input:
        masks=paths.MASKS,
        meta=first_shard_meta,
        manifest=paths.MANIFEST,
        selected=paths.SELECTED,
        checkpoint=checkpoint_path,
    output:
        record=paths.DECODER_RECORD,
    log:
        "logs/score_decoder/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/score_decoder/{checkpoint}/{dataset}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_decoder"],
        code=job_code("score_decoder"),
    script:
        "../scripts/run_job.py"
