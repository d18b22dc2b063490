"""Adding a VOC-layout data set and a saliency set to a finished run (docs/design.md §15, §16): only their jobs run
(each one's manifest; keys-native, boxes and one scoring job per box decoder; the saliency reading and one scoring
job), only their labels are opened, nothing computed is touched; the checkpoint tables show both decoders' CorLoc on
boxes, the saliency measures with and without the solver, and, for each declared benchmark, the published rows set
apart; the saliency figure is drawn. One run for both, so the suite pays for one finished-run copy."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml
from test_discovery import write_voc
from test_saliency_reading import FRAMES, link_davis_frames
from workspace import Workspace, openings_per_dataset, planned_jobs, stamps, untouched

pytestmark = [pytest.mark.slow, pytest.mark.coco]


def test_adding_a_voc_set_and_a_saliency_set_runs_only_their_jobs_and_opens_only_their_labels(
        finished_template, coco_mini, tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("discovery"), template=finished_template)
    results = ws.work / "results"
    before = openings_per_dataset(ws, budget_rows=True)
    features = stamps(results / "features")
    voc = ws.work / "VOC2007"
    write_voc(voc, coco_mini, ids=(139, 11813))
    config = yaml.safe_load((ws.work / "config.yaml").read_text())
    config["discovery"] = {"voc": {"kind": "voc", "root": str(voc), "benchmark": "voc07"}}
    salient = link_davis_frames(ws.work / "davis-saliency")
    config["saliency"] = {"sal": {"images": str(salient / "images"), "masks": str(salient / "masks"),
                                  "benchmark": "ecssd"}}
    ws.write_config(config)

    # before their manifests (Snakemake checkpoints) exist, the scoring jobs wait on them; the ledger's outputs follow
    planned = planned_jobs(ws.snakemake("--dry-run"))
    assert set(planned) == {"manifest", "score_discovery", "score_saliency", "scores", "tables", "figures",
                            "html_report", "all"}, planned
    assert planned["manifest"] == 2  # the one listing rule, once per new set, whatever its kind
    ran = ws.snakemake()
    counts = {rule: ran.count(f"rule {rule}:") for rule in ("extract_native", "discover_boxes", "score_discovery",
                                                            "read_saliency", "score_saliency", "extract",
                                                            "score_decoder", "score_probe")}
    n_checkpoints = len(config["checkpoints"])
    shards = -(-2 // int(config["features"]["shard_size"]))  # 2 images each: one job per checkpoint and shard
    assert len(FRAMES) == 2
    assert counts == {"extract_native": n_checkpoints * shards, "discover_boxes": n_checkpoints * shards,
                      "score_discovery": 2 * n_checkpoints, "read_saliency": n_checkpoints * shards,
                      "score_saliency": n_checkpoints, "extract": 0, "score_decoder": 0, "score_probe": 0}
    assert openings_per_dataset(ws, budget_rows=True) - before == Counter({"voc": 2 * n_checkpoints, "sal": n_checkpoints})
    assert untouched(features, results / "features")
    table = (results / "tables" / "checkpoints_voc.md").read_text()
    assert "tokencut CorLoc (box)" in table and "lost CorLoc (box)" in table
    assert "TokenCut (published)" in table and "68.8" in table and "61.9" in table
    assert "LOST's README" in table.splitlines()[0]
    table = (results / "tables" / "checkpoints_sal.md").read_text()
    header = table.splitlines()[2]
    assert all(f"| {name} |" in header for name in ("IoU", "maxF", "SOD MAE", "IoU + BS", "maxF + BS", "SOD E + BS"))
    published = next(line for line in table.splitlines() if "TokenCut (published)" in line)
    assert "| 71.2 | 91.8 | 80.3 |" in published and "| 77.2 | 93.4 | 87.4 |" in published
    assert (results / "figures" / "saliency_a_sal.png").stat().st_size > 1000
    assert set(planned_jobs(ws.snakemake("--dry-run"))) == set()
