"""The experiment as the config describes it: its checkpoints and data sets (`evaluate.plumbing.config`), checked
against each other and against the code's own tables, and the config validated with the schema's defaults.

Everything here is pure and importable, so `workflow/rules/common.smk` stays a thin layer and the rules of naming
(names become paths) are unit-tested.

- A data set has one or more roles: `select` (decoder settings are chosen on it), `eval` (reported scores),
  `probe-train` (the probe learns on it).
- Every other section's data sets (`videos:`, `discovery:`, `saliency:`, ...) have the role `eval` only. Each entry
  is of a data-set kind (`evaluate.datasets.kinds.KINDS`), which says which of its fields it needs and how the demo draws
  it, so one table (`dataset_table`) reads every section.

A config error names the experiment file actually read (`source`: the `--configfile` given, or config.yaml, as
`workflow/rules/common.smk` finds it in `workflow.configfiles`): the checks raise ConfigErrors that name the key, and
`in_file(source)` (`evaluate.plumbing.config`) puts the file in front where the experiment is read; a job's config
errors get it the same way (`evaluate.jobs.run_job`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from evaluate import ConfigError, EvaluationError  # noqa: F401 (re-exported)
from evaluate.datasets.kinds import SECTIONS, kind_of, kinds_of
from evaluate.plumbing.config import (  # noqa: F401 (re-exported)
    NAME_RE,
    ROLES,
    SOURCE,
    Checkpoint,
    DataSet,
    RunTime,
    check_name,
    checkpoint_table,
    discover_checkpoints,
    in_file,
    seal_of,
)

SCHEMA = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "config.schema.yaml"
# keys an older config may still hold -> what replaced them; refused with that advice before the schema's generic
# "additional properties" message
REPLACED_KEYS = {
    ("features", "autocast"): "features.precision: float32 (the default), bfloat16 (CPU or CUDA) or float16 (CUDA "
                              "only); `autocast: true` was float16 on CUDA",
}


def load_config(config: dict[str, Any], source: str = SOURCE) -> dict[str, Any]:
    """A copy of `config` (read from the experiment file `source`) validated against the schema, every default the
    schema states filled in (what the workflow's common.smk does to the config it runs on)."""
    import copy

    from snakemake.utils import validate

    checked = copy.deepcopy(config)
    check_config_names(checked, source)
    validate(checked, str(SCHEMA))
    return checked


def check_config_names(config: dict[str, Any], source: str = SOURCE) -> None:
    """Refuse unsafe checkpoint and data-set names, and keys that were replaced (`REPLACED_KEYS`, naming what
    replaced them), with a plain message naming the experiment file `source`, before schema validation words it."""
    with in_file(source):
        for (section, key), replacement in REPLACED_KEYS.items():
            if isinstance(config.get(section), dict) and key in config[section]:
                raise ConfigError(f"{section}.{key} was replaced by {replacement}")
        for section in ("checkpoints", *SECTIONS):
            entries = config.get(section)
            if isinstance(entries, dict):
                for name in entries:
                    check_name(name, f"{section}:")


def dataset_table(config: dict[str, Any]) -> dict[str, DataSet]:
    """Every data set of the experiment, by name, section by section (`evaluate.datasets.SECTIONS`).

    Refused, one line naming the entry: a name used in two sections (one ledger counts openings, and so budgets, by
    data-set name); an entry that does not give exactly one group of its kind's path fields whole (`Kind.needs`);
    an unknown role; a sealed data set without a budget; a demo entry of a kind the demo does not draw, or whose
    paths do not lie in the folder the demo draws it in; a `root` that is not a folder (outside the demo). The
    experiment file's name is put in front by the caller (`in_file`).
    """
    from evaluate.plumbing.paths import DEMO_DATASET

    table: dict[str, DataSet] = {}
    for section in SECTIONS:
        for name, entry in (config.get(section) or {}).items():
            check_name(name, f"{section}:")
            where = f"{section}.{name}"
            if name in table:
                raise ConfigError(f"{where}: the name is also a data set's under '{table[name].section}:'; "
                                  "data sets share one ledger, so give it another name")
            kind = kind_of(section, entry.get("kind"))
            given = {field for group in kind.needs for field in group if entry.get(field)}
            if not any(given == set(group) for group in kind.needs):
                wanted = " or ".join("its " + " and ".join(group) for group in kind.needs)
                raise ConfigError(f"{where}: give {wanted}")
            if section == "datasets":
                roles = tuple(entry["roles"])
                for role in roles:
                    if role not in ROLES:
                        raise ConfigError(f"{where}.roles: unknown role {role!r} (known: "
                                          f"{', '.join(ROLES)})")
            else:
                roles = ("eval",)
            sealed, budget = seal_of(entry, where)
            demo = entry.get("demo")
            if demo is not None:
                folder = DEMO_DATASET.format(section=section, dataset=name)
                if not kind.demo:
                    raise ConfigError(f"{where}.demo: the demo draws no {kind.name} set (it draws "
                                      f"{', '.join(k.name for k in kinds_of(section).values() if k.demo)})")
                for field in sorted(given):
                    if entry[field] != folder and not str(entry[field]).startswith(folder + "/"):
                        raise ConfigError(f"{where}.{field}: a demo {kind.name} set is drawn at {folder}, "
                                          f"so its {field} must lie there, not {entry[field]}")
            table[name] = DataSet(name=name, section=section, kind=kind.name, opener=kind.opener,
                                  fields={field: entry.get(field) for field in kind.fields}, roles=roles,
                                  sealed=sealed, budget=budget, demo=demo, demo_writer=kind.demo,
                                  probe=bool(entry.get("probe")))
    for name, dataset in table.items():  # once every entry is known: a clash of names is said first
        root = dataset.fields.get("root")
        if root and dataset.demo is None and not Path(root).is_dir():
            raise ConfigError(f"{dataset.section}.{name}.root: {root} is not a folder (where a "
                              f"{dataset.kind} data set is unpacked)")
    return table


@dataclass
class Experiment:
    """The config read once: checkpoints, data sets by role, the reference checkpoint and the baseline. `source`: the
    experiment file it was read from, named by every ConfigError it raises."""

    config: dict[str, Any]
    source: str = SOURCE
    checkpoints: dict[str, Checkpoint] = field(init=False)
    datasets: dict[str, DataSet] = field(init=False)

    def __post_init__(self) -> None:
        with in_file(self.source):
            self._check()

    def _check(self) -> None:
        check_config_names(self.config, self.source)
        self.checkpoints = checkpoint_table(self.config)
        from evaluate.networks.checkpoints import FORMATS
        from evaluate.networks.registry import ARCHITECTURES

        for name, checkpoint in self.checkpoints.items():  # a demo checkpoint is made in any format and architecture
            for key, known in (("format", FORMATS), ("architecture", ARCHITECTURES)):
                if checkpoint.demo is not None and checkpoint.demo[key] not in known:
                    raise ConfigError(f"checkpoints.{name}.demo.{key}: {checkpoint.demo[key]!r} is not "
                                      f"a demo checkpoint {key} (one of {', '.join(known)})")
        self.datasets = dataset_table(self.config)
        if not self.datasets:
            raise ConfigError("no data sets: name some under " + ", ".join(f"'{s}:'" for s in SECTIONS))
        semseg = self.section("semseg")
        for name in semseg:  # clusters fitted on another set name one of the same section
            if self.fit_set(name) not in semseg:
                raise ConfigError(f"semseg.{name}.fit_on: {self.fit_set(name)!r} is not a semseg data set "
                                  f"(one of {', '.join(semseg)})")
        if self.section("videos"):
            self.propagation  # noqa: B018 - the video settings checked before any job
        features = self.config.get("features", {})
        if features.get("precision") == "float16" and features.get("device") == "cpu":
            raise ConfigError("features.precision: float16 runs on CUDA only, and features.device is "
                              "cpu; on the CPU choose bfloat16 or float32 (the reference)")
        if not self.checkpoints:
            raise ConfigError("no checkpoints: name some under 'checkpoints:' or 'checkpoint_globs:'")
        for key in ("reference_checkpoint", "compare_to"):
            value = self.config.get(key)
            if value is not None and value not in self.checkpoints:
                raise ConfigError(
                    f"{key}: {value!r} is not one of the checkpoints ({', '.join(sorted(self.checkpoints))})"
                )
        if self.by_role("select") and len(self.by_role("select")) > 1:
            raise ConfigError("more than one data set has the role 'select'; the decoder is tuned on one")
        if self.by_role("probe-train") and len(self.by_role("probe-train")) > 1:
            raise ConfigError("more than one data set has the role 'probe-train'")
        from decoders import DecoderError, sweep_settings

        try:
            sweep_settings(self.config["decoder"])
        except DecoderError as exc:
            raise ConfigError(f"decoder: {exc}") from None
        overlap = set(self.by_role("select")) & set(self.by_role("eval"))
        if overlap:
            raise ConfigError(
                f"data set(s) {sorted(overlap)} have both roles 'select' and 'eval': settings chosen on "
                "the images they are reported on would flatter the decoder"
            )

    @property
    def probe_eval_datasets(self) -> list[str]:
        """The eval data sets the probe is scored on: every eval data set not marked `probe: false`."""
        return ([name for name in self.by_role("eval") if self.datasets[name].probe]
                if self.probe_train_dataset else [])

    def check_probe_categories(self) -> None:
        """Refuse, before any job runs, an eval data set with a category name the probe-train set lacks.

        The probe's classes are the probe-train set's categories, matched to an eval set's by name (never by id).
        Category lists are read from the annotation files that exist now, or, for a demo data set not yet drawn,
        from the demo's own categories; reading a category list is not an opening of the labels.
        """
        from evaluate.probe.labels import unmatched_categories

        if not self.probe_train_dataset:
            return
        train = self._category_names(self.probe_train_dataset)
        if train is None:
            return
        classes = list(train.values())
        for name in self.probe_eval_datasets:
            names = self._category_names(name)
            missing = unmatched_categories(classes, names) if names is not None else []
            if missing:
                with in_file(self.source):
                    raise ConfigError(
                        f"datasets.{name} ({self.datasets[name].fields['annotations']}) has category name(s) "
                        f"{missing} that the probe-train data set {self.probe_train_dataset!r} lacks (it has: "
                        f"{', '.join(sorted(set(classes)))}). The probe matches categories by name, so rename them "
                        f"to the probe-train set's names, or set `probe: false` on datasets.{name} to score it by "
                        "the decoder only"
                    )

    def _category_names(self, dataset: str) -> dict[int, str] | None:
        """Category id -> name of a data set, or None where its annotation file does not exist yet."""
        from evaluate.datasets.coco import read_category_names

        entry = self.datasets[dataset]
        if Path(entry.fields["annotations"]).is_file():
            return read_category_names(entry.fields["annotations"])
        if entry.demo is not None:
            from evaluate.demo.scenes import CATEGORIES

            return {int(c["id"]): str(c["name"]) for c in CATEGORIES}
        return None

    @cached_property
    def propagation(self):
        """The `video:` settings as `evaluate.video.settings.PropagationSettings` (its checks, one line each)."""
        from evaluate.video.settings import PropagationSettings

        with in_file(self.source):
            try:
                return PropagationSettings.of_config(self.config.get("video", {}))
            except KeyError as exc:  # a setting missing: the config was not validated with the schema's defaults
                raise ConfigError(f"video: no setting {exc} (validate the config with the schema)") from None

    @property
    def box_decoders(self) -> list[str]:
        """The registry's box decoders (read keys-native, give boxes): each scores every discovery data set."""
        from decoders import decoders_that

        return decoders_that(reads="keys-native", gives="boxes")

    def section(self, section: str) -> dict[str, DataSet]:
        """The data sets of one config section (`datasets:`, `videos:`, ...), by name, in the config's order."""
        return {name: d for name, d in self.datasets.items() if d.section == section}

    def fit_set(self, name: str) -> str:
        """The semseg set whose tokens fit the clusters of semseg set `name`: its `fit_on`, else `name` itself."""
        return self.config["semseg"][name].get("fit_on") or name

    def by_role(self, role: str) -> list[str]:
        """The `datasets:` entries (images with COCO labels) of a role: select, eval or probe-train."""
        return [name for name, d in self.section("datasets").items() if role in d.roles]

    @property
    def reference_checkpoint(self) -> str:
        return self.config.get("reference_checkpoint") or next(iter(self.checkpoints))

    @property
    def select_dataset(self) -> str | None:
        names = self.by_role("select")
        return names[0] if names else None

    @property
    def probe_train_dataset(self) -> str | None:
        names = self.by_role("probe-train")
        return names[0] if names else None

    @cached_property
    def config_hash(self) -> str:
        """The run's config hash (`evaluate.plumbing.provenance.config_hash` of the validated config)."""
        from evaluate.plumbing.provenance import config_hash

        return config_hash(self.config)

    def run_time(self, dataset: str) -> RunTime:
        """What the jobs of `dataset` read of the config when they run: a rule passes it through `params:`, and it
        never re-runs a job (`RunTime`, docs/design.md §8)."""
        entry = self.datasets[dataset]
        features = self.config["features"]
        return RunTime(config_hash=self.config_hash, checkpoints=tuple(self.checkpoints), keep=bool(features["keep"]),
                       workers=int(features["workers"]), roles=entry.roles, sealed=entry.sealed, budget=entry.budget)


def config_defaults(section: str) -> dict[str, Any]:
    """The defaults the schema states for one section of the config (e.g. "probe"), for code run outside the
    workflow (benches, tests) that must use the same values as a run."""
    import yaml

    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    properties = schema["properties"][section].get("properties", {})
    return {key: spec["default"] for key, spec in properties.items() if "default" in spec}
