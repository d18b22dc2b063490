# Stage 1-2: a data set's manifest (sorted image ids cut into shards); each shard's images decoded once (uint8
# inputs shared by every checkpoint); then keys480 and tokens224 per checkpoint and shard.


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


rule preprocess:
    """A shard's images decoded and resized once (both readings, uint8) in `features.workers` processes, into
    results/inputs/{dataset}/{shard}/; the .json beside it stays as the record that they were made."""
    input:
        manifest="results/datasets/{dataset}/manifest.json",
    output:
        marker="results/inputs/{dataset}/{shard}.json",
    params:
        dataset=lambda w: dataset_params(w.dataset),
        code=CODE["inputs"],
    threads: FEATURES["workers"]
    resources:
        mem_mb=2000,
        runtime=60,
    log:
        "logs/preprocess/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/preprocess/{dataset}/{shard}.tsv"
    script:
        "../scripts/preprocess.py"


# The decoded inputs' folder is not a declared file: where it is gone (features.keep false drops it), extract decodes
# the images itself, to the same bytes; a declared temporary file would instead make every finished extract re-run
# when a new checkpoint needs the shard decoded again. With features.keep false keys480 and tokens224 are temporary.
rule extract:
    input:
        checkpoint=checkpoint_path,
        manifest="results/datasets/{dataset}/manifest.json",
        inputs="results/inputs/{dataset}/{shard}.json",
    output:
        keys480=feature_output("results/features/{checkpoint}/{dataset}/{shard}/keys480.npy"),
        tokens224=feature_output("results/features/{checkpoint}/{dataset}/{shard}/tokens224.npy"),
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
