# Object discovery as the field publishes it (docs/design.md §15): keys-native per checkpoint and shard of each box
# data set (through the one reading runner), every box decoder's boxes per shard (label-free), and one scoring job
# per checkpoint, data set and box decoder that opens the labels and writes a ledger record.
stage_jobs("discovery", "extract_native", "discover_boxes", "score_discovery")
DISCOVERY = in_section("discovery")
BOX_DECODERS = EXP.box_decoders
RECORDS.extend(expand(paths.DISCOVERY_RECORD, decoder=BOX_DECODERS, checkpoint=CHECKPOINTS, dataset=DISCOVERY))


# a keys-native shard's meta.json has keys480's path: the data set's name (constrained per rule) tells them apart
ruleorder: extract_native > extract


rule extract_native:
    """keys-native of one checkpoint on one shard: each image at its own size, the network in its released form."""
    input:
        checkpoint=checkpoint_path,
        manifest=paths.MANIFEST,
    output:
        native=feature_output(paths.NATIVE_KEYS),
        index=paths.NATIVE_INDEX,
        meta=paths.FEATURES_META,
    log:
        "logs/extract_native/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/extract_native/{checkpoint}/{dataset}/{shard}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DISCOVERY),
    threads: config["features"]["threads"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        features=features("dtype", "device", "precision"),
        job=JOBS["extract_native"],
        code=code_of("extract_native"),
    script:
        "../scripts/run_job.py"


rule discover_boxes:
    """Every box decoder of the registry on one keys-native shard: one box per image and decoder (no label)."""
    input:
        native=paths.NATIVE_KEYS,
        index=paths.NATIVE_INDEX,
        meta=paths.FEATURES_META,
    output:
        boxes=paths.DISCOVERY_BOXES,
    log:
        "logs/discover_boxes/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/discover_boxes/{checkpoint}/{dataset}/{shard}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DISCOVERY),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        job=JOBS["discover_boxes"],
        code=job_code("discover_boxes"),
    script:
        "../scripts/run_job.py"


rule score_discovery:
    """Opens a box data set's labels: CorLoc on boxes of one box decoder for one checkpoint -> one ledger record."""
    input:
        manifest=paths.MANIFEST,
        boxes=per_shard(paths.DISCOVERY_BOXES),
        meta=first_shard_meta,
        checkpoint=checkpoint_path,
    output:
        record=paths.DISCOVERY_RECORD,
    log:
        "logs/score_discovery/{decoder}/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/score_discovery/{decoder}/{checkpoint}/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DISCOVERY),
        decoder=_alternatives(BOX_DECODERS),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_discovery"],
        code=code_of("score_discovery"),
    script:
        "../scripts/run_job.py"
