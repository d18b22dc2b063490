"""Peak resident memory of every stage against data-set size: the workflow must stream through shards.

In one run, the real workflow (one seeded checkpoint, decoder and probe) is run twice on coco2017-mini photos:
an eval data set of --small and of --large images (select and probe-train sets stay at 10 images each). Snakemake's
own per-job benchmark files give each job's peak RSS (max_rss, MB) and peak PSS (max_pss, MB: shared pages divided
among the processes sharing them); the bench prints, per rule, the largest peak of any job of that rule for both
sizes, and their ratio. Target: the larger within 1.2x of the smaller. Every job setting but the shard size is the
config schema's default, so each job is the one a run does.

RSS counts a page once per process that maps it, so a job with forked workers (preprocess) reads about twice its
memory whenever Snakemake's sampler happens to catch a worker alive, and its RSS peak is bimodal across its jobs
whatever the data set's size; PSS counts each shared page once and is the figure to read for such a job.

--architecture picks the seeded checkpoint's network (default vit-s16, the seed's; any registry name, in the
backbone form, `features.form`'s default): `--architecture vit-s8` runs the same measurement on a ViT-S/8, whose
keys480 are (N, 3600, 384) per shard against ViT-S/16's (N, 900, 384), so its extract and decode jobs hold four
times the rows per image (docs/design.md §14). The header prints the network's reading shapes. ViT-S/8 costs about
seven times ViT-S/16's network work per image: on 2 shared cores (load ~5) `--architecture vit-s8 --small 10
--large 50 --shard-size 5` (the same 5x in images and in shards as 30 -> 150 in shards of 10) took 15 + 20 minutes;
the default 30 -> 150 would take over an hour there.

    python bench/memory.py [--architecture vit-s16] [--small 30] [--large 150] [--shard-size 10] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.machine import machine_line  # noqa: E402
from bench.shared_data import COCO_MINI, skip_unless  # noqa: E402
from evaluate.networks.registry import ARCHITECTURES, REGISTRY  # noqa: E402

RULES = ("preprocess", "extract", "attention_shard", "attention_record", "attention_rows", "sweep_decode",
         "select_setting", "decode", "merge_masks", "score_decoder", "eigenvector", "train_probe", "score_probe",
         "scores", "tables")


def pooled_subset(out: Path, name: str, image_ids: list[int], pooled: dict) -> Path:
    """A COCO JSON of `image_ids` taken from the pooled val + train annotations."""
    wanted = set(image_ids)
    data = {
        "info": pooled["info"], "licenses": pooled["licenses"], "categories": pooled["categories"],
        "images": [im for im in pooled["images"] if im["id"] in wanted],
        "annotations": [a for a in pooled["annotations"] if a["image_id"] in wanted],
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def experiment(root: Path, n_eval: int, shard_size: int, pooled: dict, checkpoint: Path) -> dict:
    ids = sorted(im["id"] for im in pooled["images"])
    sets = {"eval": ids[:n_eval], "select": ids[-20:-10], "train": ids[-10:]}
    datasets = {}
    for name, roles in (("eval", ["eval"]), ("select", ["select"]), ("train", ["probe-train"])):
        ann = pooled_subset(root, name, sets[name], pooled)
        datasets[name] = {"images": str(COCO_MINI / "images"), "annotations": str(ann), "roles": roles}
    return {
        "checkpoints": {"seeded": {"path": str(checkpoint), "run": "bench", "epoch": 0}},
        "datasets": datasets,
        "reference_checkpoint": "seeded",
        "features": {"shard_size": shard_size},  # every other setting: the schema's default, as a run has it
    }


def peak_by_rule(work: Path, column: str) -> dict[str, float]:
    """The largest `column` (max_rss or max_pss, MB) of any job of each rule, from the benchmark files: one per job
    (benchmarks/{rule}/.../*.tsv) or, for a rule without wildcards, benchmarks/{rule}.tsv."""
    peaks: dict[str, float] = {}
    for rule in RULES:
        single = work / "benchmarks" / f"{rule}.tsv"
        for tsv in [*(work / "benchmarks" / rule).rglob("*.tsv"), *([single] if single.exists() else [])]:
            with open(tsv) as handle:
                for row in csv.DictReader(handle, delimiter="\t"):
                    try:
                        peaks[rule] = max(peaks.get(rule, 0.0), float(row[column]))
                    except (KeyError, ValueError):
                        pass
    return peaks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--architecture", default="vit-s16", choices=ARCHITECTURES,
                        help="the seeded checkpoint's network (default vit-s16)")
    parser.add_argument("--small", type=int, default=30)
    parser.add_argument("--large", type=int, default=150)
    parser.add_argument("--shard-size", type=int, default=10)
    parser.add_argument("--keep", type=Path, help="keep the working folders here instead of a temporary folder")
    args = parser.parse_args()
    print(machine_line(), "(this process; the workflow's jobs set their own threads)")
    geometry = REGISTRY[args.architecture].geometry
    shapes = ", ".join(f"{kind} (N, {rows}, {width})" for kind, (rows, width) in geometry.kinds.items())
    print(f"network: {args.architecture} (seeded, backbone form): {shapes} per shard of N images; load average "
          f"before {os.getloadavg()[0]:.1f} (other processes share the CPUs)")
    skip_unless(COCO_MINI / "annotations.json", "bench/memory.py")
    pooled = json.loads((COCO_MINI / "annotations.json").read_text())
    train = json.loads((COCO_MINI / "annotations_train.json").read_text())
    pooled["images"] += train["images"]
    pooled["annotations"] += train["annotations"]
    if args.large > len(pooled["images"]):
        parser.error(f"--large {args.large}: coco2017-mini has {len(pooled['images'])} images")

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-memory-"))
    root.mkdir(parents=True, exist_ok=True)
    from evaluate.demo.checkpoints import make_demo_checkpoint

    checkpoint = root / "seeded.pth"
    make_demo_checkpoint(checkpoint, "dino-backbone", seed=0, architecture=args.architecture)
    peaks, walls = {}, {}
    for n in (args.small, args.large):
        work = root / f"n{n}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        (work / "config.yaml").write_text(yaml.safe_dump(experiment(work, n, args.shard_size, pooled, checkpoint)))
        started = time.time()
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory",
             str(work), "--configfile", str(work / "config.yaml"), "--cores", "2", "--quiet", "all"],
            capture_output=True, text=True,
        )
        walls[n] = time.time() - started
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            return 1
        peaks[n] = {column: peak_by_rule(work, column) for column in ("max_rss", "max_pss")}
        print(f"{n} eval images: workflow finished in {walls[n]:.0f} s; load average {os.getloadavg()[0]:.1f}",
              flush=True)

    print(f"\n{args.architecture}: peak memory per job (MB, largest job of each rule), eval data set of {args.small} "
          f"vs {args.large} "
          f"images (shards of {args.shard_size}):")
    print(f"{'':16s} {'RSS':>26s}   {'PSS':>26s}")
    print(f"{'rule':16s} {args.small:>8d} {args.large:>8d}   ratio   {args.small:>8d} {args.large:>8d}   ratio")
    columns = ("max_rss", "max_pss")
    measured = [rule for rule in RULES if all(rule in peaks[n][c] for n in (args.small, args.large) for c in columns)]
    ratios = {c: {r: peaks[args.large][c][r] / peaks[args.small][c][r] for r in measured} for c in columns}
    worst = {c: max(ratios[c].values(), default=0.0) for c in columns}
    for rule in measured:
        cells = [f"{peaks[args.small][c][rule]:8.0f} {peaks[args.large][c][rule]:8.0f}   {ratios[c][rule]:.2f}x"
                 for c in columns]
        print(f"{rule:16s} {cells[0]}   {cells[1]}")
    for column, name in zip(columns, ("RSS", "PSS")):
        small, large = peaks[args.small][column], peaks[args.large][column]
        overall = max(large.values()) / max(small.values())
        print(f"largest job overall, {name}: {max(small.values()):.0f} MB vs {max(large.values()):.0f} MB -> "
              f"{overall:.2f}x (target <= 1.2x); worst rule {worst[column]:.2f}x")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
