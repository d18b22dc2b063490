# Stage 5: the ledger's scores table, result tables and figures, all rebuilt from the records alone.
stage_jobs("ledger", "scores", "tables", "figures", "eigenvector", "html_report")


rule scores:
    """results/ledger/scores.csv (and .parquet): one row per measure of every record; never edited by hand."""
    input:
        all_records,
    output:
        csv=paths.SCORES_CSV,
        parquet=paths.SCORES_PARQUET,
    log:
        "logs/scores.log",
    benchmark:
        "benchmarks/scores.tsv"
    params:
        job=JOBS["scores"],
        code=job_code("scores"),
    script:
        "../scripts/run_job.py"


rule tables:
    input:
        unpack(tables_inputs),
    output:
        report(
            directory(paths.TABLES),
            patterns=["{name}.md"],
            category="Tables",
            caption="../report/tables.rst",
        ),
    log:
        "logs/tables.log",
    benchmark:
        "benchmarks/tables.tsv"
    params:
        compare_to=config.get("compare_to"),
        bootstrap=config["bootstrap"],
        gallery_images=config["figures"]["gallery_images"],
        job=JOBS["tables"],
        code=job_code("tables"),
    script:
        "../scripts/run_job.py"


rule figures:
    input:
        unpack(figure_inputs),
    output:
        report(
            directory(paths.FIGURES),
            patterns=["{name}.png"],
            category="Figures",
            caption="../report/figures.rst",
        ),
    log:
        "logs/figures.log",
    benchmark:
        "benchmarks/figures.tsv"
    params:
        figures=config["figures"],
        bootstrap=config["bootstrap"],
        dataset=dataset_params(figure_dataset()) if figure_dataset() else None,
        truth=figure_truth(),
        checkpoints=list(CHECKPOINTS),
        reference=REFERENCE,
        video=video_figure_params(),
        job=JOBS["figures"],
        code=job_code("figures"),
    script:
        "../scripts/run_job.py"


rule html_report:
    """results/report.html: every table and figure on one static page, checked in a browser by the tests."""
    input:
        tables=paths.TABLES,
        figures=paths.FIGURES,
    output:
        paths.REPORT,
    log:
        "logs/html_report.log",
    benchmark:
        "benchmarks/html_report.tsv"
    params:
        job=JOBS["html_report"],
        code=job_code("html_report"),
    script:
        "../scripts/run_job.py"


rule eigenvector:
    """The eigenvector figure's data, from the reference checkpoint's keys480 (so the figures never read keys)."""
    input:
        unpack(eigenvector_inputs),
    output:
        paths.EIGENVECTOR,
    log:
        "logs/eigenvector/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/eigenvector/{checkpoint}/{dataset}.tsv"
    params:
        image=config["figures"]["eigenvector_image"],
        job=JOBS["eigenvector"],
        code=job_code("eigenvector"),
    script:
        "../scripts/run_job.py"
