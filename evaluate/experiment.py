"""The experiment as `config.yaml` describes it: checkpoints, data sets and their roles, as plain tables.

Everything here is pure and importable, so `workflow/rules/common.smk` stays a thin layer and the rules of naming
(names become paths) are unit-tested.

- Names of checkpoints and data sets become folder names under `results/`; they must match `[A-Za-z0-9._-]+` and
  may not be `.` or `..`.
- A checkpoint is named explicitly (name -> path, run, epoch) or discovered by a glob pattern whose `{run}` and
  `{epoch}` fields are read from each matching path (name: `{run}-ep{epoch:04d}`, or `{prefix}{run}-ep…` with a
  prefix).
- A data set has one or more roles: `select` (decoder settings are chosen on it), `eval` (reported scores),
  `probe-train` (the probe learns on it).
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluate import ConfigError, EvaluationError  # noqa: F401 (ConfigError: re-exported)

NAME_RE = re.compile(r"[A-Za-z0-9._-]+")
ROLES = ("select", "eval", "probe-train")




def check_name(name: str, where: str) -> str:
    """`name` if it is safe as a single path component, else a ConfigError naming `where`."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name in (".", ".."):
        raise ConfigError(
            f"config.yaml: {where} name {name!r} is not allowed: names become folders under results/, "
            "so use only letters, digits, '.', '_' and '-' (and not '.' or '..')"
        )
    return name


@dataclass(frozen=True)
class Checkpoint:
    name: str
    path: str
    run: str
    epoch: int
    which: str = "teacher"
    demo: dict | None = None


@dataclass(frozen=True)
class Dataset:
    name: str
    images: str
    annotations: str
    roles: tuple[str, ...]
    sealed: bool = False
    budget: int | None = None
    demo: dict | None = None
    probe: bool = True  # scored by the probe when it is an eval data set (config: datasets.<name>.probe)


def _pattern_regex(pattern: str) -> tuple[str, re.Pattern]:
    """A glob and a regex for a pattern with `{run}` and `{epoch}` fields."""
    if "{run}" not in pattern or "{epoch}" not in pattern:
        raise ConfigError(f"config.yaml: checkpoint_globs pattern {pattern!r} must contain both {{run}} and {{epoch}}")
    glob_form = pattern.replace("{run}", "*").replace("{epoch}", "*")
    parts = re.split(r"(\{run\}|\{epoch\})", pattern)
    regex = ""
    for part in parts:
        if part == "{run}":
            regex += r"(?P<run>[^/]+?)"
        elif part == "{epoch}":
            regex += r"(?P<epoch>\d+)"
        else:
            regex += re.escape(part)
    return glob_form, re.compile("^" + regex + "$")


def discover_checkpoints(pattern: str, prefix: str = "", which: str = "teacher") -> list[Checkpoint]:
    """Checkpoints whose paths match `pattern` (with `{run}` and `{epoch}` fields), sorted by run then epoch."""
    glob_form, regex = _pattern_regex(pattern)
    found = []
    for path in sorted(glob.glob(glob_form)):
        m = regex.match(path)
        if not m:
            continue
        run, epoch = m.group("run"), int(m.group("epoch"))
        check_name(run, f"checkpoint_globs: the run read from {path!r} by pattern {pattern!r}:")
        name = check_name(f"{prefix}{run}-ep{epoch:04d}", f"checkpoint discovered from {path}:")
        found.append(Checkpoint(name=name, path=path, run=run, epoch=epoch, which=which))
    return sorted(found, key=lambda c: (c.run, c.epoch))


def checkpoint_table(config: dict[str, Any]) -> dict[str, Checkpoint]:
    """All checkpoints of the experiment, explicit ones first, by name; duplicate names are an error."""
    table: dict[str, Checkpoint] = {}
    for name, entry in (config.get("checkpoints") or {}).items():
        check_name(name, "checkpoints:")
        check_name(str(entry.get("run", name)), f"checkpoints.{name}.run:")
        table[name] = Checkpoint(
            name=name,
            path=str(entry["path"]),
            run=str(entry.get("run", name)),  # a derived default: the run of an unnamed checkpoint is its name
            epoch=int(entry["epoch"]),
            which=entry["which"],
            demo=entry.get("demo"),
        )
        if table[name].demo is not None:
            from evaluate.demo import CHECKPOINT_FORMATS

            if table[name].demo["format"] not in CHECKPOINT_FORMATS:
                raise ConfigError(f"config.yaml: checkpoints.{name}.demo.format: {table[name].demo['format']!r} is not "
                                  f"a demo checkpoint format (one of {', '.join(CHECKPOINT_FORMATS)})")
    for spec in config.get("checkpoint_globs") or []:
        for ckpt in discover_checkpoints(spec["pattern"], spec["prefix"], spec["which"]):
            if ckpt.name in table:
                raise ConfigError(
                    f"config.yaml: checkpoint name {ckpt.name!r} from pattern {spec['pattern']!r} "
                    f"({ckpt.path}) clashes with another checkpoint of that name; give the pattern a 'prefix'"
                )
            table[ckpt.name] = ckpt
    return table


def dataset_table(config: dict[str, Any]) -> dict[str, Dataset]:
    """All data sets of the experiment, by name."""
    table = {}
    for name, entry in (config.get("datasets") or {}).items():
        check_name(name, "datasets:")
        roles = tuple(entry.get("roles") or ())
        for role in roles:
            if role not in ROLES:
                raise ConfigError(f"config.yaml: datasets.{name}.roles: unknown role {role!r} (known: {', '.join(ROLES)})")
        sealed = bool(entry["sealed"])
        budget = entry.get("budget")
        if sealed and budget is None:
            raise ConfigError(f"config.yaml: datasets.{name} is sealed but has no 'budget' (how often its labels may be opened)")
        table[name] = Dataset(
            name=name,
            images=str(entry["images"]),
            annotations=str(entry["annotations"]),
            roles=roles,
            sealed=sealed,
            budget=None if budget is None else int(budget),
            demo=entry.get("demo"),
            probe=bool(entry["probe"]),
        )
    return table


SCHEMA = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "config.schema.yaml"


def load_config(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of `config` validated against the schema, every default the schema states filled in (what the
    workflow's common.smk does to the config it runs on)."""
    import copy

    from snakemake.utils import validate

    checked = copy.deepcopy(config)
    check_config_names(checked)
    validate(checked, str(SCHEMA))
    return checked


def check_config_names(config: dict[str, Any]) -> None:
    """Refuse unsafe checkpoint and data-set names with a plain message, before schema validation words it."""
    for section in ("checkpoints", "datasets"):
        entries = config.get(section)
        if isinstance(entries, dict):
            for name in entries:
                check_name(name, f"{section}:")


@dataclass
class Experiment:
    """The config read once: checkpoints, data sets by role, the reference checkpoint and the baseline."""

    config: dict[str, Any]
    checkpoints: dict[str, Checkpoint] = field(init=False)
    datasets: dict[str, Dataset] = field(init=False)

    def __post_init__(self) -> None:
        check_config_names(self.config)
        self.checkpoints = checkpoint_table(self.config)
        self.datasets = dataset_table(self.config)
        if not self.checkpoints:
            raise ConfigError("config.yaml: no checkpoints: name some under 'checkpoints:' or 'checkpoint_globs:'")
        for key in ("reference_checkpoint", "compare_to"):
            value = self.config.get(key)
            if value is not None and value not in self.checkpoints:
                raise ConfigError(
                    f"config.yaml: {key}: {value!r} is not one of the checkpoints ({', '.join(sorted(self.checkpoints))})"
                )
        if self.by_role("select") and len(self.by_role("select")) > 1:
            raise ConfigError("config.yaml: more than one data set has the role 'select'; the decoder is tuned on one")
        if self.by_role("probe-train") and len(self.by_role("probe-train")) > 1:
            raise ConfigError("config.yaml: more than one data set has the role 'probe-train'")
        from decoders import DecoderError, sweep_settings

        try:
            sweep_settings(self.config["decoder"])
        except DecoderError as exc:
            raise ConfigError(f"config.yaml: decoder: {exc}") from None
        overlap = set(self.by_role("select")) & set(self.by_role("eval"))
        if overlap:
            raise ConfigError(
                f"config.yaml: data set(s) {sorted(overlap)} have both roles 'select' and 'eval': settings chosen on "
                "the images they are reported on would flatter the decoder"
            )

    @property
    def probe_eval_datasets(self) -> list[str]:
        """The eval data sets the probe is scored on: every eval data set not marked `probe: false`."""
        return [name for name in self.by_role("eval") if self.datasets[name].probe] if self.probe_train_dataset else []

    def check_probe_categories(self) -> None:
        """Refuse, before any job runs, an eval data set with a category name the probe-train set lacks.

        The probe's classes are the probe-train set's categories, matched to an eval set's by name (never by id).
        Category lists are read from the annotation files that exist now, or, for a demo data set not yet drawn,
        from the demo's own categories; reading a category list is not an opening of the labels.
        """
        if not self.probe_train_dataset:
            return
        from evaluate.probe import unmatched_categories

        train = self._category_names(self.probe_train_dataset)
        if train is None:
            return
        classes = list(train.values())
        for name in self.probe_eval_datasets:
            names = self._category_names(name)
            missing = unmatched_categories(classes, names) if names is not None else []
            if missing:
                raise ConfigError(
                    f"config.yaml: datasets.{name} ({self.datasets[name].annotations}) has category name(s) "
                    f"{missing} that the probe-train data set {self.probe_train_dataset!r} lacks (it has: "
                    f"{', '.join(sorted(set(classes)))}). The probe matches categories by name, so rename them to "
                    f"the probe-train set's names, or set `probe: false` on datasets.{name} to score it by the "
                    "decoder only"
                )

    def _category_names(self, dataset: str) -> dict[int, str] | None:
        """Category id -> name of a data set, or None where its annotation file does not exist yet."""
        from evaluate.datasets import read_category_names

        entry = self.datasets[dataset]
        if Path(entry.annotations).is_file():
            return read_category_names(entry.annotations)
        if entry.demo is not None:
            from evaluate.demo import CATEGORIES

            return {int(c["id"]): str(c["name"]) for c in CATEGORIES}
        return None

    def by_role(self, role: str) -> list[str]:
        return [name for name, d in self.datasets.items() if role in d.roles]

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


def config_defaults(section: str) -> dict[str, Any]:
    """The defaults the schema states for one section of the config (e.g. "probe"), for code run outside the
    workflow (benches, tests) that must use the same values as a run."""
    import yaml

    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    properties = schema["properties"][section].get("properties", {})
    return {key: spec["default"] for key, spec in properties.items() if "default" in spec}
