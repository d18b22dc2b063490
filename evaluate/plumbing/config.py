"""The config's checkpoints and data sets as plain tables: names that are safe folder names, checkpoints found by
glob patterns, data-set roles; and what a job reads of the config when it runs (`RunTime`). A leaf module (it
imports nothing of the project's but its errors), so a job that unpickles a `RunTime` does not carry the whole
experiment in its code hash.

- A ConfigError raised here, or anywhere below the experiment, names the config key, not the file: `in_file` puts
  the name of the experiment file actually read in front, where the experiment is read (`evaluate.experiment`, the
  workflow's own process) and around every job (`evaluate.jobs.run_job`, which finds the file in `EXPERIMENT_ENV`, set
  by `workflow/rules/common.smk`: a job is never handed the config, and a job's error about the config still names
  the file to edit).
- Names of checkpoints and data sets become folder names under `results/`; they must match `[A-Za-z0-9._-]+` and
  may not be `.` or `..`.
- A data set is an entry of a config section (`DataSet`): where it lives (its kind's fields), its roles, its seal and
  budget; the table of every section's entries is built with the data-set kinds (`evaluate.experiment`).
- A checkpoint is named explicitly (name -> path, run, epoch) or discovered by a glob pattern whose `{run}` and
  `{epoch}` fields are read from each matching path (name: `{run}-ep{epoch:04d}`, or `{prefix}{run}-ep…` with a
  prefix).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from evaluate import ConfigError

SOURCE = "config.yaml"  # the experiment file the Snakefile reads when no --configfile is given
# The environment variable naming the experiment file(s) the workflow read, for its jobs' config errors (set in
# workflow/rules/common.smk; a job an executor plugin submits parses the workflow again and sets it alike). It names a
# file in an error message and decides nothing else, so it is no input of any job.
EXPERIMENT_ENV = "LFSE_EXPERIMENT"
NAME_RE = re.compile(r"[A-Za-z0-9._-]+")
ROLES = ("select", "eval", "probe-train")


@contextlib.contextmanager
def in_file(source: str) -> Iterator[None]:
    """A ConfigError raised within, its message preceded by the experiment file's name `source` (one line); once
    only, so checks that call each other may each name the file (the error keeps the name in `.source`)."""
    try:
        yield
    except ConfigError as exc:
        if getattr(exc, "source", None) is not None:
            raise
        named = ConfigError(f"{source}: {exc}")
        named.source = source
        raise named from None


def experiment_file() -> str:
    """The experiment file(s) this process's workflow read (`EXPERIMENT_ENV`), else `SOURCE`."""
    return os.environ.get(EXPERIMENT_ENV) or SOURCE


def check_name(name: str, where: str) -> str:
    """`name` if it is safe as a single path component, else a ConfigError naming `where`."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name in (".", ".."):
        raise ConfigError(
            f"{where} name {name!r} is not allowed: names become folders under results/, "
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

    @property
    def params(self) -> dict[str, Any]:
        """What its jobs are handed, the one way a checkpoint travels to them: name, path, run, epoch, which network
        and position rule."""
        return {"name": self.name, "path": self.path, "run": self.run, "epoch": self.epoch, "which": self.which,
                "position_rule": self.position_rule}


@dataclass(frozen=True)
class DataSet:
    """A data set of the experiment: an entry `name` of config section `section` (`datasets:`, `videos:`,
    `discovery:`, `saliency:`, ...), of kind `kind` (`evaluate.datasets.kinds.KINDS`), opened by `opener` and drawn
    for the demo by `demo_writer` (each "module:callable").

    fields: the entry's own fields that say where it lives and how it is read (its kind's `fields`: paths, split,
    benchmark, ...; absent ones None); roles: `select`, `eval`, `probe-train` (a `datasets:` entry says; every other
    section's are `eval`); probe: whether the probe scores it, as an eval set (`datasets:` only); sealed, budget
    (None: unlimited); demo: the demo drawing's values, or None. `spec` is what the jobs are handed: the name,
    section, kind and fields, so a job opens the data set without the config (and a change to anything else of the
    entry, a role or a budget, re-runs none of them).
    """

    name: str
    section: str
    kind: str
    opener: str
    fields: dict[str, Any]
    roles: tuple[str, ...]
    sealed: bool
    budget: int | None
    demo: dict | None
    demo_writer: str = ""
    probe: bool = False

    @property
    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "section": self.section, "kind": self.kind, "opener": self.opener, **self.fields}


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
        raise ConfigError(f"checkpoint_globs pattern {pattern!r} must contain both {{run}} and {{epoch}}")
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
    """All checkpoints of the experiment, explicit ones first, by name; a file a pattern finds that an explicit entry
    names is left to that entry; two checkpoints of one name are an error."""
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
    named = {os.path.realpath(c.path) for c in table.values()}
    for spec in config["checkpoint_globs"]:
        for ckpt in discover_checkpoints(spec["pattern"], prefix=spec["prefix"], which=spec["which"]):
            if os.path.realpath(ckpt.path) in named:  # a file an entry names is that entry's, whatever a pattern finds
                continue
            if ckpt.name in table:
                raise ConfigError(
                    f"checkpoint name {ckpt.name!r} from pattern {spec['pattern']!r} "
                    f"({ckpt.path}) clashes with another checkpoint of that name; give the pattern a 'prefix'"
                )
            table[ckpt.name] = ckpt
    return table


def seal_of(entry: dict[str, Any], where: str) -> tuple[bool, int | None]:
    """A data set's seal and budget (None: unlimited); a sealed one without a budget is an error naming `where`."""
    sealed = bool(entry["sealed"])
    budget = entry.get("budget")
    if sealed and budget is None:
        raise ConfigError(f"{where} is sealed but has no 'budget' (how often its labels may be opened)")
    return sealed, None if budget is None else int(budget)
