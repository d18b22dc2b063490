# Stage 3: the label-free decoder. Its settings are swept once, on the `select` data set and the reference
# checkpoint; the best by mean Jaccard is then used for every checkpoint on every `eval` data set.


rule sweep_decode:
    """Every setting of the sweep grid on one shard of the select data set (label-free: masks only)."""
    input:
        keys480=f"results/features/{REFERENCE}/{{dataset}}/{{shard}}/keys480.npy",
        image_ids=f"results/features/{REFERENCE}/{{dataset}}/{{shard}}/image_ids.json",
        meta=f"results/features/{REFERENCE}/{{dataset}}/{{shard}}/meta.json",
    output:
        "results/decoder/sweep/{dataset}/{shard}.npz",
    params:
        decoder=DECODER,
        code=CODE["decoder"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=120,
    log:
        "logs/sweep_decode/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/sweep_decode/{dataset}/{shard}.tsv"
    script:
        "../scripts/sweep_decode.py"


rule select_setting:
    """Opens the select data set's labels once, scores every setting, keeps the best by mean Jaccard."""
    input:
        sweep=sweep_shards,
        manifest=f"results/datasets/{SELECT_DATASET}/manifest.json",
        annotations=DATASETS[SELECT_DATASET].annotations if SELECT_DATASET else [],
        checkpoint=CHECKPOINTS[REFERENCE].path,
    output:
        selected="results/decoder/selected.yaml",
        table="results/decoder/sweep.csv",
        record=f"results/ledger/records/sweep/{REFERENCE}/{SELECT_DATASET}.json",
    params:
        dataset=dataset_params(SELECT_DATASET) if SELECT_DATASET else None,
        checkpoint=checkpoint_params(REFERENCE),
        decoder=DECODER,
        bootstrap=config.get("bootstrap", {}),
        code=CODE["scores"],
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        "logs/select_setting.log",
    benchmark:
        "benchmarks/select_setting.tsv"
    script:
        "../scripts/select_setting.py"


rule decode:
    """The selected setting on one shard of one checkpoint's keys: COCO results with RLE masks."""
    input:
        keys480="results/features/{checkpoint}/{dataset}/{shard}/keys480.npy",
        image_ids="results/features/{checkpoint}/{dataset}/{shard}/image_ids.json",
        meta="results/features/{checkpoint}/{dataset}/{shard}/meta.json",
        manifest="results/datasets/{dataset}/manifest.json",
        selected="results/decoder/selected.yaml",
    output:
        "results/decoder/masks/{checkpoint}/{dataset}/{shard}.json",
    params:
        decoder=DECODER,
        code=CODE["decoder"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    log:
        "logs/decode/{checkpoint}/{dataset}/{shard}.log",
    benchmark:
        "benchmarks/decode/{checkpoint}/{dataset}/{shard}.tsv"
    script:
        "../scripts/decode.py"


rule merge_masks:
    """One COCO results file per checkpoint and data set, in image-id order (label-free)."""
    input:
        decoded_shards,
    output:
        "results/decoder/masks/{checkpoint}/{dataset}.json",
    log:
        "logs/merge_masks/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/merge_masks/{checkpoint}/{dataset}.tsv"
    script:
        "../scripts/merge_masks.py"


rule score_decoder:
    """Opens the eval data set's labels: Jaccard, mask AP, AP50, AR@10, CorLoc -> one ledger record."""
    input:
        masks="results/decoder/masks/{checkpoint}/{dataset}.json",
        manifest="results/datasets/{dataset}/manifest.json",
        annotations=annotations_path,
        selected="results/decoder/selected.yaml",
        checkpoint=checkpoint_path,
    output:
        record="results/ledger/records/decoder/{checkpoint}/{dataset}.json",
    params:
        checkpoint=lambda w: checkpoint_params(w.checkpoint),
        dataset=lambda w: dataset_params(w.dataset),
        bootstrap=config.get("bootstrap", {}),
        code=CODE["scores"],
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    log:
        "logs/score_decoder/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/score_decoder/{checkpoint}/{dataset}.tsv"
    script:
        "../scripts/score_decoder.py"


rule eigenvector:
    """The eigenvector figure's data, read from the reference checkpoint's keys480 (the figures never read keys)."""
    input:
        keys480=lambda w: feature_shards(REFERENCE, w.dataset, "keys480.npy"),
        manifest="results/datasets/{dataset}/manifest.json",
        selected="results/decoder/selected.yaml",
    output:
        eigenvector_path("{dataset}"),
    params:
        image=config["figures"]["eigenvector_image"],
        code=CODE["decoder"],
    log:
        "logs/eigenvector/{dataset}.log",
    benchmark:
        "benchmarks/eigenvector/{dataset}.tsv"
    script:
        "../scripts/eigenvector.py"
