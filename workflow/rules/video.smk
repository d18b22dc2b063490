# The video reading (docs/design.md §12): each video data set's sequences are listed once (a Snakemake checkpoint),
# every checkpoint propagates each sequence's first-frame masks in its own job (DAVIS's results layout), and one
# scoring job per checkpoint and video data set opens the other masks and writes a ledger record.


checkpoint video_sequences:
    """A video data set's sequences, frames and masks, and its labels' identity (listings and hashes: no opening)."""
    input:
        video_source,
    output:
        manifest=paths.VIDEO_MANIFEST,
    log:
        "logs/video_sequences/{dataset}.log",
    benchmark:
        "benchmarks/video_sequences/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(VIDEOS),
    params:
        video=video_of,
        job=JOBS["video_sequences"],
        code=CODE["video_sequences"],
    script:
        "../scripts/run_job.py"


rule propagate:
    """One checkpoint on one sequence: its first frame's masks (an opening not counted against a budget) carried
    to every frame by nearest neighbours among the frozen patch tokens."""
    input:
        frames=sequence_source,
        checkpoint=checkpoint_path,
    output:
        results=directory(paths.VIDEO_RESULTS),
        run=paths.VIDEO_RUN,
    log:
        "logs/propagate/{checkpoint}/{dataset}/{sequence}.log",
    benchmark:
        "benchmarks/propagate/{checkpoint}/{dataset}/{sequence}.tsv"
    wildcard_constraints:
        dataset=_alternatives(VIDEOS),
    threads: config["video"]["threads"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        checkpoint=checkpoint_of,
        video=video_of,
        settings=PROPAGATION,
        device=config["features"]["device"],
        form=config["features"]["form"],
        run_time=run_time_of,
        job=JOBS["propagate"],
        code=CODE["propagate"],
    script:
        "../scripts/run_job.py"


rule score_video:
    """Opens a video data set's masks but the first frames': J&F, J, F (mean, recall, decay) -> one ledger record."""
    input:
        unpack(score_video_inputs),
    output:
        record=paths.VIDEO_RECORD,
    log:
        "logs/score_video/{checkpoint}/{dataset}.log",
    benchmark:
        "benchmarks/score_video/{checkpoint}/{dataset}.tsv"
    wildcard_constraints:
        dataset=_alternatives(VIDEOS),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        checkpoint=checkpoint_of,
        video=video_of,
        settings=PROPAGATION,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_video"],
        code=CODE["score_video"],
    script:
        "../scripts/run_job.py"
