"""The attention reading through the workflow (docs/design.md §13) on a tiny demo: a ViT and an XCiT checkpoint.

- the `attention` record of the ViT equals `spread_summary` of the reading taken here from the shard's decoded
  224-px inputs, and verify accepts the ledger with no openings row for it;
- the XCiT's record says the reading is absent, and its row of the checkpoint table shows a dash;
- the per-head table, the heatmap, the per-patch figure and report.html's links to them exist;
- turning the reading on in a run finished without it (`attention: false`) plans only the attention jobs and the
  scores, tables, figures and report after them, opens no labels and touches no feature.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from workspace import Workspace, checkpoint_entry, planned_jobs, tiny_config

pytestmark = pytest.mark.slow

XCIT = {"path": "results/demo/checkpoints/x.pth", "run": "x", "epoch": 100,
        "demo": {"architecture": "xcit-s12-16", "format": "dino-backbone", "seed": 30}}


@dataclass
class Grown:
    """A tiny run finished without the reading (`attention: false`), then with it: what the switch planned and ran."""

    ws: Workspace
    planned: dict
    ran: str
    openings_before: bytes | None
    features_before: dict


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> Grown:
    """The tiny experiment's sealed eval set alone (no select or probe-train set: the reading needs neither, and
    leaving out the decoder's and the probe's jobs halves the run), a ViT and an XCiT."""
    ws = Workspace(tmp_path_factory.mktemp("attention-workflow"))
    config = tiny_config({"a": checkpoint_entry("a", "dino-backbone", 0, 100), "x": XCIT})
    config["datasets"] = {"val": config["datasets"]["val"]}
    ws.write_config(config)  # the tiny experiment leaves the reading off
    ws.snakemake()
    results = ws.work / "results"
    openings_file = results / "ledger" / "openings.csv"
    openings = openings_file.read_bytes() if openings_file.exists() else None
    features = {p: p.stat().st_mtime_ns for p in (results / "features").rglob("*") if p.is_file()}
    del config["attention"]
    ws.write_config(config)  # the reading is on by default
    planned = planned_jobs(ws.snakemake("--dry-run"))
    return Grown(ws, planned, ws.snakemake(), openings, features)


@pytest.fixture(scope="module")
def finished(grown) -> Workspace:
    return grown.ws


def test_the_record_equals_spread_summary_of_the_shards_inputs(finished):
    from evaluate.readings.attention_spread import tokens_and_spread
    from evaluate.attention.summary import spread_summary
    from evaluate.networks.checkpoints import load_backbone
    from evaluate.pixels.images import normalise_pixels

    results = finished.work / "results"
    manifest = json.loads((results / "datasets" / "val" / "manifest.json").read_text())
    model = load_backbone(finished.work / "results/demo/checkpoints/a.pth", which="teacher", form="backbone").model.eval()
    pixels = np.concatenate([np.load(results / "inputs" / "val" / f"{k:03d}" / "images224.npy")
                             for k in range(len(manifest["shards"]))])
    with torch.inference_mode():
        _, reading = tokens_and_spread(model, normalise_pixels(pixels))
    measures, tables = spread_summary(manifest["image_ids"], reading.entropy.numpy(), reading.spread.numpy(),
                                      resamples=200, seed=0)
    record = json.loads((results / "ledger" / "records" / "attention" / "a" / "val.json").read_text())
    assert record["opening_row_sha256"] is None and record["role"] == "eval"
    assert [m["measure"] for m in record["measures"]] == ["attention_spread", "attention_entropy"]
    for got, want in zip(record["measures"], measures):
        assert got["image_ids"] == want["image_ids"] == manifest["image_ids"]
        np.testing.assert_allclose(got["per_image"], want["per_image"], rtol=1e-6)
        for key in ("value", "ci_low", "ci_high"):
            assert got[key] == pytest.approx(want[key], rel=1e-6)
    np.testing.assert_allclose(record["attention_tables"]["attention_spread"], tables["attention_spread"], rtol=1e-6)
    verify = subprocess.run([sys.executable, "-m", "evaluate.ledger", "verify", str(results / "ledger")],
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(finished.code)))
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_xcit_is_absent_and_shows_a_dash(finished):
    results = finished.work / "results"
    record = json.loads((results / "ledger" / "records" / "attention" / "x" / "val.json").read_text())
    assert record["measures"] == [] and record["attention_tables"] is None and record["absent"]["reason"]
    md = (results / "tables" / "checkpoints_val.md").read_text()
    lines = [line for line in md.splitlines() if line.startswith("|")]
    names = [c.strip() for c in lines[0].split("|")]
    row = next(line for line in lines if line.split("|")[names.index("checkpoint")].strip() == "x")
    cells = dict(zip(names, [c.strip() for c in row.split("|")]))
    assert cells["attention spread"] == "–" and cells["attention entropy"] == "–", row


def test_the_per_head_table_and_the_attention_figures_are_in_the_report(finished):
    results = finished.work / "results"
    assert (results / "tables" / "attention-heads_val.md").is_file()
    for figure in ("attention-heatmap_val_a.png", "attention-patch_val_a.png", "attention-heads_val_tiny.png"):
        assert (results / "figures" / figure).is_file(), figure
    assert not list((results / "figures").glob("attention-*_x.png"))  # no attention figure for XCiT
    report = (results / "report.html").read_text()
    for stem in ("tab-attention-heads_val", "fig-attention-heatmap_val_a", "fig-attention-patch_val_a"):
        assert f'id="{stem}"' in report, stem


def test_adding_the_reading_to_a_finished_run_runs_only_its_jobs_and_opens_nothing(grown):
    assert grown.planned == {"attention_shard": 4, "attention_record": 2, "attention_rows": 2, "scores": 1,
                             "tables": 1, "figures": 1, "html_report": 1, "all": 1}, grown.planned
    assert "rule extract:" not in grown.ran and "rule score_decoder:" not in grown.ran
    results = grown.ws.work / "results"
    openings_file = results / "ledger" / "openings.csv"
    assert (openings_file.read_bytes() if openings_file.exists() else None) == grown.openings_before
    assert {p: p.stat().st_mtime_ns for p in grown.features_before} == grown.features_before
    assert planned_jobs(grown.ws.snakemake("--dry-run")) == {}
