# Config tables, code hashes, input functions and params shared by every stage.
import functools
import json
import os
import re

from snakemake.utils import validate

from evaluate import ConfigError
from evaluate.plumbing import paths
from evaluate.check import refuse_over_budget_now
from evaluate.experiment import Experiment, check_config_names
from evaluate.plumbing.config import EXPERIMENT_ENV, SOURCE
from evaluate.plumbing.provenance import job_code_hash, module_code_hash

# The experiment file(s) read: the --configfile given, or config.yaml (the Snakefile's rule); config errors name it,
# here and in every job (EXPERIMENT_ENV, inherited by the jobs this process starts).
CONFIG_FILE = " + ".join(str(path) for path in workflow.configfiles) or SOURCE
os.environ[EXPERIMENT_ENV] = CONFIG_FILE
check_config_names(config, CONFIG_FILE)
validate(config, schema="../schemas/config.schema.yaml")  # fills in every default the schema states
EXP = Experiment(config, source=CONFIG_FILE)
EXP.check_probe_categories()
# A sealed data set whose spent and needed openings exceed its budget is refused here, before any job (evaluate.costs
# counts them); a job an executor plugin submits re-reads this file mid-run, where the main process already checked.
if workflow.is_main_process:
    refuse_over_budget_now(EXP)
CHECKPOINTS = EXP.checkpoints
ALL_DATASETS = EXP.datasets  # every section's, by name: one manifest each, the demo's drawn alike
DATASETS = EXP.section("datasets")  # images with COCO labels: the decoder's and the probe's
SELECT_DATASET = EXP.select_dataset
PROBE_TRAIN_DATASET = EXP.probe_train_dataset
EVAL_DATASETS = EXP.by_role("eval")
PROBE_EVAL_DATASETS = EXP.probe_eval_datasets
REFERENCE = EXP.reference_checkpoint
DEMO_CHECKPOINTS = [n for n, c in CHECKPOINTS.items() if c.demo]
DEMO_DATASETS = [n for n, d in ALL_DATASETS.items() if d.demo]
# Each stage's rule file adds the ledger records its scoring jobs write (read by `rule all`, the scores table, the
# tables and the figures), so a new stage is its rule file alone.
RECORDS = []

# Each rule's job function: the rules of workflow/rules/<stage>.smk run the functions of their names in
# evaluate/jobs/<stage>.py, as the file declares above them (`stage_jobs`). A job's code hash covers every module of
# the project the job can execute (the imports of the job function, transitively; comments and docstrings do not
# count), so an edit re-runs exactly its jobs; computed when a rule first asks for it.
SCRIPT = "workflow/scripts/run_job.py"
JOBS = {}


def stage_jobs(stage, *rules):
    """The rules of one stage's file each run the function of their name in `evaluate.jobs.<stage>`."""
    JOBS.update({rule: f"evaluate.jobs.{stage}:{rule}" for rule in rules})


@functools.cache
def job_code(rule):
    """The code hash of a rule's job (`job_code_hash`), computed on the first look-up."""
    return job_code_hash(JOBS[rule], SCRIPT)


# A data set's kind is opened (and a demo one drawn) by the module its spec names, which no job imports by name: the
# hash of that module's code joins the code hash of exactly the jobs of its data sets.
KIND_CODE = {
    target: module_code_hash(target.partition(":")[0])
    for target in {t for d in ALL_DATASETS.values() for t in (d.opener, d.demo_writer) if t}
}


def code_of(rule):
    """A rule's `code` param where its jobs open a data set by its kind: the rule's code hash and that of the kind's
    module (its drawing's, for the demo), per data set."""
    target = "demo_writer" if rule == "demo_dataset" else "opener"
    return lambda wildcards: f"{job_code(rule)}+{KIND_CODE[getattr(ALL_DATASETS[wildcards.dataset], target)]}"


def _alternatives(names):
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!)"


def in_section(section):
    """The names of one config section's data sets (a rule's `dataset` wildcard constraint)."""
    return list(EXP.section(section))


wildcard_constraints:
    checkpoint=_alternatives(CHECKPOINTS),
    dataset=_alternatives(ALL_DATASETS),
    shard=r"\d{3}",
    sequence=r"[^/]+",


# ------------------------------------------------------------------------------------------- config as params


def feature_output(pattern):
    """keys480/tokens224 kept, or temp() (deleted once their decoder and probe jobs ran) by `features.keep`."""
    return pattern if config["features"]["keep"] else temp(pattern)


def dataset_params(name):
    """What a data set's jobs are handed: where it lives and how it is read (`DataSet.spec`). Its roles, seal and
    budget come in `run_time`, so changing them (raising a budget, say) re-runs nothing."""
    return ALL_DATASETS[name].spec


def dataset_of(wildcards):
    return dataset_params(wildcards.dataset)


def run_time(dataset):
    """What the jobs of `dataset` read of the config when they run: a `RunTime`, which reaches the job through
    `params:` and never re-runs it (Snakemake compares only params of builtin types; docs/design.md §8)."""
    return EXP.run_time(dataset) if dataset else None


def run_time_of(wildcards):
    return run_time(wildcards.dataset)


def checkpoint_params(name):
    """What a checkpoint's jobs are handed (`Checkpoint.params`): the one way it travels."""
    return CHECKPOINTS[name].params


def checkpoint_of(wildcards):
    return checkpoint_params(wildcards.checkpoint)


def demo_checkpoint_of(wildcards):
    return CHECKPOINTS[wildcards.checkpoint].demo


def features(*keys):
    """The config's `features` values a rule's jobs read (its reading's form, device, precision where the reading
    does not fix them; batch size, dtype where its body reads them): a change to any other re-runs none of them."""
    return {k: config["features"][k] for k in keys}


# ------------------------------------------------------------------------------------------- input functions


def checkpoint_path(wildcards):
    return CHECKPOINTS[wildcards.checkpoint].path


def manifest_of(wildcards):
    return paths.MANIFEST.format(dataset=wildcards.dataset)


def manifest_source(wildcards):
    """What a data set's listing waits for: the demo's drawing, its annotation file, or nothing (a folder there)."""
    d = ALL_DATASETS[wildcards.dataset]
    if d.demo:
        return [paths.DEMO_DATASET.format(section=d.section, dataset=d.name)]
    return [d.fields["annotations"]] if d.fields.get("annotations") else []


def listed(dataset):
    """A data set's manifest (a Snakemake checkpoint: read once it exists)."""
    manifest = checkpoints.manifest.get(dataset=dataset).output.manifest
    with open(manifest) as handle:
        return json.load(handle)


def shard_names(dataset):
    """The shards of a data set, read from its manifest."""
    return [f"{i:03d}" for i in range(len(listed(dataset)["shards"]))]


def sequence_names(dataset):
    """The sequences of a video data set, read from its manifest."""
    return [s["name"] for s in listed(dataset)["sequences"]]


def feature_shards(checkpoint, dataset, pattern=paths.FEATURES_META):
    """One file per shard of `checkpoint` on `dataset` (meta.json, the default, marks a complete shard; or the
    shard's file of another pattern with {checkpoint}, {dataset} and {shard})."""
    return [pattern.format(checkpoint=checkpoint, dataset=dataset, shard=s) for s in shard_names(dataset)]


def per_shard(pattern):
    """An input function: the file of `pattern` for each shard of the wildcards' data set."""
    return lambda wildcards: feature_shards(wildcards.checkpoint, wildcards.dataset, pattern)


def per_sequence(pattern):
    """An input function: the file of `pattern` for each sequence of the wildcards' video data set."""
    return lambda wildcards: [
        pattern.format(checkpoint=wildcards.checkpoint, dataset=wildcards.dataset, sequence=s)
        for s in sequence_names(wildcards.dataset)
    ]


def sequence_source(wildcards):
    """A sequence's frames folder (the demo's whole drawing, which holds it, for a demo video set)."""
    v = ALL_DATASETS[wildcards.dataset]
    if v.demo:
        return paths.DEMO_DATASET.format(section=v.section, dataset=v.name)
    return f"{v.fields['root']}/JPEGImages/{v.fields['resolution']}/{wildcards.sequence}"


def fitted_clusters(wildcards):
    """The clusters a semseg set's maps are predicted with: those fitted on its `fit_on` set, or on itself."""
    return paths.SEMSEG_FIT.format(checkpoint=wildcards.checkpoint, dataset=EXP.fit_set(wildcards.dataset))


def first_shard_meta(wildcards):
    """The meta.json of a checkpoint's first shard of a data set: where its scoring records read the architecture."""
    return feature_shards(wildcards.checkpoint, wildcards.dataset)[0]


def sweep_shards(wildcards):
    return [paths.SWEEP_SHARD.format(dataset=SELECT_DATASET, shard=s) for s in shard_names(SELECT_DATASET)]


def select_setting_inputs(wildcards):
    return {
        "sweep": sweep_shards(wildcards),
        "manifest": paths.MANIFEST.format(dataset=SELECT_DATASET),
        "checkpoint": CHECKPOINTS[REFERENCE].path,
        "meta": feature_shards(REFERENCE, SELECT_DATASET)[0],
    }


def train_probe_inputs(wildcards):
    return {
        "train": feature_shards(wildcards.checkpoint, PROBE_TRAIN_DATASET, paths.TOKENS224),
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
        "manifest": paths.MANIFEST.format(dataset=d),
        "checkpoint": CHECKPOINTS[c].path,
        "meta": feature_shards(c, d)[0],
    }


def all_records(wildcards=None):
    """Every ledger record the run writes (each stage's rule file adds its own to RECORDS)."""
    return list(RECORDS)


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
        for v in in_section("videos")
        for s in sequence_names(v)
        for c in CHECKPOINTS
    ]
    return inputs


def video_figure_params():
    """What the video figures draw: each video data set (truth: False for a sealed one, whose ground truth is not
    drawn) and each checkpoint's results root on it."""
    videos = {n: {**v.spec, "truth": not v.sealed} for n, v in EXP.section("videos").items()}
    results = {n: {c: paths.VIDEO_RESULTS_ROOT.format(checkpoint=c, dataset=n) for c in CHECKPOINTS} for n in videos}
    return {"videos": videos, "results": results}
