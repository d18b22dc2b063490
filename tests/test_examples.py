"""Every experiment file of examples/ is checked as a user would run it: over stand-in files laid out under its own
paths, it passes the schema and the experiment's checks, `make check` prints its costs within every sealed budget,
and a Snakemake dry run (with its profile, where it names one) plans exactly the jobs the cost model counts. The
README's first config block is examples/coco-val2017.yaml byte for byte, and the docs include every example whole.

Adding an example is adding its file. The stand-ins come from the file itself:
- each data set of its config, drawn by the demo in its kind's layout and moved to the entry's paths (`STAND_INS`:
  one writer per data-set kind; a new kind of data set adds its writer there);
- each checkpoint file named on a header line `# reads: PATH (FORMAT, ARCHITECTURE)`: the demo's seeded network of
  that architecture in that format (the files its `checkpoint_globs` patterns find are named there too);
- a header line `# profile: PATH` runs the dry run with that Snakemake profile.
Each data set is listed in this process (its manifest, as the workflow's listing job writes it), so the dry run plans
every job, not only the listings.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from sources import REPO
from workspace import SNAKEMAKE, planned_jobs

from evaluate.costs import jobs_per_rule

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
READS = re.compile(r"^# reads: (\S+) \(([\w-]+), ([\w-]+)\)$", re.MULTILINE)
PROFILE = re.compile(r"^# profile: (\S+)$", re.MULTILINE)
README_EXAMPLE = REPO / "examples" / "coco-val2017.yaml"
IMAGES_EACH = 3  # images (or sequences) of every stand-in data set


def _merge(source: Path, target: Path) -> None:
    """Move a drawn folder's files into `target` (which may already hold another stand-in's files)."""
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.is_dir():
            _merge(item, target / item.name)
        else:
            shutil.move(item, target / item.name)


def coco_stand_in(entry: dict, scratch: Path, index: int) -> None:
    from evaluate.demo.scenes import make_demo_dataset

    annotations = make_demo_dataset(scratch, IMAGES_EACH, seed=index, first_image_id=1 + 1000 * index)
    _merge(scratch / "images", Path(entry["images"]))
    Path(entry["annotations"]).parent.mkdir(parents=True, exist_ok=True)
    shutil.move(annotations, entry["annotations"])
    if entry.get("image_list"):  # COCO20k's list: train2014 names, matched by the id at their end
        ids = range(1 + 1000 * index, 1 + 1000 * index + IMAGES_EACH)
        Path(entry["image_list"]).write_text("".join(f"train2014/COCO_train2014_{i:012d}.jpg\n" for i in ids))


def voc_stand_in(entry: dict, scratch: Path, index: int) -> None:
    from evaluate.demo.discovery import make_demo_voc

    make_demo_voc(entry["root"], n_images=IMAGES_EACH, seed=index)


def saliency_stand_in(entry: dict, scratch: Path, index: int) -> None:
    from evaluate.datasets.saliency import SET_LAYOUTS
    from evaluate.demo.saliency import IMAGES, MASKS, make_demo_saliency

    make_demo_saliency(scratch, n_images=IMAGES_EACH, seed=index)
    images, masks = ((Path(entry["root"]) / f for f in SET_LAYOUTS[entry.get("benchmark") or "ecssd"])
                     if entry.get("root") else (Path(entry["images"]), Path(entry["masks"])))
    _merge(scratch / IMAGES, images)
    _merge(scratch / MASKS, masks)


def davis_stand_in(entry: dict, scratch: Path, index: int) -> None:
    from evaluate.demo.videos import make_demo_videos

    root = Path(entry["root"])
    make_demo_videos(root, n_sequences=IMAGES_EACH, n_frames=3, seed=index)
    if entry.get("sequences_file"):
        names = sorted(p.name for p in (root / "JPEGImages" / "480p").iterdir())
        (root / entry["sequences_file"]).parent.mkdir(parents=True, exist_ok=True)
        (root / entry["sequences_file"]).write_text("\n".join(names) + "\n")


def voc_segmentation_stand_in(entry: dict, scratch: Path, index: int) -> None:
    from evaluate.demo.segmentation import make_demo_voc_segmentation

    make_demo_voc_segmentation(entry["root"], n_images=IMAGES_EACH, seed=index)
    split = Path(entry["root"]) / "ImageSets" / "Segmentation"
    if entry.get("split") and entry["split"] != "val":
        (split / "val.txt").rename(split / f"{entry['split']}.txt")


def semseg_folder_stand_in(entry: dict, scratch: Path, index: int) -> None:
    from evaluate.demo.semseg import CLASSES, IMAGES, LABELS, make_demo_semseg

    make_demo_semseg(scratch, n_images=IMAGES_EACH, seed=index)
    if entry.get("root"):
        split = entry.get("split") or "val"
        _merge(scratch / IMAGES, Path(entry["root"]) / "imgs" / split)
        _merge(scratch / LABELS, Path(entry["root"]) / "labels" / split)
    else:
        _merge(scratch / IMAGES, Path(entry["images"]))
        _merge(scratch / LABELS, Path(entry["labels"]))
    Path(entry["classes"]).parent.mkdir(parents=True, exist_ok=True)
    shutil.move(scratch / CLASSES, entry["classes"])


def cocostuff_stand_in(entry: dict, scratch: Path, index: int) -> None:
    """STEGO's layout from the demo's scenes: images/<split>/<id>.jpg, annotations/<split>/<id>.png (fine ids: the
    scenes' classes as stuffthingmaps thing ids 0..2) and the curated list."""
    import numpy as np
    from PIL import Image

    from evaluate.demo.scenes import make_scene
    from evaluate.demo.semseg import scene_labels

    root, split = Path(entry["root"]), entry.get("split") or "val2017"
    for sub in ("images", "annotations", "curated"):
        (root / sub / split).mkdir(parents=True, exist_ok=True)
    ids = [100 + k for k in range(IMAGES_EACH)]
    for k, image_id in enumerate(ids):
        pixels, annotations, painted = make_scene(index, k + 1)
        labels = scene_labels(annotations, painted)
        fine = np.where(labels == 255, 255, np.where(labels > 0, labels - 1, 255)).astype(np.uint8)
        Image.fromarray(pixels).save(root / "images" / split / f"{image_id:012d}.jpg")
        Image.fromarray(fine).save(root / "annotations" / split / f"{image_id:012d}.png")
    (root / "curated" / split / "Coco164kFull_Stuff_Coarse_7.txt").write_text(
        "".join(f"{i:012d}\n" for i in ids))


STAND_INS = {  # (section, data-set kind) -> its stand-in
    ("datasets", "coco"): coco_stand_in, ("discovery", "coco-boxes"): coco_stand_in,
    ("discovery", "voc"): voc_stand_in, ("saliency", "saliency"): saliency_stand_in,
    ("videos", "davis"): davis_stand_in, ("segmentation", "voc"): voc_segmentation_stand_in,
    ("semseg", "folder"): semseg_folder_stand_in, ("semseg", "cocostuff"): cocostuff_stand_in,
}


def test_every_kind_of_data_set_has_a_stand_in():
    from evaluate.datasets.kinds import KINDS

    # a kind no example names needs none yet: cityscapes and potsdam are read from their real downloads only
    assert {(kind.section, kind.name) for kind in KINDS} - {("semseg", "cityscapes"), ("semseg", "potsdam")} == \
        set(STAND_INS)


@pytest.fixture(scope="session")
def network_files(tmp_path_factory):
    """(format, architecture) -> a seeded demo network in that format, made once a session."""
    from evaluate.demo.checkpoints import make_demo_checkpoint

    folder = tmp_path_factory.mktemp("stand-in-checkpoints")
    made: dict[tuple[str, str], Path] = {}

    def network(fmt: str, architecture: str) -> Path:
        if (fmt, architecture) not in made:
            made[fmt, architecture] = folder / f"{fmt}-{architecture}.pth"
            make_demo_checkpoint(made[fmt, architecture], fmt=fmt, seed=0, architecture=architecture)
        return made[fmt, architecture]

    return network


def lay_out(example: Path, work: Path, network_files) -> dict:
    """Lay out the stand-ins of `example` under `work` (the current directory); return its config."""
    text = example.read_text(encoding="utf-8")
    config = yaml.safe_load(text)
    from evaluate.datasets.kinds import SECTIONS, kind_of

    for path, fmt, architecture in READS.findall(text):
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(network_files(fmt, architecture), work / path)
    index = 0
    for section in SECTIONS:
        for entry in (config.get(section) or {}).values():
            index += 1
            scratch = work / "scratch" / str(index)
            STAND_INS[(section, kind_of(section, entry.get("kind")).name)](entry, scratch, index)
    shutil.rmtree(work / "scratch", ignore_errors=True)
    return config


def list_data_sets(exp) -> dict[str, int]:
    """Write each data set's manifest as its listing job would; return its shards (sequences for a video set)."""
    from evaluate.datasets.manifest import write_manifest
    from evaluate.plumbing import paths

    units = {}
    for name, dataset in exp.datasets.items():
        manifest = write_manifest(spec=dataset.spec, roles=dataset.roles, shard_size=exp.config["features"][
            "shard_size"], out=paths.MANIFEST.format(dataset=name))
        units[name] = len(manifest["shards"]) if "shards" in manifest else len(manifest["sequences"])
    return units


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_the_example_passes_its_checks_and_its_dry_run_plans_the_jobs_the_cost_model_counts(example, tmp_path,
                                                                                           monkeypatch, network_files):
    from evaluate.check import check
    from evaluate.experiment import Experiment, load_config

    monkeypatch.chdir(tmp_path)
    config = lay_out(example, tmp_path, network_files)
    exp = Experiment(load_config(config))  # the schema, then the experiment's own checks
    exp.check_probe_categories()
    named = set(READS.findall(example.read_text(encoding="utf-8")))
    assert {c.path for c in exp.checkpoints.values()} == {path for path, _, _ in named}, "a `# reads:` line is missing"
    text, fits = check(example)
    assert fits, text
    for name, dataset in exp.datasets.items():
        if dataset.sealed:
            assert re.search(rf"^  {re.escape(name)} +yes +{dataset.budget} +0 +\d+", text, re.MULTILINE), text
    units = list_data_sets(exp)
    profile = PROFILE.findall(example.read_text(encoding="utf-8"))
    proc = subprocess.run(
        [str(SNAKEMAKE), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile",
         str(example), "--cores", "2", "--dry-run", *(["--profile", str(REPO / profile[0])] if profile else [])],
        capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    expected = {rule: n for rule, n in jobs_per_rule(exp, units).items()
                if rule not in ("manifest", "demo_dataset", "demo_checkpoint")}  # listed above; no demo here
    assert planned_jobs(out) == expected


def first_yaml_block(markdown: str) -> str:
    match = re.search(r"^```yaml\n(.*?)^```$", markdown, re.MULTILINE | re.DOTALL)
    assert match, "no yaml block"
    return match.group(1)


def test_the_readme_s_first_config_is_the_coco_example_byte_for_byte():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert first_yaml_block(readme) == README_EXAMPLE.read_text(encoding="utf-8")


def test_the_docs_include_every_example_whole_and_copy_none():
    pages = {page.name: page.read_text(encoding="utf-8") for page in sorted((REPO / "docs").glob("*.md"))}
    included = {m for text in pages.values() for m in re.findall(r'--8<-- "examples/([\w.-]+)"', text)}
    assert {e.name for e in EXAMPLES} <= included
    for example in EXAMPLES:
        body = example.read_text(encoding="utf-8").splitlines()
        checkpoints_line = next(line for line in body if line.startswith("checkpoints:"))
        first_entry = body[body.index(checkpoints_line) + 1]
        for name, text in pages.items():
            assert first_entry not in text, f"docs/{name} copies {example.name} by hand; include it (--8<--)"


def test_a_pattern_that_finds_a_file_an_entry_names_leaves_it_to_that_entry(tmp_path, monkeypatch):
    """The README's COCO example once stopped here: its pattern found the checkpoint its explicit entry named."""
    from evaluate.experiment import load_config
    from evaluate.plumbing.config import checkpoint_table

    monkeypatch.chdir(tmp_path)
    for epoch in (100, 200):
        (tmp_path / "ckpts" / "selfpatch").mkdir(parents=True, exist_ok=True)
        (tmp_path / "ckpts" / "selfpatch" / f"checkpoint{epoch:04d}.pth").write_bytes(b"")
    config = load_config({
        "checkpoints": {"sp200": {"path": "ckpts/selfpatch/checkpoint0200.pth", "run": "selfpatch", "epoch": 200}},
        "checkpoint_globs": [{"pattern": "ckpts/{run}/checkpoint{epoch}.pth"}]})
    table = checkpoint_table(config)
    assert {name: c.path for name, c in table.items()} == {"sp200": "ckpts/selfpatch/checkpoint0200.pth",
                                                           "selfpatch-ep0100": "ckpts/selfpatch/checkpoint0100.pth"}
