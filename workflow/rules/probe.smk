# Stage 4: one linear layer on the frozen tokens224, trained on `probe-train`, scored on every `eval` data set.


def probe_inputs(wildcards):
    c = wildcards.checkpoint
    inputs = {
        "train": feature_shards(c, PROBE_TRAIN_DATASET, "tokens224.npy"),
        "train_annotations": DATASETS[PROBE_TRAIN_DATASET].annotations,
        "train_manifest": f"results/datasets/{PROBE_TRAIN_DATASET}/manifest.json",
        "checkpoint": CHECKPOINTS[c].path,
    }
    for d in EVAL_DATASETS:
        inputs[f"eval_{d}"] = feature_shards(c, d, "tokens224.npy")
        inputs[f"eval_annotations_{d}"] = DATASETS[d].annotations
        inputs[f"eval_manifest_{d}"] = f"results/datasets/{d}/manifest.json"
    return inputs


rule probe:
    input:
        unpack(probe_inputs),
    output:
        weights="results/probe/{checkpoint}/probe.safetensors",
        records=[f"results/ledger/records/probe/{{checkpoint}}/{d}.json" for d in EVAL_DATASETS],
    params:
        checkpoint=lambda w: checkpoint_params(w.checkpoint),
        train=dataset_params(PROBE_TRAIN_DATASET) if PROBE_TRAIN_DATASET else None,
        evals=[dataset_params(d) for d in EVAL_DATASETS],
        probe=config.get("probe", {}),
        bootstrap=config.get("bootstrap", {}),
        code=CODE["probe"],
    threads: 2
    resources:
        mem_mb=6000,
        runtime=120,
    log:
        "logs/probe/{checkpoint}.log",
    benchmark:
        "benchmarks/probe/{checkpoint}.tsv"
    script:
        "../scripts/probe.py"
