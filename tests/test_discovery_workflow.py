"""Adding a VOC-layout data set to a finished run (docs/design.md §12): only its jobs run (its manifest, keys-native,
boxes, one scoring job per box decoder), only its labels are opened, nothing computed is touched; the checkpoint
table shows both decoders' CorLoc on boxes and, for its declared benchmark, the published rows set apart."""

from __future__ import annotations

import csv
from collections import Counter

import pytest
import yaml
from test_discovery import write_voc
from workspace import Workspace, planned_jobs

pytestmark = [pytest.mark.slow, pytest.mark.coco]


def test_adding_a_voc_set_runs_only_its_jobs_and_opens_only_its_labels(finished_template, coco_mini,
                                                                        tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("discovery"), template=finished_template)
    results = ws.work / "results"
    with open(results / "ledger" / "openings.csv", newline="") as handle:
        before = Counter(row["dataset"] for row in csv.DictReader(handle))
    features = {str(p): p.stat().st_mtime_ns for p in (results / "features").rglob("*") if p.is_file()}
    voc = ws.work / "VOC2007"
    write_voc(voc, coco_mini, ids=(139, 11813))
    config = yaml.safe_load((ws.work / "config.yaml").read_text())
    config["discovery"] = {"voc": {"kind": "voc", "root": str(voc), "benchmark": "voc07"}}
    ws.write_config(config)

    # before its manifest (a Snakemake checkpoint) exists, the scoring jobs wait on it; the ledger's outputs follow
    planned = planned_jobs(ws.snakemake("--dry-run"))
    assert set(planned) == {"discovery_manifest", "score_discovery", "scores", "tables", "figures", "html_report",
                            "all"}, planned
    ran = ws.snakemake()
    counts = {rule: ran.count(f"rule {rule}:") for rule in ("extract_native", "discover_boxes", "score_discovery",
                                                            "extract", "score_decoder", "score_probe")}
    n_checkpoints = len(config["checkpoints"])
    jobs = n_checkpoints * -(-2 // int(config["features"]["shard_size"]))  # 2 images: one job per checkpoint and shard
    assert counts == {"extract_native": jobs, "discover_boxes": jobs,
                      "score_discovery": 2 * n_checkpoints, "extract": 0, "score_decoder": 0, "score_probe": 0}
    with open(results / "ledger" / "openings.csv", newline="") as handle:
        after = Counter(row["dataset"] for row in csv.DictReader(handle))
    assert after - before == Counter({"voc": 2 * n_checkpoints})
    assert all(features[p] == __import__("os").stat(p).st_mtime_ns for p in features)
    table = (results / "tables" / "checkpoints_voc.md").read_text()
    assert "tokencut CorLoc (box)" in table and "lost CorLoc (box)" in table
    assert "TokenCut (published)" in table and "68.8" in table and "61.9" in table
    assert "LOST's README" in table.splitlines()[0]
    assert set(planned_jobs(ws.snakemake("--dry-run"))) == set()
