# Config tables, code hashes and input functions shared by every stage.
import json
import re

from snakemake.utils import validate

from evaluate.experiment import Experiment, check_config_names
from evaluate.provenance import source_hash


check_config_names(config)
validate(config, schema="../schemas/config.schema.yaml")
EXP = Experiment(config)
CHECKPOINTS = EXP.checkpoints
DATASETS = EXP.datasets
FEATURES = config.get("features", {})
DECODER = config.get("decoder", {})
SELECT_DATASET = EXP.select_dataset
PROBE_TRAIN_DATASET = EXP.probe_train_dataset
EVAL_DATASETS = EXP.by_role("eval")
REFERENCE = EXP.reference_checkpoint

# What each stage's numbers depend on. A change to what this code does (not to its comments) re-runs the stage's
# jobs through `params: code=...`; an edit elsewhere (README, tables, figures) leaves the features alone.
CODE = {
    "datasets": source_hash(["evaluate/datasets.py"]),
    "features": source_hash(
        ["evaluate/backbone.py", "evaluate/xcit.py", "evaluate/architectures.py", "evaluate/checkpoints.py",
         "evaluate/images.py", "evaluate/datasets.py", "evaluate/features.py"]
    ),
    "decoder": source_hash(["decoders"]),
    "scores": source_hash(["decoders", "evaluate/scores.py", "evaluate/datasets.py", "evaluate/ledger.py"]),
    "probe": source_hash(["evaluate/probe.py", "evaluate/scores.py", "evaluate/datasets.py", "evaluate/ledger.py"]),
    "demo_dataset": source_hash(["evaluate/demo.py"]),
    "demo_checkpoint": source_hash(["evaluate/demo.py", "evaluate/checkpoints.py", "evaluate/backbone.py",
                                    "evaluate/xcit.py", "evaluate/architectures.py"]),
}


def _alternatives(names):
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!)"


wildcard_constraints:
    checkpoint=_alternatives(CHECKPOINTS),
    dataset=_alternatives(DATASETS),
    shard=r"\d{3}",


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


def feature_shards(checkpoint, dataset, name="meta.json"):
    """One file per shard of `checkpoint` on `dataset` (meta.json marks a complete shard)."""
    return [f"results/features/{checkpoint}/{dataset}/{s}/{name}" for s in shard_names(dataset)]


def sweep_shards(wildcards):
    return [f"results/decoder/sweep/{SELECT_DATASET}/{s}.npz" for s in shard_names(SELECT_DATASET)]


def decoded_shards(wildcards):
    c, d = wildcards.checkpoint, wildcards.dataset
    return [f"results/decoder/masks/{c}/{d}/{s}.json" for s in shard_names(d)]


def decoder_record(checkpoint, dataset):
    return f"results/ledger/records/decoder/{checkpoint}/{dataset}.json"


def probe_records(checkpoint):
    return [f"results/ledger/records/probe/{checkpoint}/{d}.json" for d in EVAL_DATASETS]


def all_records():
    records = []
    if SELECT_DATASET:
        records.append(f"results/ledger/records/sweep/{REFERENCE}/{SELECT_DATASET}.json")
    if SELECT_DATASET and EVAL_DATASETS:
        records += [decoder_record(c, d) for c in CHECKPOINTS for d in EVAL_DATASETS]
    if PROBE_TRAIN_DATASET and EVAL_DATASETS:
        records += [r for c in CHECKPOINTS for r in probe_records(c)]
    return records


def all_features(wildcards):
    return [f for c in CHECKPOINTS for d in DATASETS for f in feature_shards(c, d)]


def all_targets(wildcards):
    targets = all_features(wildcards)
    if all_records():
        targets += ["results/ledger/scores.csv", "results/tables", "results/figures"]
    return targets


def dataset_params(name):
    """Where a data set lives. Its roles, seal and budget are read from the config at run time, so changing them
    (raising a budget, say) re-runs nothing."""
    d = DATASETS[name]
    return {"name": name, "images": d.images, "annotations": d.annotations}


def checkpoint_params(name):
    c = CHECKPOINTS[name]
    return {"name": name, "path": c.path, "run": c.run, "epoch": c.epoch, "which": c.which}
