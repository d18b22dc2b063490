# Every data set's listing, whatever its kind (docs/design.md §3, §4): its manifest (images or sequences, the shards,
# the labels' identity), written by one job per data set, a Snakemake checkpoint, so the stages' jobs per shard or
# sequence are known once it exists. Listing opens no label.
stage_jobs("datasets", "manifest")


checkpoint manifest:
    """A data set's images (or sequences) cut into shards, and its labels' identity (listings and hashes only)."""
    input:
        manifest_source,
    output:
        manifest=paths.MANIFEST,
    log:
        "logs/manifest/{dataset}.log",
    benchmark:
        "benchmarks/manifest/{dataset}.tsv"
    params:
        dataset=dataset_of,
        shard_size=config["features"]["shard_size"],
        run_time=run_time_of,
        job=JOBS["manifest"],
        code=code_of("manifest"),
    script:
        "../scripts/run_job.py"
