# Object discovery as the field publishes it (docs/design.md §12): each box data set's images listed once (a
# Snakemake checkpoint), keys-native per checkpoint and shard, every box decoder's boxes per shard (label-free), and
# one scoring job per checkpoint, data set and box decoder that opens the labels and writes a ledger record.

# a keys-native shard's meta.json has keys480's path: the data set's name (constrained per rule) tells them apart
ruleorder: extract_native > extract


checkpoint discovery_manifest:
    """A box data set's images and shards, and its labels' identity (listings and hashes: no opening)."""
    input:
        discovery_source,
    output:
        manifest=paths.DISCOVERY_MANIFEST,
    log:
        "logs/discovery_manifest/{dataset}.log",
    benchmark:
        "benchmarks/discovery_manifest/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DISCOVERY),
    params:
        spec=discovery_of,
        shard_size=config["features"]["shard_size"],
        job=JOBS["discovery_manifest"],
        code=CODE["discovery_manifest"],
    script:
        "../scripts/run_job.py"


rule extract_native:
    """keys-native of one checkpoint on one shard: each image at its own size, the network in its released form."""
    input:
        checkpoint=checkpoint_path,
        manifest=paths.DISCOVERY_MANIFEST,
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
        spec=discovery_of,
        features={k: config["features"][k] for k in ("dtype", "device", "precision")},
        job=JOBS["extract_native"],
        code=CODE["extract_native"],
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
        code=CODE["discover_boxes"],
    script:
        "../scripts/run_job.py"


rule score_discovery:
    """Opens a box data set's labels: CorLoc on boxes of one box decoder for one checkpoint -> one ledger record."""
    input:
        unpack(score_discovery_inputs),
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
        spec=discovery_of,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_discovery"],
        code=CODE["score_discovery"],
    script:
        "../scripts/run_job.py"
