# Stage 1-2: a data set's manifest (sorted image ids cut into shards), then keys480 and tokens224 per shard.


checkpoint manifest:
    input:
        annotations=annotations_path,
    output:
        manifest="results/datasets/{dataset}/manifest.json",
    params:
        dataset=lambda w: dataset_params(w.dataset),
        shard_size=FEATURES.get("shard_size", 64),
        code=CODE["datasets"],
    log:
        "logs/manifest/{dataset}.log",
    benchmark:
        "benchmarks/manifest/{dataset}.tsv"
    script:
        "../scripts/manifest.py"


rule extract:
    input:
        checkpoint=checkpoint_path,
        manifest="results/datasets/{dataset}/manifest.json",
    output:
        keys480="results/features/{checkpoint}/{dataset}/{shard}/keys480.npy",
        tokens224="results/features/{checkpoint}/{dataset}/{shard}/tokens224.npy",
        image_ids="results/features/{checkpoint}/{dataset}/{shard}/image_ids.json",
        meta="results/features/{checkpoint}/{dataset}/{shard}/meta.json",
    params:
        which=lambda w: CHECKPOINTS[w.checkpoint].which,
        dataset=lambda w: dataset_params(w.dataset),
        batch_size=FEATURES.get("batch_size", 8),
        dtype=FEATURES.get("dtype", "float16"),
        device=FEATURES.get("device", "auto"),
        autocast=FEATURES.get("autocast", False),
        code=CODE["features"],
    threads: FEATURES.get("threads", 2)
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        "logs/extract/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/extract/{checkpoint}/{dataset}/{shard}.tsv"
    script:
        "../scripts/extract.py"


rule features:
    """Every checkpoint's features on every data set: `snakemake features` extracts and stops there."""
    input:
        all_features,
