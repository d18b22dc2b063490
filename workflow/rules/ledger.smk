# Stage 5: the ledger's scores table, result tables and figures, all rebuilt from the records alone.


rule scores:
    """results/ledger/scores.csv (and .parquet): one row per measure of every record; never edited by hand."""
    input:
        all_records(),
    output:
        csv="results/ledger/scores.csv",
        parquet="results/ledger/scores.parquet",
    log:
        "logs/scores.log",
    benchmark:
        "benchmarks/scores.tsv"
    script:
        "../scripts/scores.py"


rule tables:
    input:
        scores="results/ledger/scores.csv",
        records=all_records(),
        sweep="results/decoder/sweep.csv" if SELECT_DATASET else [],
    output:
        report(
            directory("results/tables"),
            patterns=["{name}.md"],
            category="Tables",
            caption="../report/tables.rst",
        ),
    params:
        compare_to=config.get("compare_to"),
        bootstrap=config.get("bootstrap", {}),
    log:
        "logs/tables.log",
    benchmark:
        "benchmarks/tables.tsv"
    script:
        "../scripts/tables.py"


def figure_inputs(wildcards):
    inputs = {"scores": "results/ledger/scores.csv", "records": all_records()}
    if SELECT_DATASET and EVAL_DATASETS:
        d = EVAL_DATASETS[0]
        inputs["masks"] = [f"results/decoder/masks/{c}/{d}.json" for c in CHECKPOINTS]
        inputs["manifest"] = f"results/datasets/{d}/manifest.json"
        inputs["eigenvector"] = eigenvector_path(d)
    return inputs


rule figures:
    input:
        unpack(figure_inputs),
    output:
        report(
            directory("results/figures"),
            patterns=["{name}.png"],
            category="Figures",
            caption="../report/figures.rst",
        ),
    params:
        figures=config.get("figures", {}),
        dataset=dataset_params(EVAL_DATASETS[0]) if EVAL_DATASETS else None,
        checkpoints=list(CHECKPOINTS),
        reference=REFERENCE,
    log:
        "logs/figures.log",
    benchmark:
        "benchmarks/figures.tsv"
    script:
        "../scripts/figures.py"
