# The video reading (docs/design.md §12): every checkpoint propagates each sequence's first-frame masks of each
# video data set in its own job (frames480 through the one reading runner; DAVIS's results layout), and one scoring
# job per checkpoint and video data set opens the other masks and writes a ledger record.
stage_jobs("video", "propagate", "score_video")
VIDEOS = in_section("videos")
# the propagation's settings (config `video:` but its `threads`, which change no number)
PROPAGATION = EXP.propagation.as_dict() if VIDEOS else None
RECORDS.extend(expand(paths.VIDEO_RECORD, checkpoint=CHECKPOINTS, dataset=VIDEOS))


rule propagate:
    """One checkpoint on one sequence: its first frame's masks (an opening not counted against a budget) carried
    to every frame by nearest neighbours among the frozen patch tokens. Its input is the sequence's frames, never
    the manifest (which exists before any of these jobs is planned: they come from its sequences), so adding a
    sequence or a video set re-runs no existing propagation."""
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
        dataset=dataset_of,
        manifest=manifest_of,
        settings=PROPAGATION,
        features=features("device", "form"),
        run_time=run_time_of,
        job=JOBS["propagate"],
        code=code_of("propagate"),
    script:
        "../scripts/run_job.py"


rule score_video:
    """Opens a video data set's masks but the first frames': J&F, J, F (mean, recall, decay) -> one ledger record."""
    input:
        manifest=paths.MANIFEST,
        results=per_sequence(paths.VIDEO_RESULTS),
        runs=per_sequence(paths.VIDEO_RUN),
        checkpoint=checkpoint_path,
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
        dataset=dataset_of,
        settings=PROPAGATION,
        bootstrap=config["bootstrap"],
        run_time=run_time_of,
        job=JOBS["score_video"],
        code=code_of("score_video"),
    script:
        "../scripts/run_job.py"
