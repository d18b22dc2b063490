"""Adding a VOC segmentation split and an unsupervised-segmentation set to a finished run (docs/design.md §17, §18):
only their jobs run (each one's listing; the class-token attention and one scoring job; tokens320, the clusters,
the maps and one scoring job), only their labels are opened, nothing computed is touched; the tables show the
attention-mask measures with DINO's published rows set apart and the per-head table, and the unsupervised measures;
the figures of both are drawn, and a second dry run plans nothing. One run for both, so the suite pays for one
finished-run copy."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest
import yaml
from voc_layout import write_voc_from_coco
from workspace import Workspace, openings_per_dataset, planned_jobs, stamps, untouched

pytestmark = [pytest.mark.slow, pytest.mark.coco]


def test_adding_a_segmentation_split_and_a_semseg_set_runs_only_their_jobs_and_opens_only_their_labels(
        finished_template, coco_mini, tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("segmentation"), template=finished_template)
    results = ws.work / "results"
    before = openings_per_dataset(ws, budget_rows=True)
    features = stamps(results / "features")
    write_voc_from_coco(coco_mini, ws.work / "VOC2012", n_images=2)
    config = yaml.safe_load((ws.work / "config.yaml").read_text())
    config["segmentation"] = {"voc": {"kind": "voc", "root": str(ws.work / "VOC2012"), "benchmark": "voc12-seg",
                                      "sealed": True, "budget": 3}}
    config["semseg"] = {"shapes": {"kind": "folder", "images": "results/demo/semseg/shapes/images",
                                   "labels": "results/demo/semseg/shapes/labels",
                                   "classes": "results/demo/semseg/shapes/classes.txt", "n_init": 2,
                                   "demo": {"n_images": 3, "seed": 8}}}
    ws.write_config(config)

    # before their manifests (Snakemake checkpoints) exist, the scoring jobs wait on them; the ledger's outputs follow
    planned = planned_jobs(ws.snakemake("--dry-run"))
    assert set(planned) == {"demo_dataset", "manifest", "score_attention_masks", "score_semseg", "fit_clusters",
                            "scores", "tables", "figures", "html_report", "all"}, planned
    assert planned["manifest"] == 2 and planned["demo_dataset"] == 1
    ran = ws.snakemake()
    counts = {rule: ran.count(f"rule {rule}:") for rule in (
        "read_cls_attention", "score_attention_masks", "extract_tokens320", "fit_clusters", "predict_clusters",
        "score_semseg", "extract", "score_decoder", "score_probe")}
    assert counts == {"read_cls_attention": 2, "score_attention_masks": 1, "extract_tokens320": 3,
                      "fit_clusters": 1, "predict_clusters": 3, "score_semseg": 1, "extract": 0,
                      "score_decoder": 0, "score_probe": 0}  # shards of one image: 2 VOC, 3 drawn
    with open(results / "ledger" / "openings.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle)]
    after = Counter(row["dataset"] for row in rows)
    assert after - before == Counter({"voc": 2, "shapes": 1})  # a budget row and one opening; one opening
    assert [row["purpose"] for row in rows if row["dataset"] == "voc"] == ["budget", "eval"]
    assert untouched(features, results / "features")

    masks = json.loads((results / "ledger/records/attention_masks/a/voc.json").read_text())
    assert (masks["reading"], masks["decoder"], masks["setting"], masks["form"]) == (
        "cls-attention", "attention-mass", "mass=0.6", "released")  # whatever features.form (backbone) says
    meta = json.loads((results / "cls-attention/a/voc/000.json").read_text())
    assert (meta["reading"], meta["form"], meta["precision"]) == ("cls-attention", "released", "float32")
    assert [m["measure"] for m in masks["measures"]] == ["attention_mask_jaccard", "attention_mask_jaccard_heads"]
    table = (results / "tables" / "checkpoints_voc.md").read_text()
    assert "attention-mask Jaccard" in table and "DINO (published)" in table and "| 45.9 |" in table
    assert (results / "tables" / "attention-mask-heads_voc.md").is_file()
    assert (results / "figures" / "attention-masks_a_voc.png").stat().st_size > 1000

    semseg = json.loads((results / "ledger/records/semseg/a/shapes.json").read_text())
    assert (semseg["reading"], semseg["decoder"], semseg["setting"]) == ("tokens320", "spherical-kmeans",
                                                                         "k=4,seed=0,n_init=2,iter=100")
    fit = json.loads((results / "semseg/a/shapes/fit.json").read_text())
    assert fit["k"] == 4 and len(fit["centres"]) == 4 and semseg["fit"]["centres_sha256"] == fit["centres_sha256"]
    assert sorted(p.name for p in (results / "semseg/a/shapes/maps/000").glob("*.png")) == ["0.png"]
    table = (results / "tables" / "checkpoints_shapes.md").read_text()
    assert "unsup. mIoU" in table and "unsup. accuracy" in table
    assert (results / "figures" / "semseg-confusion_a_shapes.png").stat().st_size > 1000
    assert set(planned_jobs(ws.snakemake("--dry-run"))) == set()
