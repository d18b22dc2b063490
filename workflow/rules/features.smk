# Stage 1-2: a data set's manifest (sorted image ids cut into shards), then keys480 and tokens224 per shard.


checkpoint manifest:
    input:
        annotations=annotations_path,
    output:
        manifest=paths.MANIFEST,
    log:
        "logs/manifest/{dataset}.log",
    benchmark:
        "benchmarks/manifest/{dataset}.tsv"
    params:
        dataset=dataset_of,
        shard_size=config["features"]["shard_size"],
        job=JOBS["manifest"],
        code=CODE["manifest"],
    script:
        "../scripts/run_job.py"


rule extract:
    input:
        checkpoint=checkpoint_path,
        manifest=paths.MANIFEST,
    output:
        keys480=paths.KEYS480,
        tokens224=paths.TOKENS224,
        image_ids=paths.IMAGE_IDS,
        meta=paths.FEATURES_META,
    log:
        "logs/extract/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/extract/{checkpoint}/{dataset}/{shard}.tsv"
    threads: config["features"]["threads"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        which=which_of,
        dataset=dataset_of,
        features={k: config["features"][k] for k in ("batch_size", "dtype", "device", "autocast")},
        job=JOBS["extract"],
        code=CODE["extract"],
    script:
        "../scripts/run_job.py"


rule features:
    """Every checkpoint's features on every data set: `snakemake features` extracts and stops there."""
    input:
        all_features,
