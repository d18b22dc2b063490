"""An experiment checked without running it, and what it will cost (`make check CONFIG=my.yaml`):

    python -m evaluate.check [CONFIG]      # CONFIG: config.yaml by default; run where the workflow runs

It validates the config as the workflow does (the schema with its defaults, the experiment's own checks, the probe's
categories), lists every data set (a demo set not yet drawn is drawn into a temporary folder, as its seed draws it),
reads every checkpoint's architecture, and prints the jobs of each rule of a fresh run, the features' bytes on disk,
and per data set the label openings the run needs against its budget (`evaluate.costs`, which decides the numbers).
It exits 1 with one line on stderr for a config the workflow would refuse, a sealed budget too small included.

`refuse_over_budget_now` is the workflow's own check (workflow/rules/common.smk): the same openings, refused before
any job runs.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluate import ConfigError, EvaluationError
from evaluate.costs import (
    Budget,
    Disk,
    budgets,
    disk,
    jobs_per_rule,
    label_uses,
    refuse_over_budget,
    spent_openings,
)
from evaluate.plumbing import paths

if TYPE_CHECKING:
    from evaluate.experiment import Experiment
    from evaluate.pixels.geometry import Geometry


def ledger_state(exp: Experiment) -> tuple[dict[str, int], set[str]]:
    """(openings spent per data set, from results/ledger/openings.csv with its chain verified; the outputs of the
    experiment's scorings that exist now)."""
    from evaluate.ledger.openings import read_openings

    spent = spent_openings(read_openings(paths.OPENINGS))
    done = {use.output for use in label_uses(exp) if Path(use.output).is_file()}
    return dict(spent), done


def label_budgets(exp: Experiment) -> list[Budget]:
    """Every labelled data set's openings against its budget, as the ledger stands now."""
    spent, done = ledger_state(exp)
    return budgets(exp, spent, done)


def refuse_over_budget_now(exp: Experiment) -> None:
    """ConfigError, before any job, where a sealed data set's spent and needed openings exceed its budget."""
    refuse_over_budget(label_budgets(exp))


def load_experiment(config_file: str | Path) -> Experiment:
    """The experiment of a config file, validated as the workflow validates it (every refusal a ConfigError)."""
    import yaml
    from snakemake.exceptions import WorkflowError

    from evaluate.experiment import Experiment, load_config

    path = Path(config_file)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: not a mapping of config keys")
    try:
        config = load_config(raw, source=str(path))
    except WorkflowError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise ConfigError(f"{path}: {' '.join(lines[:3])}") from None
    exp = Experiment(config, source=str(path))
    exp.check_probe_categories()
    return exp


def _opened(spec: dict[str, Any], demo: dict | None, writer: str, section: str, scratch: Path) -> Any:
    """A data set opened for listing; a demo set not drawn yet is drawn into `scratch` first (its seed draws the
    same set the run will)."""
    from evaluate.datasets import open_dataset, resolved

    folder = paths.DEMO_DATASET.format(section=section, dataset=spec["name"])
    if demo is None or Path(folder).exists():
        return open_dataset(spec)
    drawn = scratch / section / spec["name"]
    resolved(writer)(drawn, **demo)
    moved = {key: str(drawn) + value[len(folder):] if isinstance(value, str) and value.startswith(folder) else value
             for key, value in spec.items()}
    return open_dataset(moved)


def listed(exp: Experiment, scratch: Path) -> tuple[dict[str, int], dict[str, int], dict[str, list]]:
    """(images per data set, or sequences for a video set; shards per data set, or sequences; each discovery set's
    image sizes (height, width), from each file's header as the reading opens it)."""
    from evaluate.pixels.images import ImageError, header_size

    counts, units, sizes = {}, {}, {}
    shard_size = int(exp.config["features"]["shard_size"])
    for name, entry in exp.datasets.items():
        dataset = _opened(entry.spec, entry.demo, entry.demo_writer, entry.section, scratch)
        if entry.section == "videos":
            counts[name] = units[name] = len(dataset.sequences)
            continue
        counts[name] = len(dataset.image_ids)
        units[name] = math.ceil(counts[name] / shard_size)
        if entry.section == "discovery":
            sizes[name] = []
            for image_id in dataset.image_ids:
                width, height = header_size(dataset.image_path(image_id), "image", ImageError)
                sizes[name].append((height, width))
    return counts, units, sizes


def geometry_of(checkpoint: Any) -> Geometry:
    """A checkpoint's network geometry: its demo architecture's, else read from its file's keys."""
    from evaluate.networks.checkpoints import (
        CheckpointError,
        detect_format,
        read_checkpoint_file,
        unwrap_checkpoint,
    )
    from evaluate.networks.registry import REGISTRY, ArchitectureError, identify

    if checkpoint.demo is not None:
        return REGISTRY[checkpoint.demo.get("architecture", "vit-s16")].geometry
    if not Path(checkpoint.path).is_file():
        raise ConfigError(f"checkpoints.{checkpoint.name}: {checkpoint.path} does not exist")
    state = read_checkpoint_file(checkpoint.path)
    try:
        network, _ = unwrap_checkpoint(state, detect_format(state), checkpoint.which)
        return identify(network).architecture.geometry
    except (CheckpointError, ArchitectureError) as exc:
        raise ConfigError(f"checkpoints.{checkpoint.name}: {checkpoint.path}: {exc}") from None


def native_patches(exp: Experiment, sizes: dict[str, list], geometries: dict[str, Geometry]) -> dict:
    """Per (discovery data set, patch size): the sum of ceil(H / p) * ceil(W / p) over its images."""
    patches = {g.patch for g in geometries.values()}
    return {(name, p): sum(math.ceil(h / p) * math.ceil(w / p) for h, w in sizes[name])
            for name in exp.section("discovery") for p in patches}


def _size(n_bytes: int) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes / 1e3:.1f} kB"


def _table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    cells = [tuple(str(c) for c in row) for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [all(re.fullmatch(r"-?[\d.]+( [kMGT]B)?|-", row[i]) for row in cells[1:]) for i in range(len(header))]
    return ["  " + "  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
            .rstrip() for row in cells]


def report(config_file: str | Path, exp: Experiment, counts: dict[str, int], jobs: dict[str, int], space: Disk,
           found: list[Budget]) -> str:
    """The printed check: what the experiment holds, its jobs per rule, its disk, its label openings."""
    features = exp.config["features"]
    sets = ", ".join(f"{name} ({d.section}, {counts[name]} {'sequences' if d.section == 'videos' else 'images'})"
                     for name, d in exp.datasets.items())
    lines = [f"{config_file}: a valid experiment of {len(exp.checkpoints)} checkpoint(s) on {sets}", "",
             "Jobs of a fresh run, per rule (`make dry-run` lists those still to run):"]
    lines += _table(("rule", "jobs"), [*jobs.items(), ("total", sum(jobs.values()))])
    coco = sum(counts[n] for n in exp.section("datasets"))
    native = sum(counts[n] for n in exp.section("discovery"))
    lines += ["", f"Disk, from the features' shapes (features.dtype {features['dtype']}):"]
    lines += _table(("what", "size", "of"), [
        ("keys480 + tokens224", _size(space.features), f"{len(exp.checkpoints)} checkpoint(s) x {coco} image(s)"),
        ("keys-native", _size(space.native), f"{len(exp.checkpoints)} checkpoint(s) x {native} image(s)"),
        ("decoded inputs", _size(space.inputs), f"{coco} image(s), shared by the checkpoints"),
        ("tokens320", _size(space.tokens320), f"{len(exp.checkpoints)} checkpoint(s) x "
                                              f"{sum(counts[n] for n in exp.section('semseg'))} image(s), float32"),
        ("total", _size(space.total), ""),
    ])
    if not space.kept:
        lines.append("  (features.keep is false: keys480, tokens224, keys-native and the decoded inputs are deleted "
                     "once every job that reads them ran)")
    lines += ["", "Label openings (one opening: one job reading a data set's labels; docs/ledger.md):"]
    rows = [(b.dataset, "yes" if b.sealed else "no", "-" if b.budget is None else b.budget, b.spent, b.needed,
             "-" if b.left is None else b.left,
             ", ".join(f"{reading} {n}" for reading, n in b.needed_by_reading.items()) or "-") for b in found]
    lines += _table(("data set", "sealed", "budget", "spent", "needed", "left", "needed by reading"), rows)
    over = [b for b in found if b.over]
    lines += ["", *(f"OVER BUDGET: {b.refusal()}" for b in over)] if over else [
        "", "Every sealed data set's budget covers the run."]
    return "\n".join(lines)


def check(config_file: str | Path) -> tuple[str, bool]:
    """(the printed check of a config file, whether the run fits every sealed budget)."""
    exp = load_experiment(config_file)
    with tempfile.TemporaryDirectory(prefix="lfse-check-") as scratch:
        counts, units, sizes = listed(exp, Path(scratch))
    geometries = {name: geometry_of(c) for name, c in exp.checkpoints.items()}
    space = disk(exp, {n: counts[n] for n in [*exp.section("datasets"), *exp.section("semseg")]}, geometries,
                 native_patches(exp, sizes, geometries))
    found = label_budgets(exp)
    return report(config_file, exp, counts, jobs_per_rule(exp, units), space, found), not any(b.over for b in found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.check", description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="config.yaml", help="the experiment's config file")
    args = parser.parse_args(argv)
    try:
        text, fits = check(args.config)
    except EvaluationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(text)
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
