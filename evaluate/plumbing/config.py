"""The config's checkpoints and data sets as plain tables: names that are safe folder names, checkpoints found by
glob patterns, data-set roles; and what a job reads of the config when it runs (`RunTime`). A leaf module (it
imports nothing of the project's but its errors), so a job that unpickles a `RunTime` does not carry the whole
experiment in its code hash.

- Names of checkpoints and data sets become folder names under `results/`; they must match `[A-Za-z0-9._-]+` and
  may not be `.` or `..`.
- A checkpoint is named explicitly (name -> path, run, epoch) or discovered by a glob pattern whose `{run}` and
  `{epoch}` fields are read from each matching path (name: `{run}-ep{epoch:04d}`, or `{prefix}{run}-ep…` with a
  prefix).
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from typing import Any

from evaluate import ConfigError

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
    """A checkpoint of the experiment (config `checkpoints.<name>` or found by `checkpoint_globs`); `demo`: the
    seeded demo network to generate, or None."""

    name: str
    path: str
    run: str
    epoch: int
    which: str
    demo: dict | None
    position_rule: str | None = None  # None: the architecture's default for the file (docs/design.md §11)


@dataclass(frozen=True)
class Dataset:
    """A data set of the experiment (config `datasets.<name>`); `budget` None: unlimited; `demo`: the demo scenes
    to draw, or None; `probe`: scored by the probe when it is an eval data set."""

    name: str
    images: str
    annotations: str
    roles: tuple[str, ...]
    sealed: bool
    budget: int | None
    demo: dict | None
    probe: bool


@dataclass(frozen=True)
class VideoDataset:
    """A video data set of the experiment (config `videos.<name>`, DAVIS's layout under `root`); its role is `eval`;
    `budget` None: unlimited; `demo`: the demo sequences to draw, or None."""

    name: str
    root: str
    resolution: str
    sequences_file: str | None
    sealed: bool
    budget: int | None
    demo: dict | None

    roles = ("eval",)


@dataclass
class DiscoveryDataset:
    """An object-discovery data set (config `discovery.<name>`, docs/design.md §12): kind `voc` (root, split) or
    `coco-boxes` (images, annotations, image_list); `benchmark` (voc07, voc12, coco20k) or None; its role is
    `eval`; `budget` None: unlimited; `demo`: the demo's VOC-layout drawing, or None. `spec()`: what the jobs read."""

    name: str
    kind: str
    root: str | None
    split: str
    images: str | None
    annotations: str | None
    image_list: str | None
    benchmark: str | None
    sealed: bool
    budget: int | None
    demo: dict | None

    roles = ("eval",)

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "root": self.root, "split": self.split, "images": self.images,
                "annotations": self.annotations, "image_list": self.image_list, "benchmark": self.benchmark}


@dataclass(frozen=True)
class SaliencyDataset:
    """A saliency data set (config `saliency.<name>`, docs/design.md §16): its `root` in one of the published
    downloads' layouts, or its `images` and `masks` folders; `benchmark` (ecssd, duts-te, dut-omron) or None;
    `bilateral`: the solver's "+ BS" measures too; its role is `eval`; `budget` None: unlimited; `demo`: the demo's
    drawing, or None. `spec()`: what the jobs read."""

    name: str
    root: str | None
    images: str | None
    masks: str | None
    benchmark: str | None
    bilateral: bool
    sealed: bool
    budget: int | None
    demo: dict | None

    roles = ("eval",)

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "root": self.root, "images": self.images, "masks": self.masks,
                "benchmark": self.benchmark, "bilateral": self.bilateral}


@dataclass(frozen=True)
class RunTime:
    """What a job reads of the config when it runs, never a reason to re-run it (docs/design.md §8).

    A rule passes it through `params:` like any other value, so the job sees only what its rule hands it. Snakemake
    re-runs a job when a param changes, but compares only params of builtin types (its persistence's
    `_serialize_param_builtin` leaves any other object out of the comparison), so an instance of this class reaches
    the job and never re-runs it: raising a budget, sealing a data set, giving it a role, dropping features
    (`features.keep`), changing `features.workers`, adding a checkpoint or editing anything else of the config
    plans no job again.

    config_hash: the run's config hash, recorded in every ledger record (§7); checkpoints: every checkpoint of the
    run (an extract job drops a shard's decoded inputs once each has the shard); keep, workers: `features.keep` and
    `features.workers`; roles, sealed, budget: the job's data set's roles, seal and budget (None: unlimited), read
    when its labels are opened.
    """

    config_hash: str
    checkpoints: tuple[str, ...]
    keep: bool
    workers: int
    roles: tuple[str, ...]
    sealed: bool
    budget: int | None


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


def discover_checkpoints(pattern: str, *, prefix: str, which: str) -> list[Checkpoint]:
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
        found.append(Checkpoint(name=name, path=path, run=run, epoch=epoch, which=which, demo=None))
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
            position_rule=entry.get("position_rule"),
        )
    for spec in config["checkpoint_globs"]:
        for ckpt in discover_checkpoints(spec["pattern"], prefix=spec["prefix"], which=spec["which"]):
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
    for name, entry in config["datasets"].items():
        check_name(name, "datasets:")
        roles = tuple(entry["roles"])
        for role in roles:
            if role not in ROLES:
                raise ConfigError(f"config.yaml: datasets.{name}.roles: unknown role {role!r} "
                                  f"(known: {', '.join(ROLES)})")
        sealed, budget = _seal(entry, f"datasets.{name}")
        table[name] = Dataset(
            name=name,
            images=str(entry["images"]),
            annotations=str(entry["annotations"]),
            roles=roles,
            sealed=sealed,
            budget=budget,
            demo=entry.get("demo"),
            probe=bool(entry["probe"]),
        )
    return table


def _seal(entry: dict[str, Any], where: str) -> tuple[bool, int | None]:
    """A data set's seal and budget (None: unlimited); a sealed one without a budget is an error naming `where`."""
    sealed = bool(entry["sealed"])
    budget = entry.get("budget")
    if sealed and budget is None:
        raise ConfigError(f"config.yaml: {where} is sealed but has no 'budget' (how often its labels may be opened)")
    return sealed, None if budget is None else int(budget)


def video_table(config: dict[str, Any]) -> dict[str, VideoDataset]:
    """All video data sets of the experiment, by name; a name that is also an image data set's is an error (the
    ledger counts openings, and so budgets, by data-set name)."""
    table = {}
    for name, entry in config["videos"].items():
        check_name(name, "videos:")
        if name in config["datasets"]:
            raise ConfigError(f"config.yaml: videos.{name}: the name is also a data set's under 'datasets:'; data "
                              "sets share one ledger, so give the video data set another name")
        sealed, budget = _seal(entry, f"videos.{name}")
        table[name] = VideoDataset(
            name=name,
            root=str(entry["root"]),
            resolution=str(entry["resolution"]),
            sequences_file=None if entry.get("sequences_file") is None else str(entry["sequences_file"]),
            sealed=sealed,
            budget=budget,
            demo=entry.get("demo"),
        )
    return table


DISCOVERY_FIELDS = {"voc": ("root",), "coco-boxes": ("images", "annotations")}


def discovery_table(config: dict[str, Any]) -> dict[str, DiscoveryDataset]:
    """All object-discovery data sets, by name; a name shared with an image or video data set is an error (one
    ledger counts openings by data-set name), and so is a kind's missing field."""
    table = {}
    for name, entry in config.get("discovery", {}).items():
        check_name(name, "discovery:")
        if name in config["datasets"] or name in config.get("videos", {}):
            raise ConfigError(f"config.yaml: discovery.{name}: the name is also a data set's under 'datasets:' or "
                              "'videos:'; data sets share one ledger, so give it another name")
        kind = entry["kind"]
        missing = [key for key in DISCOVERY_FIELDS[kind] if not entry.get(key)]
        if missing:
            raise ConfigError(f"config.yaml: discovery.{name}: kind {kind} needs {', '.join(missing)}")
        sealed, budget = _seal(entry, f"discovery.{name}")
        table[name] = DiscoveryDataset(
            name=name, kind=kind, root=entry.get("root"), split=str(entry["split"]), images=entry.get("images"),
            annotations=entry.get("annotations"), image_list=entry.get("image_list"),
            benchmark=entry.get("benchmark"), sealed=sealed, budget=budget, demo=entry.get("demo"))
    return table


def saliency_table(config: dict[str, Any]) -> dict[str, SaliencyDataset]:
    """All saliency data sets, by name; a name shared with another data set is an error (one ledger counts openings
    by data-set name), and so is a set given both or neither of its root and its two folders."""
    table = {}
    others = [*config["datasets"], *config.get("videos", {}), *config.get("discovery", {})]
    for name, entry in config.get("saliency", {}).items():
        check_name(name, "saliency:")
        if name in others:
            raise ConfigError(f"config.yaml: saliency.{name}: the name is also a data set's under 'datasets:', "
                              "'videos:' or 'discovery:'; data sets share one ledger, so give it another name")
        folders = [key for key in ("images", "masks") if entry.get(key)]
        if bool(entry.get("root")) == bool(folders) or len(folders) == 1:
            raise ConfigError(f"config.yaml: saliency.{name}: give its root (the folder a download unpacks to) or "
                              "both its images and masks folders")
        sealed, budget = _seal(entry, f"saliency.{name}")
        table[name] = SaliencyDataset(
            name=name, root=entry.get("root"), images=entry.get("images"), masks=entry.get("masks"),
            benchmark=entry.get("benchmark"), bilateral=bool(entry["bilateral"]), sealed=sealed, budget=budget,
            demo=entry.get("demo"))
    return table
