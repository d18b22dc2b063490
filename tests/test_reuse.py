"""A scoring re-run on the same inputs, code and settings reuses its record and opens no labels.

Snakemake re-runs a scoring job whenever an input file is rewritten, even with the same bytes (with
`features.keep: false`, a re-decode re-extracts the shard the probe is scored on; a forced re-selection rewrites
every input downstream of it). `score_on_record` keeps each record under the sha256 of what decided it; these tests
drive it, and the selection's entry `select_setting`, on real demo data sets and ledgers, as the jobs do.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from decoders import get_decoder, sweep_settings
from decoders.shards import sweep_keys, write_sweep
from evaluate.datasets.coco import CocoDataset
from evaluate.datasets.manifest import manifest_of
from evaluate.demo.scenes import make_demo_dataset
from evaluate.experiment import config_defaults
from evaluate.ledger import BudgetExceeded
from evaluate.ledger.records import read_record
from evaluate.ledger.reuse import reuse_key
from evaluate.ledger.scoring import Scored, Scoring, score_on_record
from evaluate.plumbing.paths import OPENINGS, SCORE_REUSE, SCORE_REUSE_RESULT
from evaluate.plumbing.provenance import sha256_bytes, sha256_json
from evaluate.scores.measures import make_measure
from evaluate.decoding.selection import select_setting


def scoring(workspace: Path, sealed: bool = False, budget: int | None = None, dataset: str = "val") -> Scoring:
    return Scoring(checkpoint="ck", run="r", epoch=3, features_meta=workspace / "meta.json", dataset=dataset,
                   sealed=sealed, budget=budget, config_hash="f" * 16)


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A working directory (the ledger's paths are relative to it) with a demo data set, a features meta.json and
    an input file standing for the masks a decoder record is scored from."""
    monkeypatch.chdir(tmp_path)
    make_demo_dataset(tmp_path / "val", 3, seed=5)
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"checkpoint_sha256": "ab" * 32, "architecture": "vit-s16"}))
    masks = tmp_path / "masks.json"
    masks.write_text("[1, 2, 3]")
    return tmp_path


def score(workspace: Path, on: Scoring, calls: list, *, settings: dict | None = None,
          opened: list | None = None) -> list[dict]:
    def open_dataset():
        if opened is not None:
            opened.append("val")
        return CocoDataset(workspace / "val" / "images", workspace / "val" / "annotations.json")

    def measures(dataset):
        assert dataset.annotations_path == workspace / "val" / "annotations.json"
        calls.append(1)
        # a number drawn from the input, so a changed input changes the record
        value = float(len((workspace / "masks.json").read_text()))
        return Scored([make_measure("ap", image_ids=[1, 2, 3], per_image=[], reducer=None, value=value)])

    record, result = score_on_record(
        on, kind="decoder", role="eval", purpose="eval", setting="tau=0.2", reading="keys480", decoder="ncut", n_images=3,
        out_record=workspace / "record.json",
        decided_by=[workspace / "masks.json", workspace / "val" / "annotations.json"],
        settings=settings or {"code": "c1", "resamples": 100, "seed": 0}, open_dataset=open_dataset, score=measures)
    assert sha256_json(result) == sha256_json(record["measures"])  # an eval scoring's result is its measures
    return record["measures"]


def openings() -> list[dict]:
    with open(OPENINGS, newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["purpose"] != "budget"]


def test_the_same_inputs_reuse_the_record_byte_for_byte_and_open_no_labels(workspace):
    calls: list = []
    opened: list = []
    first = score(workspace, scoring(workspace), calls, opened=opened)
    written = (workspace / "record.json").read_bytes()
    assert calls == [1] and len(openings()) == 1
    kept = list((workspace / "results" / "ledger" / "reuse").glob("*"))
    assert len(kept) == 1 and kept[0].read_bytes() == written  # no result beside it: the record holds its measures
    (workspace / "record.json").unlink()  # as Snakemake does before it runs a job again
    again = score(workspace, scoring(workspace), calls, opened=opened)
    assert calls == [1] and len(openings()) == 1  # not scored, not opened
    assert opened == ["val"]  # the annotations were not even read the second time
    assert (workspace / "record.json").read_bytes() == written and again == first
    assert read_record(workspace / "record.json")["opening_row_sha256"] == openings()[0]["row_sha256"]


def test_a_changed_config_elsewhere_reuses_the_record_with_its_own_config_hash(workspace):
    calls: list = []
    score(workspace, scoring(workspace), calls)
    written = (workspace / "record.json").read_bytes()
    other = Scoring(**{**scoring(workspace).__dict__, "config_hash": "0" * 16})
    score(workspace, other, calls)
    assert calls == [1] and len(openings()) == 1
    assert (workspace / "record.json").read_bytes() == written  # it says how the number was computed


def test_a_changed_input_code_or_setting_is_scored_and_opened_again(workspace):
    calls: list = []
    score(workspace, scoring(workspace), calls)
    (workspace / "masks.json").write_text("[1, 2, 3, 4]")
    changed = score(workspace, scoring(workspace), calls)
    assert calls == [1, 1] and len(openings()) == 2 and changed[0]["value"] == len("[1, 2, 3, 4]")
    score(workspace, scoring(workspace), calls, settings={"code": "c2", "resamples": 100, "seed": 0})
    score(workspace, scoring(workspace), calls, settings={"code": "c2", "resamples": 100, "seed": 1})
    assert calls == [1, 1, 1, 1] and len(openings()) == 4
    score(workspace, scoring(workspace), calls, settings={"code": "c2", "resamples": 100, "seed": 1})
    assert calls == [1, 1, 1, 1] and len(openings()) == 4  # and that one, once more, is reused


def test_a_sealed_data_set_s_budget_is_not_spent_on_the_same_scoring(workspace):
    calls: list = []
    score(workspace, scoring(workspace, sealed=True, budget=1), calls)
    score(workspace, scoring(workspace, sealed=True, budget=1), calls)  # the same inputs: within the budget of one
    assert calls == [1] and len(openings()) == 1
    (workspace / "masks.json").write_text("[]")
    with pytest.raises(BudgetExceeded, match="budget 1"):
        score(workspace, scoring(workspace, sealed=True, budget=1), calls)


def test_a_kept_record_is_not_reused_when_edited_or_its_opening_is_not_in_the_ledger(workspace):
    calls: list = []
    score(workspace, scoring(workspace), calls)
    (kept,) = (workspace / "results" / "ledger" / "reuse").glob("*.json")
    record = json.loads(kept.read_text())
    kept.write_text(json.dumps({**record, "setting": "edited"}))  # its record_sha256 no longer checks
    score(workspace, scoring(workspace), calls)
    assert calls == [1, 1] and len(openings()) == 2  # scored and opened again, and kept anew
    assert read_record(kept)["opening_row_sha256"] == openings()[1]["row_sha256"]
    ledger = workspace / "results" / "ledger"
    for name in ("openings.csv", "openings.head.json"):
        (ledger / name).unlink()  # a new ledger beside the old kept records
    score(workspace, scoring(workspace), calls)
    assert calls == [1, 1, 1] and len(openings()) == 1


def test_the_reuse_key_is_the_hash_of_the_files_bytes_and_the_values(workspace):
    a, b = workspace / "masks.json", workspace / "meta.json"
    expected = sha256_json({"files": [sha256_bytes(a.read_bytes()), sha256_bytes(b.read_bytes())],
                            "values": {"x": 1}})
    assert reuse_key([a, b], {"x": 1}) == expected
    assert reuse_key([b, a], {"x": 1}) != expected and reuse_key([a, b], {"x": 2}) != expected
    assert SCORE_REUSE.format(key=expected).endswith(f"reuse/{expected}.json")


# ---- the selection -----------------------------------------------------------------------------------------------

GRID = {"tau": [0.1, 0.3], "eps": [1e-5], "foreground": ["seed"], "split": ["mean"], "component": ["seed"]}


def decoder_config(grid: dict = GRID) -> dict:
    return {**config_defaults("decoder"), "sweep": grid}


def write_sweep_shard(workspace: Path, grid: dict = GRID, seed: int = 0) -> Path:
    """The select set's one sweep shard: seeded keys with a bright 10 x 10 block, decoded under every setting."""
    dataset = CocoDataset(workspace / "sel" / "images", workspace / "sel" / "annotations.json")
    ids = sorted(manifest_of(dataset, 8)["image_ids"])
    rng = np.random.default_rng(seed)
    keys = rng.normal(size=(len(ids), 30, 30, 384)).astype(np.float32)
    keys[:, 5:15, 8:18] += 3.0 * rng.normal(size=384).astype(np.float32)  # one object-like region
    config = decoder_config(grid)
    shard = sweep_keys(get_decoder(config["name"]), sweep_settings(config), ids, keys.reshape(len(ids), 900, 384))
    path = workspace / "sweep" / "000.npz"
    path.parent.mkdir(exist_ok=True)
    write_sweep(path, shard)
    return path


@pytest.fixture
def selection(workspace):
    """The workspace with a select data set `sel` (3 demo images), its manifest and one sweep shard."""
    make_demo_dataset(workspace / "sel", 3, seed=7)
    dataset = CocoDataset(workspace / "sel" / "images", workspace / "sel" / "annotations.json")
    (workspace / "manifest.json").write_text(json.dumps(manifest_of(dataset, 8, "sel")))
    write_sweep_shard(workspace)
    return workspace


def select(workspace: Path, *, grid: dict = GRID, resamples: int = 200) -> dict:
    out = {name: workspace / "out" / name for name in ("selected.yaml", "sweep.csv", "record.json")}
    for path in out.values():  # as Snakemake does before it runs a job again
        path.unlink(missing_ok=True)
    return select_setting(scoring(workspace, dataset="sel"), decoder=decoder_config(grid),
                          sweep_files=[workspace / "sweep" / "000.npz"], manifest_file=workspace / "manifest.json",
                          images=str(workspace / "sel" / "images"),
                          annotations=str(workspace / "sel" / "annotations.json"), resamples=resamples, seed=0,
                          code="c1", out_selected=out["selected.yaml"], out_table=out["sweep.csv"],
                          out_record=out["record.json"])


def outputs(workspace: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((workspace / "out").iterdir())}


def test_the_selection_chooses_the_best_mean_jaccard_and_writes_what_its_opening_recorded(selection):
    selected = select(selection)
    (row,) = openings()
    assert (row["dataset"], row["purpose"], row["setting"]) == ("sel", "select", "sweep of 2 settings")
    with open(selection / "out" / "sweep.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [r["setting"] for r in table] == [s.name for s in sweep_settings(decoder_config())]
    best = max(table, key=lambda r: float(r["value"]))  # the first of equal means, as max keeps the first
    assert selected["name"] == best["setting"] and selected["jaccard"] == float(best["value"])
    assert selected["n_settings"] == 2 and selected["opening_row_sha256"] == row["row_sha256"]
    assert yaml.safe_load((selection / "out" / "selected.yaml").read_text()) == selected
    record = read_record(selection / "out" / "record.json")
    assert (record["kind"], record["role"], record["setting"]) == ("sweep", "select", selected["name"])
    assert record["opening_row_sha256"] == row["row_sha256"]
    assert record["measures"][0]["value"] == pytest.approx(selected["jaccard"])


def test_a_re_selection_on_the_same_inputs_writes_its_earlier_outputs_and_opens_no_labels(selection, monkeypatch):
    select(selection)
    first = outputs(selection)
    rows = openings()

    def refuse(*args, **kwargs):
        raise AssertionError("the select set's annotations were read again")

    monkeypatch.setattr("evaluate.datasets.coco.CocoDataset", refuse)
    select(selection)
    assert outputs(selection) == first  # selected.yaml, sweep.csv and the record, byte for byte
    assert openings() == rows


def test_a_changed_sweep_or_bootstrap_selects_again(selection):
    select(selection)
    select(selection, resamples=300)
    assert len(openings()) == 2
    write_sweep_shard(selection, seed=1)  # other keys: other sweep masks
    select(selection)
    assert len(openings()) == 3
    grid = {**GRID, "tau": [0.1, 0.2, 0.3]}
    write_sweep_shard(selection, grid=grid)
    assert select(selection, grid=grid)["n_settings"] == 3 and openings()[-1]["setting"] == "sweep of 3 settings"


def test_a_kept_sweep_table_its_opening_row_does_not_hash_is_not_reused(selection):
    select(selection)
    (kept,) = (selection / "results" / "ledger" / "reuse").glob("*.result.json")
    assert str(kept).endswith(SCORE_REUSE_RESULT.format(key=kept.name.split(".")[0]))
    rows = json.loads(kept.read_text())
    rows[0]["value"] += 1.0  # a sweep table that was not the one scored
    kept.write_text(json.dumps(rows))
    select(selection)
    assert len(openings()) == 2  # selected again, on the record
    with open(selection / "out" / "sweep.csv", newline="") as handle:
        assert float(next(csv.DictReader(handle))["value"]) == pytest.approx(rows[0]["value"] - 1.0)
