"""The attention reading in the ledger and the outputs (docs/design.md §13): a label-free record that verify accepts
without an openings row, tables that print the entropy in nats (not x 100) and a dash for XCiT, the per-head table,
paired differences and rank agreement in the measures' own units, and the attention figures."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from evaluate.attention.shards import write_attention_record
from evaluate.attention.summary import spread_summary
from evaluate.ledger import LedgerError
from evaluate.ledger.records import read_records, record_path, write_record
from evaluate.ledger.verify import verify_ledger
from evaluate.outputs.attention_figures import attention_figures
from evaluate.outputs.tables import build_tables, paired_difference
from evaluate.scores.agreement import pair_agreement

IDS = [1, 2, 3, 4]
BLOCKS, HEADS = 12, 6


def reading(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(entropy, spread) (4, 12, 6) float32 consistent with rows of 196 patches."""
    rng = np.random.default_rng(seed)
    entropy = rng.uniform(1.0, math.log(196), size=(len(IDS), BLOCKS, HEADS)).astype(np.float32)
    return entropy, (np.exp(entropy) / 196).astype(np.float32)


def shard_file(path: Path, entropy: np.ndarray | None, spread: np.ndarray | None, ids=IDS) -> Path:
    """A shard as the attention_shard job writes it (its npz layout, and beside it the runner's meta.json with the
    fields the record reads, written here by hand)."""
    import json

    identity = {"checkpoint_sha256": "c" * 64, "architecture": "vit-s16" if entropy is not None else "xcit-s12-16",
                "architecture_variant": None, "head_layout": None, "patch_attention": entropy is not None}
    arrays = {"image_ids": np.asarray(ids, np.int64)}
    if entropy is not None:
        arrays.update(entropy=entropy, spread=spread)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    path.with_suffix(".json").write_text(json.dumps({**identity, "reading": "attention"}))
    return path


@pytest.fixture()
def ledger(tmp_path) -> Path:
    """Three attention records on `val`: run r at epochs 10 and 20, and an XCiT checkpoint; no openings at all."""
    ledger = tmp_path / "ledger"
    for name, run, epoch, seed in (("r-ep10", "r", 10, 1), ("r-ep20", "r", 20, 2), ("x", "x", 100, None)):
        entropy, spread = reading(seed) if seed is not None else (None, None)
        # the shards split the images in two, as the workflow's shards do
        shards = [shard_file(tmp_path / name / f"{k:03d}.npz", *(None if a is None else a[k * 2:k * 2 + 2]
                                                                  for a in (entropy, spread)), ids=IDS[k * 2:k * 2 + 2])
                  for k in range(2)]
        write_attention_record(checkpoint=name, run=run, epoch=epoch, dataset="val", shard_files=shards,
                               resamples=200, seed=0, config_hash="f" * 16,
                               out_record=record_path(ledger, "attention", name, "val"))
    return ledger


def test_the_record_holds_spread_summary_of_its_shards_and_opens_nothing(ledger):
    records = {r["checkpoint"]: r for r in read_records(ledger / "records")}
    entropy, spread = reading(1)
    measures, tables = spread_summary(IDS, entropy, spread, resamples=200, seed=0)
    rec = records["r-ep10"]
    assert rec["kind"] == "attention" and rec["role"] == "eval" and rec["opening_row_sha256"] is None
    assert rec["measures"] == measures and rec["attention_tables"] == tables
    spread_entry = next(m for m in rec["measures"] if m["measure"] == "attention_spread")
    assert spread_entry["value"] == pytest.approx(100 * spread[:, -1].astype(np.float64).mean(), rel=1e-12)
    assert records["x"]["measures"] == [] and records["x"]["attention_tables"] is None
    assert "across channels" in records["x"]["absent"]["reason"]
    assert records["x"]["absent"]["measures"] == ["attention_spread", "attention_entropy"]
    assert not (ledger / "openings.csv").exists()
    assert verify_ledger(ledger) == {"openings": 0, "records": 3, "measures": 4}


def test_verify_still_refuses_a_labelled_record_that_cites_no_opening(ledger):
    rec = read_records(ledger / "records")[0]
    forged = {k: v for k, v in rec.items() if k != "record_sha256"} | {"kind": "decoder"}
    write_record(record_path(ledger, "decoder", "r-ep10", "val"), forged)
    with pytest.raises(LedgerError, match="never recorded as opened"):
        verify_ledger(ledger)


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_tables_print_the_entropy_in_nats_and_a_dash_for_xcit(ledger, tmp_path):
    out = tmp_path / "tables"
    build_tables(ledger, out, "r-ep10", resamples=200, seed=0)
    records = {r["checkpoint"]: r for r in read_records(ledger / "records")}
    entropy_value = next(m["value"] for m in records["r-ep10"]["measures"] if m["measure"] == "attention_entropy")
    assert 1.0 < entropy_value < math.log(196)  # nats, not x 100
    rows = {r["checkpoint"]: r for r in read_csv(out / "checkpoints_val.csv")}
    assert float(rows["r-ep10"]["attention_entropy"]) == entropy_value
    assert rows["x"]["attention_entropy"] == "" and rows["x"]["attention_spread"] == ""
    md = (out / "checkpoints_val.md").read_text()
    assert f"| {entropy_value:.2f} [" in md  # two decimals of nats
    x_line = next(line for line in md.splitlines() if line.startswith("| x "))
    assert x_line.rstrip().endswith("| – | – |"), x_line
    assert "attention entropy in nats" in md and "**" not in md  # a descriptive measure has no bold best
    tex = (out / "checkpoints_val.tex").read_text()
    assert "& -- & --" in tex
    # the paired difference of the entropy is in nats: the difference of the per-image means, not 100 x it
    diff = {r["checkpoint"]: r for r in read_csv(out / "compare-r-ep10_val.csv")}
    e10, e20 = (reading(s)[0][:, -1].astype(np.float64).mean(-1) for s in (1, 2))
    assert float(diff["r-ep20"]["attention_entropy - r-ep10"]) == pytest.approx((e20 - e10).mean(), abs=1e-9)
    assert float(diff["r-ep20"]["attention_spread - r-ep10"]) == pytest.approx(
        100 * (np.exp(reading(2)[0][:, -1].astype(np.float64)) / 196 - np.exp(reading(1)[0][:, -1]) / 196)
        .mean(-1).mean(), abs=1e-4)
    assert diff["x"]["attention_entropy - r-ep10"] == ""


def test_per_head_table_is_the_last_block_of_the_records_tables(ledger, tmp_path):
    out = tmp_path / "tables"
    build_tables(ledger, out, None, resamples=200, seed=0)
    rows = {r["checkpoint"]: r for r in read_csv(out / "attention-heads_val.csv")}
    entropy, spread = reading(2)
    for h in range(HEADS):
        assert float(rows["r-ep20"][f"attention_entropy_h{h + 1}"]) == pytest.approx(
            entropy[:, -1, h].astype(np.float64).mean(), rel=1e-12)
        assert float(rows["r-ep20"][f"attention_spread_h{h + 1}"]) == pytest.approx(
            100 * spread[:, -1, h].astype(np.float64).mean(), rel=1e-12)
        assert rows["x"][f"attention_spread_h{h + 1}"] == ""
    md = (out / "attention-heads_val.md").read_text()
    assert "attention entropy head 6" in md and next(
        line for line in md.splitlines() if line.startswith("| x ")).count("| –") == 2 * HEADS


def test_agreement_values_are_in_each_measure_s_unit(ledger):
    records = read_records(ledger / "records")
    by = {m["measure"]: {} for r in records for m in r["measures"]}
    for r in records:
        for m in r["measures"]:
            by[m["measure"]][r["checkpoint"]] = m
    entry = pair_agreement(by["attention_spread"], by["attention_entropy"], resamples=200, seed=0)
    assert entry["checkpoints"] == ["r-ep10", "r-ep20"]
    assert entry["values_b"] == pytest.approx([by["attention_entropy"][c]["value"] for c in entry["checkpoints"]])
    assert entry["values_a"] == pytest.approx([by["attention_spread"][c]["value"] for c in entry["checkpoints"]])
    # e^H / N rises with H image by image: the two rankings agree
    assert entry["tau"] == 1.0


def test_paired_difference_refuses_measures_of_different_units(ledger):
    records = read_records(ledger / "records")
    spread, entropy = records[0]["measures"]
    with pytest.raises(LedgerError, match="scales"):
        paired_difference(spread, {**entropy, "measure": "attention_spread"}, resamples=10, seed=0)


def test_attention_figures_exist_for_every_vit_checkpoint_and_run(ledger, tmp_path):
    rows = tmp_path / "rows" / "val.npz"
    rows.parent.mkdir()
    weights = np.full((HEADS, 196), 1 / 196, np.float32)
    np.savez(rows, image_id=np.int64(1), patch=np.int64(105), rows=weights, pixels224=np.zeros((224, 224, 3), np.uint8))
    xcit_rows = tmp_path / "xrows" / "val.npz"
    xcit_rows.parent.mkdir()
    np.savez(xcit_rows, image_id=np.int64(1), patch=np.int64(105), pixels224=np.zeros((224, 224, 3), np.uint8))
    files = attention_figures(read_records(ledger / "records"), tmp_path / "figures",
                              {"r-ep10": rows, "x": xcit_rows})
    assert sorted(p.name for p in files) == [
        "attention-heads_val_r.png", "attention-heatmap_val_r-ep10.png", "attention-heatmap_val_r-ep20.png",
        "attention-patch_val_r-ep10.png"]
    assert all(p.is_file() and p.with_suffix(".pdf").is_file() for p in files)
    again = attention_figures(read_records(ledger / "records"), tmp_path / "again", {"r-ep10": rows})
    assert [p.name for p in sorted(again)] == [p.name for p in sorted(files)]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(sorted(files), sorted(again)))
