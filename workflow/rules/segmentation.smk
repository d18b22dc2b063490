# DINO's class-token attention masks against VOC12's objects (docs/design.md §17; DINO's Figure 4 table): every
# checkpoint's class-token attention of each shard of each segmentation set (through the one reading runner, the
# network in its released form whatever `features.form` says), and one scoring job per checkpoint and set that opens
# the object maps once and writes a ledger record (a record of no measure, and no opening, for a network without a
# class token).
stage_jobs("segmentation", "read_cls_attention", "score_attention_masks")
SEGMENTATION = in_section("segmentation")
RECORDS.extend(expand(paths.ATTENTION_MASKS_RECORD, checkpoint=CHECKPOINTS, dataset=SEGMENTATION))


rule read_cls_attention:
    """The last block's class-token attention over the patches, per head, of one shard by one checkpoint."""
    input:
        checkpoint=checkpoint_path,
        manifest=paths.MANIFEST,
    output:
        reading=paths.CLS_ATTENTION_SHARD,
        meta=paths.CLS_ATTENTION_META,
    log:
        "logs/read_cls_attention/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/read_cls_attention/{checkpoint}/{dataset}/{shard}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SEGMENTATION),
    threads: config["features"]["threads"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        features=features("device"),
        job=JOBS["read_cls_attention"],
        code=code_of("read_cls_attention"),
    script:
        "../scripts/run_job.py"


rule score_attention_masks:
    """Opens a segmentation set's object maps: the 60% masks' best-head Jaccard per object -> one ledger record."""
    input:
        manifest=paths.MANIFEST,
        readings=per_shard(paths.CLS_ATTENTION_SHARD),
        metas=per_shard(paths.CLS_ATTENTION_META),
        checkpoint=checkpoint_path,
    output:
        record=paths.ATTENTION_MASKS_RECORD,
    log:
        "logs/score_attention_masks/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/score_attention_masks/{checkpoint}/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SEGMENTATION),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_attention_masks"],
        code=code_of("score_attention_masks"),
    script:
        "../scripts/run_job.py"
