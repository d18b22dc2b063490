# Config tables, code hashes, input functions and params shared by every stage.
import json
import re

from snakemake.utils import validate

from evaluate.plumbing import paths
from evaluate.experiment import Experiment, check_config_names
from evaluate.plumbing.provenance import job_code_hash

check_config_names(config)
validate(config, schema="../schemas/config.schema.yaml")  # fills in every default the schema states
EXP = Experiment(config)
EXP.check_probe_categories()
CHECKPOINTS = EXP.checkpoints
DATASETS = EXP.datasets
SELECT_DATASET = EXP.select_dataset
PROBE_TRAIN_DATASET = EXP.probe_train_dataset
EVAL_DATASETS = EXP.by_role("eval")
PROBE_EVAL_DATASETS = EXP.probe_eval_datasets
REFERENCE = EXP.reference_checkpoint
DEMO_DATASETS = [n for n, d in DATASETS.items() if d.demo]
DEMO_CHECKPOINTS = [n for n, c in CHECKPOINTS.items() if c.demo]
VIDEOS = EXP.videos
DISCOVERY = EXP.discovery
DEMO_DISCOVERY = [n for n, d in DISCOVERY.items() if d.demo]
BOX_DECODERS = EXP.box_decoders
SALIENCY = EXP.saliency
DEMO_SALIENCY = [n for n, d in SALIENCY.items() if d.demo]
DEMO_VIDEOS = [n for n, v in VIDEOS.items() if v.demo]
# the propagation's settings (config `video:` but its `threads`, which change no number)
PROPAGATION = EXP.propagation.as_dict() if VIDEOS else None

# Each rule's job function. Its code hash covers every module of the project the job can execute (the imports of
# the job function, transitively; comments and docstrings do not count), so an edit re-runs exactly its jobs.
SCRIPT = "workflow/scripts/run_job.py"
JOBS = {
    "demo_dataset": "evaluate.jobs.demo:demo_dataset",
    "demo_checkpoint": "evaluate.jobs.demo:demo_checkpoint",
    "manifest": "evaluate.jobs.features:manifest",
    "preprocess": "evaluate.jobs.features:preprocess",
    "extract": "evaluate.jobs.features:extract",
    "sweep_decode": "evaluate.jobs.decoder:sweep_decode",
    "select_setting": "evaluate.jobs.decoder:select_setting",
    "decode": "evaluate.jobs.decoder:decode",
    "merge_masks": "evaluate.jobs.decoder:merge_masks",
    "score_decoder": "evaluate.jobs.decoder:score_decoder",
    "train_probe": "evaluate.jobs.probe:train_probe",
    "score_probe": "evaluate.jobs.probe:score_probe",
    "scores": "evaluate.jobs.ledger:scores",
    "tables": "evaluate.jobs.ledger:tables",
    "figures": "evaluate.jobs.ledger:figures",
    "eigenvector": "evaluate.jobs.ledger:eigenvector",
    "html_report": "evaluate.jobs.ledger:html_report",
    "demo_video": "evaluate.jobs.demo:demo_video",
    "video_sequences": "evaluate.jobs.video:video_sequences",
    "propagate": "evaluate.jobs.video:propagate",
    "score_video": "evaluate.jobs.video:score_video",
    "discovery_manifest": "evaluate.jobs.discovery:discovery_manifest",
    "extract_native": "evaluate.jobs.discovery:extract_native",
    "discover_boxes": "evaluate.jobs.discovery:discover_boxes",
    "score_discovery": "evaluate.jobs.discovery:score_discovery",
    "demo_discovery": "evaluate.jobs.demo:demo_discovery",
    "saliency_manifest": "evaluate.jobs.saliency:saliency_manifest",
    "read_saliency": "evaluate.jobs.saliency:read_saliency",
    "score_saliency": "evaluate.jobs.saliency:score_saliency",
    "demo_saliency": "evaluate.jobs.demo:demo_saliency",
    "attention_shard": "evaluate.jobs.attention:attention_shard",
    "attention_record": "evaluate.jobs.attention:attention_record",
    "attention_rows": "evaluate.jobs.attention:attention_rows",
}
CODE = {rule: job_code_hash(job, SCRIPT) for rule, job in JOBS.items()}


def _alternatives(names):
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!)"


wildcard_constraints:
    checkpoint=_alternatives(CHECKPOINTS),
    dataset=_alternatives([*DATASETS, *VIDEOS, *DISCOVERY, *SALIENCY]),
    shard=r"\d{3}",
    sequence=r"[^/]+",


# ------------------------------------------------------------------------------------------- config as params


def feature_output(pattern):
    """keys480/tokens224 kept, or temp() (deleted once their decoder and probe jobs ran) by `features.keep`."""
    return pattern if config["features"]["keep"] else temp(pattern)


def dataset_params(name):
    """Where a data set lives. Its roles, seal and budget come in `run_time`, so changing them (raising a budget,
    say) re-runs nothing."""
    d = DATASETS[name]
    return {"name": name, "images": d.images, "annotations": d.annotations}


def run_time(dataset):
    """What the jobs of `dataset` read of the config when they run: a `RunTime`, which reaches the job through
    `params:` and never re-runs it (Snakemake compares only params of builtin types; docs/design.md §8)."""
    return EXP.run_time(dataset) if dataset else None


def run_time_of(wildcards):
    return run_time(wildcards.dataset)


def checkpoint_params(name):
    c = CHECKPOINTS[name]
    return {
        "name": name,
        "path": c.path,
        "run": c.run,
        "epoch": c.epoch,
        "which": c.which,
        "position_rule": c.position_rule,
    }


def dataset_of(wildcards):
    return dataset_params(wildcards.dataset)


def checkpoint_of(wildcards):
    return checkpoint_params(wildcards.checkpoint)


def which_of(wildcards):
    return CHECKPOINTS[wildcards.checkpoint].which


def position_rule_of(wildcards):
    return CHECKPOINTS[wildcards.checkpoint].position_rule


def demo_dataset_of(wildcards):
    return DATASETS[wildcards.dataset].demo


def demo_checkpoint_of(wildcards):
    return CHECKPOINTS[wildcards.checkpoint].demo


def video_params(name):
    """Where a video data set lives (its seal and budget come in `run_time`)."""
    v = VIDEOS[name]
    return {"name": v.name, "root": v.root, "resolution": v.resolution, "sequences_file": v.sequences_file}


def video_of(wildcards):
    return video_params(wildcards.dataset)


def demo_video_of(wildcards):
    return VIDEOS[wildcards.dataset].demo


# ------------------------------------------------------------------------------------------- input functions


def checkpoint_path(wildcards):
    return CHECKPOINTS[wildcards.checkpoint].path


def annotations_path(wildcards):
    return DATASETS[wildcards.dataset].annotations


def shard_names(dataset):
    """The shards of a data set, read from its manifest (a Snakemake checkpoint: known once the manifest exists)."""
    manifest = checkpoints.manifest.get(dataset=dataset).output.manifest
    with open(manifest) as handle:
        n = len(json.load(handle)["shards"])
    return [f"{i:03d}" for i in range(n)]


def feature_shards(checkpoint, dataset, pattern=paths.FEATURES_META):
    """One file per shard of `checkpoint` on `dataset` (meta.json, the default, marks a complete shard; or the
    shard's file of another pattern with {checkpoint}, {dataset} and {shard})."""
    return [pattern.format(checkpoint=checkpoint, dataset=dataset, shard=s) for s in shard_names(dataset)]


def first_shard_meta(wildcards):
    """The meta.json of a checkpoint's first shard of a data set: where its scoring records read the architecture."""
    return feature_shards(wildcards.checkpoint, wildcards.dataset)[0]


def sweep_shards(wildcards):
    return [paths.SWEEP_SHARD.format(dataset=SELECT_DATASET, shard=s) for s in shard_names(SELECT_DATASET)]


def decoded_shards(wildcards):
    return feature_shards(wildcards.checkpoint, wildcards.dataset, paths.MASKS_SHARD)


def select_setting_inputs(wildcards):
    return {
        "sweep": sweep_shards(wildcards),
        "manifest": paths.MANIFEST.format(dataset=SELECT_DATASET),
        "annotations": DATASETS[SELECT_DATASET].annotations,
        "checkpoint": CHECKPOINTS[REFERENCE].path,
        "meta": feature_shards(REFERENCE, SELECT_DATASET)[0],
    }


def train_probe_inputs(wildcards):
    return {
        "train": feature_shards(wildcards.checkpoint, PROBE_TRAIN_DATASET, paths.TOKENS224),
        "annotations": DATASETS[PROBE_TRAIN_DATASET].annotations,
        "manifest": paths.MANIFEST.format(dataset=PROBE_TRAIN_DATASET),
        "checkpoint": CHECKPOINTS[wildcards.checkpoint].path,
        "meta": feature_shards(wildcards.checkpoint, PROBE_TRAIN_DATASET)[0],
    }


def score_probe_inputs(wildcards):
    c, d = wildcards.checkpoint, wildcards.dataset
    return {
        "weights": paths.PROBE_WEIGHTS.format(checkpoint=c),
        "training": paths.PROBE_TRAINING.format(checkpoint=c),
        "features": feature_shards(c, d, paths.TOKENS224),
        "annotations": DATASETS[d].annotations,
        "manifest": paths.MANIFEST.format(dataset=d),
        "checkpoint": CHECKPOINTS[c].path,
        "meta": feature_shards(c, d)[0],
    }


def video_source(wildcards):
    """What a video data set's listing waits for: the demo's drawing, or nothing (a folder already there)."""
    return [paths.DEMO_VIDEO.format(dataset=wildcards.dataset)] if VIDEOS[wildcards.dataset].demo else []


def sequence_source(wildcards):
    """A sequence's frames folder (the demo's whole drawing, which holds it, for a demo video set)."""
    v = VIDEOS[wildcards.dataset]
    if v.demo:
        return paths.DEMO_VIDEO.format(dataset=v.name)
    return f"{v.root}/JPEGImages/{v.resolution}/{wildcards.sequence}"


def video_sequence_names(dataset):
    """The sequences of a video data set, read from its manifest (a Snakemake checkpoint)."""
    manifest = checkpoints.video_sequences.get(dataset=dataset).output.manifest
    with open(manifest) as handle:
        return [s["name"] for s in json.load(handle)["sequences"]]


def score_video_inputs(wildcards):
    c, d = wildcards.checkpoint, wildcards.dataset
    names = video_sequence_names(d)
    return {
        "manifest": paths.VIDEO_MANIFEST.format(dataset=d),
        "results": [paths.VIDEO_RESULTS.format(checkpoint=c, dataset=d, sequence=s) for s in names],
        "runs": [paths.VIDEO_RUN.format(checkpoint=c, dataset=d, sequence=s) for s in names],
        "checkpoint": CHECKPOINTS[c].path,
    }


def discovery_of(wildcards):
    """Where a box data set lives and what it is (its seal and budget come in `run_time`)."""
    return DISCOVERY[wildcards.dataset].spec()


def discovery_source(wildcards):
    """What a box data set's listing waits for: the demo's drawing, or nothing (a folder already there)."""
    d = DISCOVERY[wildcards.dataset]
    return [paths.DEMO_DISCOVERY.format(dataset=d.name)] if d.demo else []


def discovery_shard_names(dataset):
    """The shards of a box data set, read from its manifest (a Snakemake checkpoint)."""
    manifest = checkpoints.discovery_manifest.get(dataset=dataset).output.manifest
    with open(manifest) as handle:
        n = len(json.load(handle)["shards"])
    return [f"{i:03d}" for i in range(n)]


def score_discovery_inputs(wildcards):
    c, d = wildcards.checkpoint, wildcards.dataset
    shards = discovery_shard_names(d)
    return {
        "manifest": paths.DISCOVERY_MANIFEST.format(dataset=d),
        "boxes": [paths.DISCOVERY_BOXES.format(checkpoint=c, dataset=d, shard=s) for s in shards],
        "meta": paths.FEATURES_META.format(checkpoint=c, dataset=d, shard=shards[0]),
        "checkpoint": CHECKPOINTS[c].path,
    }


def saliency_of(wildcards):
    """Where a saliency set lives and what it is (its seal and budget come in `run_time`)."""
    return SALIENCY[wildcards.dataset].spec()


def saliency_source(wildcards):
    """What a saliency set's listing waits for: the demo's drawing, or nothing (folders already there)."""
    d = SALIENCY[wildcards.dataset]
    return [paths.DEMO_SALIENCY.format(dataset=d.name)] if d.demo else []


def saliency_shard_names(dataset):
    """The shards of a saliency set, read from its manifest (a Snakemake checkpoint)."""
    manifest = checkpoints.saliency_manifest.get(dataset=dataset).output.manifest
    with open(manifest) as handle:
        n = len(json.load(handle)["shards"])
    return [f"{i:03d}" for i in range(n)]


def score_saliency_inputs(wildcards):
    c, d = wildcards.checkpoint, wildcards.dataset
    shards = saliency_shard_names(d)
    return {
        "manifest": paths.SALIENCY_MANIFEST.format(dataset=d),
        "readings": [paths.SALIENCY_READING.format(checkpoint=c, dataset=d, shard=s) for s in shards],
        "metas": [paths.SALIENCY_META.format(checkpoint=c, dataset=d, shard=s) for s in shards],
        "checkpoint": CHECKPOINTS[c].path,
    }


def all_records():
    records = []
    if SELECT_DATASET:
        records.append(paths.SWEEP_RECORD.format(checkpoint=REFERENCE, dataset=SELECT_DATASET))
        records += [paths.DECODER_RECORD.format(checkpoint=c, dataset=d) for c in CHECKPOINTS for d in EVAL_DATASETS]
    if PROBE_TRAIN_DATASET:
        records += [
            paths.PROBE_RECORD.format(checkpoint=c, dataset=d) for c in CHECKPOINTS for d in PROBE_EVAL_DATASETS
        ]
    records += [paths.VIDEO_RECORD.format(checkpoint=c, dataset=d) for c in CHECKPOINTS for d in VIDEOS]
    records += [
        paths.DISCOVERY_RECORD.format(decoder=k, checkpoint=c, dataset=d)
        for k in BOX_DECODERS
        for c in CHECKPOINTS
        for d in DISCOVERY
    ]
    records += [paths.SALIENCY_RECORD.format(checkpoint=c, dataset=d) for c in CHECKPOINTS for d in SALIENCY]
    if config["attention"]:
        records += [paths.ATTENTION_RECORD.format(checkpoint=c, dataset=d) for c in CHECKPOINTS for d in EVAL_DATASETS]
    return records


def attention_shards(wildcards):
    return feature_shards(wildcards.checkpoint, wildcards.dataset, paths.ATTENTION_SHARD)


def attention_rows_files():
    """The per-patch figure's rows: every checkpoint's, on the first eval data set."""
    if not (config["attention"] and EVAL_DATASETS):
        return []
    return [paths.ATTENTION_ROWS.format(checkpoint=c, dataset=EVAL_DATASETS[0]) for c in CHECKPOINTS]


def all_features(wildcards):
    return [f for c in CHECKPOINTS for d in DATASETS for f in feature_shards(c, d)]


def all_targets(wildcards):
    targets = all_features(wildcards)
    if all_records():
        targets += [paths.SCORES_CSV, paths.TABLES, paths.FIGURES, paths.REPORT]
    return targets


def tables_inputs(wildcards):
    inputs = {"scores": paths.SCORES_CSV, "records": all_records()}
    if SELECT_DATASET:
        inputs["sweep"] = paths.SWEEP_TABLE
    return inputs


def figure_dataset():
    """The eval data set the figures draw images of: the first, when the decoder ran on it."""
    return EVAL_DATASETS[0] if SELECT_DATASET and EVAL_DATASETS else None


def figure_truth():
    """Whether the figures draw their data set's ground truth: not for a sealed one (a parameter, so sealing a data
    set redraws the figures without it)."""
    d = figure_dataset()
    return not (d and DATASETS[d].sealed)


def eigenvector_inputs(wildcards):
    return {
        "keys480": feature_shards(wildcards.checkpoint, wildcards.dataset, paths.KEYS480),
        "meta": first_shard_meta(wildcards),
        "manifest": paths.MANIFEST.format(dataset=wildcards.dataset),
        "selected": paths.SELECTED,
    }


def figure_inputs(wildcards):
    inputs = {"scores": paths.SCORES_CSV, "records": all_records()}
    rows = attention_rows_files()
    if rows:
        inputs["attention_rows"] = rows
    d = figure_dataset()
    if d:
        inputs["masks"] = [paths.MASKS.format(checkpoint=c, dataset=d) for c in CHECKPOINTS]
        inputs["manifest"] = paths.MANIFEST.format(dataset=d)
        inputs["eigenvector"] = paths.EIGENVECTOR.format(checkpoint=REFERENCE, dataset=d)
        inputs["sweep"] = paths.SWEEP_TABLE
    inputs["video_results"] = [
        paths.VIDEO_RESULTS.format(checkpoint=c, dataset=v, sequence=s)
        for v in VIDEOS
        for s in video_sequence_names(v)
        for c in CHECKPOINTS
    ]
    return inputs


def video_figure_params():
    """What the video figures draw: each video data set (truth: False for a sealed one, whose ground truth is not
    drawn) and each checkpoint's results root on it."""
    videos = {n: {**video_params(n), "truth": not v.sealed} for n, v in VIDEOS.items()}
    results = {n: {c: paths.VIDEO_RESULTS_ROOT.format(checkpoint=c, dataset=n) for c in CHECKPOINTS} for n in VIDEOS}
    return {"videos": videos, "results": results}
