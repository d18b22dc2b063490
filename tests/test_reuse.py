"""A scoring job re-run on the same inputs, code and settings reuses its record and opens no labels.

Snakemake re-runs a scoring job whenever an input file is rewritten, even with the same bytes (with
`features.keep: false`, a re-decode re-extracts the shard the probe is scored on). `score_eval_set` keeps each eval
record under the sha256 of what decided it; these tests drive it on a real demo data set and ledger, as the jobs do.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from evaluate.datasets.coco import CocoDataset
from evaluate.demo.scenes import make_demo_dataset
from evaluate.ledger.scoring import reuse_key, score_eval_set
from evaluate.ledger import BudgetExceeded
from evaluate.ledger.records import read_record
from evaluate.scores.measures import make_measure
from evaluate.plumbing.paths import OPENINGS, SCORE_REUSE
from evaluate.plumbing.provenance import sha256_bytes, sha256_json

CHECKPOINT = {"name": "ck", "path": "ck.pth", "run": "r", "epoch": 3, "which": "teacher"}


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


def score(workspace: Path, config: dict, calls: list, *, settings: dict | None = None,
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
        return [make_measure("mask_ap", image_ids=[1, 2, 3], per_image=[], reducer=None, value=value)], {}

    return score_eval_set(
        config, open_dataset=open_dataset, dataset_name="val", checkpoint=CHECKPOINT, features_meta=workspace / "meta.json",
        kind="decoder", purpose="eval", setting="tau=0.2", n_images=3, out_record=workspace / "record.json",
        decided_by=[workspace / "masks.json", workspace / "val" / "annotations.json"],
        settings=settings or {"code": "c1", "resamples": 100, "seed": 0}, score=measures)


def openings() -> list[dict]:
    with open(OPENINGS, newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["purpose"] != "budget"]


def config(sealed: bool = False, budget: int | None = None) -> dict:
    return {"datasets": {"val": {"sealed": sealed, "budget": budget}}}


def test_the_same_inputs_reuse_the_record_byte_for_byte_and_open_no_labels(workspace):
    calls: list = []
    opened: list = []
    first = score(workspace, config(), calls, opened=opened)
    written = (workspace / "record.json").read_bytes()
    assert calls == [1] and len(openings()) == 1
    kept = list((workspace / "results" / "ledger" / "reuse").glob("*.json"))
    assert len(kept) == 1 and kept[0].read_bytes() == written
    (workspace / "record.json").unlink()  # as Snakemake does before it runs a job again
    again = score(workspace, config(), calls, opened=opened)
    assert calls == [1] and len(openings()) == 1  # not scored, not opened
    assert opened == ["val"]  # the annotations were not even read the second time
    assert (workspace / "record.json").read_bytes() == written and again == first
    assert read_record(workspace / "record.json")["opening_row_sha256"] == openings()[0]["row_sha256"]


def test_a_changed_input_code_or_setting_is_scored_and_opened_again(workspace):
    calls: list = []
    score(workspace, config(), calls)
    (workspace / "masks.json").write_text("[1, 2, 3, 4]")
    changed = score(workspace, config(), calls)
    assert calls == [1, 1] and len(openings()) == 2 and changed[0]["value"] == len("[1, 2, 3, 4]")
    score(workspace, config(), calls, settings={"code": "c2", "resamples": 100, "seed": 0})
    score(workspace, config(), calls, settings={"code": "c2", "resamples": 100, "seed": 1})
    assert calls == [1, 1, 1, 1] and len(openings()) == 4
    score(workspace, config(), calls, settings={"code": "c2", "resamples": 100, "seed": 1})
    assert calls == [1, 1, 1, 1] and len(openings()) == 4  # and that one, once more, is reused


def test_a_sealed_data_set_s_budget_is_not_spent_on_the_same_scoring(workspace):
    calls: list = []
    score(workspace, config(sealed=True, budget=1), calls)
    score(workspace, config(sealed=True, budget=1), calls)  # the same inputs: within the budget of one
    assert calls == [1] and len(openings()) == 1
    (workspace / "masks.json").write_text("[]")
    with pytest.raises(BudgetExceeded, match="budget 1"):
        score(workspace, config(sealed=True, budget=1), calls)


def test_a_kept_record_is_not_reused_when_edited_or_its_opening_is_not_in_the_ledger(workspace):
    calls: list = []
    score(workspace, config(), calls)
    (kept,) = (workspace / "results" / "ledger" / "reuse").glob("*.json")
    record = json.loads(kept.read_text())
    kept.write_text(json.dumps({**record, "setting": "edited"}))  # its record_sha256 no longer checks
    score(workspace, config(), calls)
    assert calls == [1, 1] and len(openings()) == 2  # scored and opened again, and kept anew
    assert read_record(kept)["opening_row_sha256"] == openings()[1]["row_sha256"]
    ledger = workspace / "results" / "ledger"
    for name in ("openings.csv", "openings.head.json"):
        (ledger / name).unlink()  # a new ledger beside the old kept records
    score(workspace, config(), calls)
    assert calls == [1, 1, 1] and len(openings()) == 1


def test_the_reuse_key_is_the_hash_of_the_files_bytes_and_the_values(workspace):
    a, b = workspace / "masks.json", workspace / "meta.json"
    expected = sha256_json({"files": [sha256_bytes(a.read_bytes()), sha256_bytes(b.read_bytes())],
                            "values": {"x": 1}})
    assert reuse_key([a, b], {"x": 1}) == expected
    assert reuse_key([b, a], {"x": 1}) != expected and reuse_key([a, b], {"x": 2}) != expected
    assert SCORE_REUSE.format(key=expected).endswith(f"reuse/{expected}.json")
