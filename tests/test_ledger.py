"""The ledger: immutable records, the openings hash chain under concurrency, budgets, verify, scores.csv."""

from __future__ import annotations

import csv
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from evaluate import EvaluationError
from evaluate.ledger import BudgetExceeded, LedgerError
from evaluate.ledger.openings import opening, verify_openings
from evaluate.ledger.records import make_record, read_records, record_path, write_record
from evaluate.ledger.scores_table import rebuild_scores
from evaluate.ledger.verify import verify_ledger
from evaluate.scores.measures import MeasureError, make_measure, stats_array

from sources import REPO
DESIGN_COLUMNS = [  # docs/design.md §7, with the architecture (§9), form and geometry (§11), precision (§3), and
    # the reading and the decoder that made the row
    "checkpoint", "run", "epoch", "checkpoint_sha256", "architecture", "architecture_variant", "head_layout",
    "form", "patch", "width", "registers", "precision", "dataset", "role", "measure", "setting", "reading", "decoder",
    "value", "ci_low", "ci_high", "n_images", "n_left_out", "code_version", "config_hash", "torch_version", "started",
    "finished", "wall_s", "max_rss_mb",
]
ANN = "a" * 64


def independent_hash(obj) -> str:
    """sha256 of sorted-key JSON, indent 1, written here without the package's helpers."""
    text = json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hand_record(checkpoint="ck-ep0010", dataset="val", kind="decoder", epoch=10, value=40.0, opening_row="0" * 64):
    return {
        "kind": kind, "checkpoint": checkpoint, "run": "ck", "epoch": epoch, "checkpoint_sha256": "c" * 64,
        "dataset": dataset, "role": "eval", "setting": "c1-t0.2", "reading": "keys480", "decoder": "ncut",
        "code_version": "abc+dirty:0123",
        "config_hash": "f" * 16, "torch_version": "2.13.0", "started": "2026-01-01T00:00:00.000000Z",
        "finished": "2026-01-01T00:00:02.500000Z", "wall_s": 2.5, "max_rss_mb": 100.0,
        "opening_row_sha256": opening_row,
        "measures": [
            {"measure": "jaccard", "value": value, "ci_low": value - 2.0, "ci_high": value + 2.0, "n_images": 3,
             "n_left_out": 1, "reducer": "mean", "image_ids": [1, 2, 3], "per_image": [30.0, 40.0, 50.0]},
            {"measure": "ap", "value": 12.5, "ci_low": None, "ci_high": None, "n_images": 3, "n_left_out": 0,
             "reducer": None, "image_ids": [1, 2, 3], "per_image": []},
        ],
    }


def open_once(ledger, *, checkpoint="ck", setting="s", dataset="val", sealed=False, budget=None, result="r" * 64):
    with opening(ledger, dataset=dataset, role="eval", purpose="eval", checkpoint=checkpoint, setting=setting,
                 n_images=3, annotations_sha256=ANN, sealed=sealed, budget=budget) as handle:
        handle.result_sha256 = result
    return handle.row


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


# ------------------------------------------------------------------------------------------------- records


def test_record_hash_is_sha256_of_canonical_json_without_it(tmp_path):
    rec = hand_record()
    digest = write_record(tmp_path / "r.json", rec)
    assert digest == independent_hash(rec)
    stored = json.loads((tmp_path / "r.json").read_text())
    assert stored["record_sha256"] == digest
    assert {k: v for k, v in stored.items() if k != "record_sha256"} == rec
    assert read_records(tmp_path) == [stored]


def test_record_overwrite_policy(tmp_path):
    path = tmp_path / "r.json"
    first = write_record(path, hand_record())
    assert write_record(path, hand_record()) == first  # identical content: a no-op
    with pytest.raises(LedgerError, match="immutable"):
        write_record(path, hand_record(value=41.0))
    assert read_records(tmp_path)[0]["record_sha256"] == first
    # a re-run of the same job may replace its record
    second = write_record(path, hand_record(value=41.0), replace=True)
    assert second != first and read_records(tmp_path)[0]["measures"][0]["value"] == 41.0
    # another job's record never
    with pytest.raises(LedgerError, match="another job"):
        write_record(path, hand_record(dataset="other"), replace=True)


def test_edited_record_is_detected_naming_the_file(tmp_path):
    path = record_path(tmp_path, "decoder", "ck-ep0010", "val")
    write_record(path, hand_record())
    text = path.read_text().replace('"value": 40.0', '"value": 45.0')
    path.write_text(text)
    with pytest.raises(LedgerError, match="ck-ep0010/val.json.*edited"):
        read_records(tmp_path / "records")


def test_record_with_bad_measure_is_refused(tmp_path):
    rec = hand_record()
    rec["measures"][0]["image_ids"] = [1, 2]
    with pytest.raises(LedgerError, match="n_images 3 but 2 image_ids"):
        write_record(tmp_path / "r.json", rec)
    rec = hand_record()
    rec["measures"][0]["value"] = float("nan")
    with pytest.raises(LedgerError, match="not finite"):
        write_record(tmp_path / "r.json", rec)
    assert not (tmp_path / "r.json").exists()


def test_make_record_fills_provenance():
    started = time.time() - 3.0
    rec = make_record(kind="probe", checkpoint="ck", run="ck", epoch=None, checkpoint_sha256="c" * 64,
                      dataset="val", role="eval", setting="linear", reading="tokens224", decoder="linear-probe",
                      config_hash="f" * 16,
                      opening_row_sha256="0" * 64, measures=[], started=started, finished=started + 3.25)
    assert rec["wall_s"] == 3.25
    assert rec["started"].endswith("Z") and rec["started"] < rec["finished"]
    import torch

    assert rec["torch_version"] == torch.__version__
    assert ":" in rec["code_version"]
    assert rec["max_rss_mb"] > 10  # this interpreter holds numpy and torch: tens of MiB at least
    assert set(rec) == {
        "kind", "checkpoint", "run", "epoch", "checkpoint_sha256", "dataset", "role", "setting", "reading", "decoder",
        "code_version", "config_hash", "torch_version", "started", "finished", "wall_s", "max_rss_mb", "opening_row_sha256",
        "measures",
    }


def test_stats_array_turns_sparse_confusions_into_miou_counts():
    counts, name = stats_array([[[0, 0, 5], [1, 2, 3]], [[2, 2, 4]]], "miou")
    assert name == "miou-counts" and counts.shape == (2, 3, 3)
    # image 0: intersection (5, 0, 0), true (5, 3, 0), predicted (5, 0, 3); image 1: class 2 only, 4 of 4
    assert counts[0].tolist() == [[5, 0, 0], [5, 3, 0], [5, 0, 3]]
    assert counts[1].tolist() == [[0, 0, 4], [0, 0, 4], [0, 0, 4]]
    assert stats_array([[1, 2], [0, 1]], "ratio")[0].shape == (2, 2)
    assert stats_array([[[0, 0, 1]]], "miou", n_classes=5)[0].shape == (1, 3, 5)


def test_make_measure_reports_percent_with_a_bootstrap_interval():
    values = np.array([0.3, 0.4, 0.5, 0.125, 0.9725, 0.0])
    m = make_measure("jaccard", image_ids=[1, 2, 3, 4, 5, 6], per_image=values, reducer="mean", n_left_out=2,
                     resamples=400, seed=7)
    # an independent percentile bootstrap, written here
    rng = np.random.default_rng(7)
    boot = [values[rng.integers(0, 6, size=6)].mean() for _ in range(400)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    assert m["value"] == pytest.approx(100 * values.mean(), abs=1e-9)
    assert (m["ci_low"], m["ci_high"]) == (pytest.approx(100 * lo, abs=1e-9), pytest.approx(100 * hi, abs=1e-9))
    assert (m["n_images"], m["n_left_out"], m["reducer"], m["image_ids"]) == (6, 2, "mean", [1, 2, 3, 4, 5, 6])
    # pooled confusions: class 0 I 17 / (T 17 + P 19 - 17), class 1 4 / 6, class 2 3 / 3
    conf = [[[0, 0, 10], [1, 1, 4], [1, 0, 2]], [[0, 0, 7], [2, 2, 3]]]
    m = make_measure("probe_miou", image_ids=[1, 2], per_image=conf, reducer="miou", resamples=50, seed=0)
    assert m["value"] == pytest.approx(100 * (17 / 19 + 4 / 6 + 1) / 3)
    m = make_measure("corloc", image_ids=[1, 2, 3], per_image=[[1, 1], [0, 1], [1, 1]], reducer="ratio",
                     resamples=50, seed=0)
    assert m["value"] == pytest.approx(200 / 3)
    ap = make_measure("ap", image_ids=[1, 2], per_image=[], reducer=None, value=12.5)
    assert (ap["value"], ap["ci_low"], ap["ci_high"]) == (12.5, None, None)
    with pytest.raises(MeasureError, match="needs its value"):
        make_measure("ap", image_ids=[1], per_image=[], reducer=None)
    with pytest.raises(MeasureError, match="2 per_image entries for 3 images"):
        make_measure("jaccard", image_ids=[1, 2, 3], per_image=[0.1, 0.2], reducer="mean", resamples=50, seed=0)
    with pytest.raises(MeasureError, match="bootstrap resamples and seed"):
        make_measure("jaccard", image_ids=[1, 2], per_image=[0.1, 0.2], reducer="mean")


# ---------------------------------------------------------------------------------------------- scores.csv


def test_scores_csv_has_exactly_the_design_columns_and_sorted_rows(tmp_path):
    records = tmp_path / "records"
    write_record(record_path(tmp_path, "decoder", "ck-ep0020", "val"), hand_record("ck-ep0020", epoch=20, value=50.0))
    write_record(record_path(tmp_path, "decoder", "ck-ep0010", "val"), hand_record("ck-ep0010", epoch=10))
    n = rebuild_scores(records, tmp_path / "scores.csv", tmp_path / "scores.parquet")
    assert n == 4
    lines = (tmp_path / "scores.csv").read_text().splitlines()
    assert lines[0].split(",") == DESIGN_COLUMNS
    rows = read_rows(tmp_path / "scores.csv")
    assert [(r["checkpoint"], r["measure"]) for r in rows] == [
        ("ck-ep0010", "ap"), ("ck-ep0010", "jaccard"), ("ck-ep0020", "ap"), ("ck-ep0020", "jaccard")]
    assert rows[1]["value"] == "40.0" and rows[1]["ci_low"] == "38.0" and rows[1]["n_left_out"] == "1"
    assert rows[0]["ci_low"] == "" and rows[0]["wall_s"] == "2.5"
    assert {(r["reading"], r["decoder"]) for r in rows} == {("keys480", "ncut")}
    import pandas as pd

    frame = pd.read_parquet(tmp_path / "scores.parquet")
    assert list(frame.columns) == DESIGN_COLUMNS
    assert frame["value"].tolist() == [12.5, 40.0, 12.5, 50.0]
    # the rebuild is a pure function of the records
    before = (tmp_path / "scores.csv").read_bytes()
    rebuild_scores(records, tmp_path / "scores.csv")
    assert (tmp_path / "scores.csv").read_bytes() == before


# ------------------------------------------------------------------------------------------------ openings


def test_openings_rows_form_a_hash_chain(tmp_path):
    open_once(tmp_path, checkpoint="a")
    open_once(tmp_path, checkpoint="b")
    rows = read_rows(tmp_path / "openings.csv")
    assert list(rows[0]) == ["seq", "time", "dataset", "role", "purpose", "checkpoint", "setting", "n_images",
                             "annotations_sha256", "result_sha256", "prev_row_sha256", "row_sha256"]
    assert [r["seq"] for r in rows] == ["1", "2"]
    assert rows[0]["prev_row_sha256"] == "0" * 64
    assert rows[1]["prev_row_sha256"] == rows[0]["row_sha256"]
    for r in rows:
        assert r["row_sha256"] == independent_hash({k: v for k, v in r.items() if k != "row_sha256"})
    assert verify_openings(tmp_path / "openings.csv") == 2


def _write_rows(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.parametrize("tamper, message", [
    ("edit", "row seq 2 .*edited"),
    ("delete", "row seq 3 .*deleted"),
    ("reorder", "row seq 3 .*reordered"),
    ("delete-last", "row seq 4 .*deleted"),
])
def test_tampered_openings_are_detected(tmp_path, tamper, message):
    for name in "abcd":
        open_once(tmp_path, checkpoint=name)
    path = tmp_path / "openings.csv"
    rows = read_rows(path)
    if tamper == "edit":
        rows[1]["n_images"] = "2"
    elif tamper == "delete":
        del rows[1]
    elif tamper == "reorder":
        rows[1], rows[2] = rows[2], rows[1]
    else:
        rows.pop()
    _write_rows(path, rows)
    with pytest.raises(LedgerError, match=message):
        verify_openings(path)
    # and a tampered chain blocks every further opening
    with pytest.raises(LedgerError):
        open_once(tmp_path, checkpoint="e")


def test_failed_job_still_records_its_opening(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with opening(tmp_path, dataset="val", role="eval", purpose="eval", checkpoint="ck", setting="s",
                     n_images=3, annotations_sha256=ANN) as handle:
            handle.result_sha256 = "r" * 64
            raise RuntimeError("boom")
    with pytest.raises(LedgerError, match="without setting result_sha256"):
        with opening(tmp_path, dataset="val", role="eval", purpose="eval", checkpoint="ck", setting="s",
                     n_images=3, annotations_sha256=ANN):
            pass
    rows = read_rows(tmp_path / "openings.csv")
    assert [(r["setting"], r["result_sha256"]) for r in rows] == [("s!failed", ""), ("s!failed", "")]
    assert verify_openings(tmp_path / "openings.csv") == 2


# ------------------------------------------------------------------------------------------------- budgets


def test_opening_beyond_budget_is_refused_and_nothing_is_scored(tmp_path):
    open_once(tmp_path, dataset="test", sealed=True, budget=2, checkpoint="a")
    open_once(tmp_path, dataset="val", checkpoint="other-dataset-does-not-count")
    open_once(tmp_path, dataset="test", sealed=True, budget=2, checkpoint="b")
    before = (tmp_path / "openings.csv").read_bytes()
    body_ran = []
    with pytest.raises(BudgetExceeded, match=r"raise datasets\.test\.budget in config\.yaml"):
        with opening(tmp_path, dataset="test", role="eval", purpose="eval", checkpoint="c", setting="s",
                     n_images=3, annotations_sha256=ANN, sealed=True, budget=2):
            body_ran.append(True)
    assert body_ran == []
    assert (tmp_path / "openings.csv").read_bytes() == before
    assert isinstance(BudgetExceeded("x"), EvaluationError)


def test_raising_the_budget_is_recorded(tmp_path):
    open_once(tmp_path, dataset="test", sealed=True, budget=1, checkpoint="a")
    with pytest.raises(BudgetExceeded):
        open_once(tmp_path, dataset="test", sealed=True, budget=1, checkpoint="b")
    open_once(tmp_path, dataset="test", sealed=True, budget=2, checkpoint="b")
    rows = read_rows(tmp_path / "openings.csv")
    assert [(r["purpose"], r["setting"], r["checkpoint"]) for r in rows] == [
        ("budget", "budget=1", "a"), ("eval", "s", "a"), ("budget", "budget=2", "b"), ("eval", "s", "b")]
    assert verify_openings(tmp_path / "openings.csv") == 4
    # unsealing is a budget change too
    open_once(tmp_path, dataset="test", checkpoint="c")
    assert read_rows(tmp_path / "openings.csv")[-2]["setting"] == "budget=unlimited"


def test_in_flight_openings_count_against_the_budget(tmp_path):
    with opening(tmp_path, dataset="test", role="eval", purpose="eval", checkpoint="a", setting="s", n_images=3,
                 annotations_sha256=ANN, sealed=True, budget=1) as handle:
        with pytest.raises(BudgetExceeded, match=r"\+1 in flight"):
            open_once(tmp_path, dataset="test", sealed=True, budget=1, checkpoint="b")
        handle.result_sha256 = "r" * 64
    assert [r["checkpoint"] for r in read_rows(tmp_path / "openings.csv")] == ["a", "a"]
    assert not any((tmp_path / "inflight").iterdir())


def test_a_killed_job_is_recorded_as_interrupted(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    import socket

    (tmp_path / "inflight").mkdir()
    (tmp_path / "inflight" / "x.json").write_text(json.dumps({
        "host": socket.gethostname(), "pid": pid,
        "row": {"dataset": "test", "role": "eval", "purpose": "eval", "checkpoint": "killed", "setting": "s",
                "n_images": 3, "annotations_sha256": ANN}}))
    with pytest.raises(BudgetExceeded):
        open_once(tmp_path, dataset="test", sealed=True, budget=1, checkpoint="next")
    rows = read_rows(tmp_path / "openings.csv")
    assert [(r["checkpoint"], r["setting"]) for r in rows] == [("killed", "s!interrupted"), ("next", "budget=1")]


def _opener(ledger: str, worker: int, barrier, n: int) -> None:
    barrier.wait()
    for k in range(n):
        open_once(ledger, checkpoint=f"w{worker}", setting=f"k{k}")


def test_eight_processes_never_lose_or_duplicate_a_row(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    n = 6
    procs = [ctx.Process(target=_opener, args=(str(tmp_path), w, barrier, n)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0] * 8
    assert verify_openings(tmp_path / "openings.csv") == 8 * n
    rows = read_rows(tmp_path / "openings.csv")
    assert sorted((r["checkpoint"], r["setting"]) for r in rows) == sorted(
        (f"w{w}", f"k{k}") for w in range(8) for k in range(n))
    assert [r["seq"] for r in rows] == [str(i) for i in range(1, 8 * n + 1)]


# --------------------------------------------------------------------------------------------- verify + CLI


def _ledger_with_one_record(tmp_path: Path) -> Path:
    row = open_once(tmp_path, checkpoint="ck-ep0010")
    write_record(record_path(tmp_path, "decoder", "ck-ep0010", "val"), hand_record(opening_row=row["row_sha256"]))
    return tmp_path


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluate.ledger", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True)


def test_verify_ledger_and_cli_accept_a_sound_ledger(tmp_path):
    ledger = _ledger_with_one_record(tmp_path)
    assert verify_ledger(ledger) == {"openings": 1, "records": 1, "measures": 2}
    done = _cli("verify", ledger)
    assert done.returncode == 0, done.stderr
    assert "1 openings rows" in done.stdout and "1 records" in done.stdout
    done = _cli("rebuild", ledger)
    assert done.returncode == 0, done.stderr
    assert (ledger / "scores.csv").read_text().splitlines()[0].split(",") == DESIGN_COLUMNS


def test_verify_catches_an_edited_record_and_cli_exits_1(tmp_path):
    ledger = _ledger_with_one_record(tmp_path)
    path = record_path(ledger, "decoder", "ck-ep0010", "val")
    path.write_text(path.read_text().replace('"n_left_out": 1', '"n_left_out": 0'))
    with pytest.raises(LedgerError, match="val.json"):
        verify_ledger(ledger)
    done = _cli("verify", ledger)
    assert done.returncode == 1
    assert "ledger verify failed" in done.stderr and "val.json" in done.stderr and "Traceback" not in done.stderr


def test_verify_catches_an_edited_openings_row_and_cli_exits_1(tmp_path):
    ledger = _ledger_with_one_record(tmp_path)
    open_once(ledger, checkpoint="second")
    rows = read_rows(ledger / "openings.csv")
    rows[1]["dataset"] = "val2"
    _write_rows(ledger / "openings.csv", rows)
    done = _cli("verify", ledger)
    assert done.returncode == 1 and "row seq 2" in done.stderr


def test_verify_catches_a_deleted_openings_row_a_record_needs(tmp_path):
    ledger = _ledger_with_one_record(tmp_path)
    (ledger / "openings.csv").write_text((ledger / "openings.csv").read_text().splitlines()[0] + "\n")
    os.remove(ledger / "openings.head.json")  # even with the head removed too, the record's opening is missing
    with pytest.raises(LedgerError, match="not in .*openings.csv"):
        verify_ledger(ledger)
    assert _cli("verify", ledger).returncode == 1


def test_record_pointing_at_another_datasets_opening_is_refused(tmp_path):
    row = open_once(tmp_path, dataset="train", checkpoint="ck-ep0010")
    write_record(record_path(tmp_path, "decoder", "ck-ep0010", "val"), hand_record(opening_row=row["row_sha256"]))
    with pytest.raises(LedgerError, match="'train', not 'val'"):
        verify_ledger(tmp_path)


def _budget_opener(ledger: str, worker: int, barrier) -> None:
    barrier.wait()
    try:
        open_once(ledger, dataset="test", sealed=True, budget=5, checkpoint=f"w{worker}")
    except BudgetExceeded:
        sys.exit(3)


def test_concurrent_openings_of_a_sealed_set_stop_exactly_at_the_budget(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    procs = [ctx.Process(target=_budget_opener, args=(str(tmp_path), w, barrier)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert sorted(p.exitcode for p in procs) == [0] * 5 + [3] * 3
    rows = read_rows(tmp_path / "openings.csv")
    assert [r["purpose"] for r in rows].count("budget") == 1
    assert len([r for r in rows if r["purpose"] == "eval"]) == 5
    assert verify_openings(tmp_path / "openings.csv") == 6


def test_scores_csv_carries_each_record_s_architecture_and_leaves_it_empty_for_older_records(tmp_path):
    xcit = {**hand_record("xcit-ep0010"), "architecture": "xcit-s12-16", "architecture_variant": "dino",
            "head_layout": "8x48"}
    write_record(record_path(tmp_path, "decoder", "xcit-ep0010", "val"), xcit)
    write_record(record_path(tmp_path, "decoder", "ck-ep0010", "val"), hand_record("ck-ep0010"))
    rebuild_scores(tmp_path / "records", tmp_path / "scores.csv")
    rows = {(r["checkpoint"], r["measure"]): r for r in read_rows(tmp_path / "scores.csv")}
    assert [rows[("xcit-ep0010", "jaccard")][k] for k in ("architecture", "architecture_variant", "head_layout")] \
        == ["xcit-s12-16", "dino", "8x48"]
    assert [rows[("ck-ep0010", "ap")][k] for k in ("architecture", "architecture_variant", "head_layout")] == ["", "", ""]


def test_records_and_scores_csv_carry_the_precision_the_features_meta_json_records(tmp_path):
    from evaluate.ledger.scoring import Scoring, record_identity

    meta = tmp_path / "meta.json"
    identity = {}
    for precision in ("bfloat16", None):  # None: features written before the field existed
        meta.write_text(json.dumps({"checkpoint_sha256": "ab" * 32, "architecture": "vit-s16",
                                    **({"precision": precision} if precision else {})}))
        on = Scoring(checkpoint="ck", run="r", epoch=3, features_meta=meta, dataset="val", sealed=False, budget=None,
                     config_hash="f" * 16)
        identity[precision] = record_identity(on, "eval")
    assert identity["bfloat16"]["precision"] == "bfloat16"
    assert identity[None]["precision"] is None
    write_record(record_path(tmp_path, "decoder", "bf-ep0010", "val"),
                 {**hand_record("bf-ep0010"), "precision": "bfloat16"})
    write_record(record_path(tmp_path, "decoder", "ck-ep0010", "val"), hand_record("ck-ep0010"))
    rebuild_scores(tmp_path / "records", tmp_path / "scores.csv")
    rows = read_rows(tmp_path / "scores.csv")
    assert {r["checkpoint"]: r["precision"] for r in rows} == {"bf-ep0010": "bfloat16", "ck-ep0010": ""}
