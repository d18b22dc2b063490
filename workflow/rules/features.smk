# Stage 1-2: the `datasets:` sets' keys480 and tokens224 per checkpoint and shard (the reading keys480+tokens224,
# through the one reading runner), from each shard's images decoded once for every checkpoint.
stage_jobs("features", "preprocess", "extract")


rule preprocess:
    """A shard's images decoded and resized once (both readings, uint8) in `features.workers` processes, into
    results/inputs/{dataset}/{shard}/; the .json beside it stays as the record that they were made."""
    input:
        manifest=paths.MANIFEST,
    output:
        record=paths.INPUTS_RECORD,
    log:
        "logs/preprocess/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/preprocess/{dataset}/{shard}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DATASETS),
    threads: config["features"]["workers"]
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        dataset=dataset_of,
        job=JOBS["preprocess"],
        code=code_of("preprocess"),
    script:
        "../scripts/run_job.py"


# The decoded inputs' folder is not a declared file: where it is gone (features.keep false drops it), extract decodes
# the images itself, to the same bytes; a declared temporary file would instead make every finished extract re-run
# when a new checkpoint needs the shard decoded again. With features.keep false keys480 and tokens224 are temporary.
rule extract:
    input:
        checkpoint=checkpoint_path,
        manifest=paths.MANIFEST,
        inputs=paths.INPUTS_RECORD,
    output:
        keys480=feature_output(paths.KEYS480),
        tokens224=feature_output(paths.TOKENS224),
        image_ids=paths.IMAGE_IDS,
        meta=paths.FEATURES_META,
    log:
        "logs/extract/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/extract/{checkpoint}/{dataset}/{shard}.tsv"
    wildcard_constraints:
        dataset=_alternatives(DATASETS),
    threads: config["features"]["threads"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        features=features("batch_size", "dtype", "device", "precision", "form"),
        run_time=run_time_of,
        job=JOBS["extract"],
        code=code_of("extract"),
    script:
        "../scripts/run_job.py"


rule features:
    """Every checkpoint's features on every data set: `snakemake features` extracts and stops there."""
    input:
        all_features,
