# Unsupervised semantic segmentation (docs/design.md §18; DESIGN 16): every checkpoint's tokens320 of each shard of
# each semseg set (through the one reading runner, the released form, float32), its clusters fitted on a set's every
# token (the set itself, or `fit_on`), each shard's cluster maps (label-free), and one scoring job per checkpoint and
# set that opens the labels once, matches the clusters to the classes and writes a ledger record.
stage_jobs(
    "semseg",
    "extract_tokens320",
    "fit_clusters",
    "predict_clusters",
    "score_semseg",
)
SEMSEG = in_section("semseg")
RECORDS.extend(expand(paths.SEMSEG_RECORD, checkpoint=CHECKPOINTS, dataset=SEMSEG))


rule extract_tokens320:
    """tokens320 of one checkpoint on one shard: the image's scored square, the network in its released form."""
    input:
        checkpoint=checkpoint_path,
        manifest=paths.MANIFEST,
    output:
        tokens=paths.TOKENS320,
        image_ids=paths.IMAGE_IDS,
        meta=paths.FEATURES_META,
    log:
        "logs/extract_tokens320/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/extract_tokens320/{checkpoint}/{dataset}/{shard}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SEMSEG),
    threads: config["features"]["threads"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        features=features("device"),
        job=JOBS["extract_tokens320"],
        code=code_of("extract_tokens320"),
    script:
        "../scripts/run_job.py"


rule fit_clusters:
    """The spherical k-means of every token of one set by one checkpoint (label-free)."""
    input:
        tokens=per_shard(paths.TOKENS320),
        metas=per_shard(paths.FEATURES_META),
    output:
        fit=paths.SEMSEG_FIT,
    log:
        "logs/fit_clusters/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/fit_clusters/{checkpoint}/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SEMSEG),
    threads: config["features"]["threads"]
    resources:
        mem_mb=4000,
        runtime=240,
    params:
        dataset=dataset_of,
        clustering=lambda wildcards: {
            k: config["semseg"][wildcards.dataset][k] for k in ("extra_clusters", "seed", "n_init", "max_iter")
        },
        job=JOBS["fit_clusters"],
        code=code_of("fit_clusters"),
    script:
        "../scripts/run_job.py"


rule predict_clusters:
    """Each image's cluster map of one shard (its tokens against the fitted centres), a PNG each (label-free)."""
    input:
        tokens=paths.TOKENS320,
        meta=paths.FEATURES_META,
        fit=fitted_clusters,
    output:
        maps=directory(paths.SEMSEG_MAPS),
    log:
        "logs/predict_clusters/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/predict_clusters/{checkpoint}/{dataset}/{shard}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SEMSEG),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        job=JOBS["predict_clusters"],
        code=job_code("predict_clusters"),
    script:
        "../scripts/run_job.py"


rule score_semseg:
    """Opens a semseg set's labels: the clusters matched to the classes once, unsupervised mIoU and accuracy -> one
    ledger record."""
    input:
        manifest=paths.MANIFEST,
        maps=per_shard(paths.SEMSEG_MAPS),
        meta=first_shard_meta,
        fit=fitted_clusters,
        checkpoint=checkpoint_path,
    output:
        record=paths.SEMSEG_RECORD,
    log:
        "logs/score_semseg/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/score_semseg/{checkpoint}/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SEMSEG),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        checkpoint=checkpoint_of,
        dataset=dataset_of,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_semseg"],
        code=code_of("score_semseg"),
    script:
        "../scripts/run_job.py"
