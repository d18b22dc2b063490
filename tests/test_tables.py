"""Tables rebuilt from hand-made ledger records equal tables worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluate.ledger import LedgerError
from evaluate.ledger.records import read_records, record_path, write_record
from evaluate.tables import (
    build_tables,
    compare_tables,
    fmt_interval,
    latex_escape,
    paired_difference,
    run_tables,
    sweep_table,
    to_latex,
    to_markdown,
)


def measure(name, value, lo, hi, reducer, image_ids, per_image, n_left_out=0):
    return {"measure": name, "value": value, "ci_low": lo, "ci_high": hi, "n_images": len(image_ids),
            "n_left_out": n_left_out, "reducer": reducer, "image_ids": image_ids, "per_image": per_image}


def record(kind, checkpoint, run, epoch, dataset, role, measures):
    return {
        "kind": kind, "checkpoint": checkpoint, "run": run, "epoch": epoch, "checkpoint_sha256": "c" * 64,
        "dataset": dataset, "role": role, "setting": "c1-t0.2", "code_version": "x", "config_hash": "f" * 16,
        "torch_version": "2.13.0", "started": "2026-01-01T00:00:00.000000Z",
        "finished": "2026-01-01T00:00:01.000000Z", "wall_s": 1.0, "max_rss_mb": 1.0,
        "opening_row_sha256": "0" * 64, "measures": measures,
    }


BASE_J = [0.3, 0.4, 0.5]  # images 1, 2, 3


def write_ledger(ledger: Path) -> None:
    """Two epochs of run dino, one reference checkpoint, a probe record and a select record (not in tables)."""
    recs = [
        record("decoder", "dino-ep0010", "dino", 10, "val", "eval", [
            measure("jaccard", 40.0, 38.0, 42.0, "mean", [1, 2, 3], BASE_J),
            measure("ap", 12.5, None, None, None, [1, 2, 3], []),
        ]),
        # the same images in another order, every image 10 points better
        record("decoder", "dino-ep0020", "dino", 20, "val", "eval", [
            measure("jaccard", 50.0, 48.0, 52.0, "mean", [3, 1, 2], [0.6, 0.4, 0.5]),
            measure("ap", 12.5, None, None, None, [1, 2, 3], []),
        ]),
        # image 3 left out, image 4 extra: paired over images 1 and 2 only, each 10 points worse
        record("decoder", "ref", None, None, "val", "eval", [
            measure("jaccard", 30.0, 28.0, 32.0, "mean", [1, 2, 4], [0.2, 0.3, 0.99]),
            measure("ap", 12.5, None, None, None, [1, 2, 4], []),
        ]),
        record("probe", "dino-ep0010", "dino", 10, "val", "eval", [
            measure("patch_accuracy", 71.25, 70.0, 72.5, "ratio", [1, 2], [[50, 70], [64, 90]]),
        ]),
        record("decoder", "dino-ep0010", "dino", 10, "sel", "select", [
            measure("jaccard", 1.0, 0.0, 2.0, "mean", [7], [0.01]),
        ]),
    ]
    for rec in recs:
        write_record(record_path(ledger, f"{rec['kind']}-{rec['role']}", rec["checkpoint"], rec["dataset"]), rec)


RUN_DINO_CSV = (
    "epoch,checkpoint,jaccard,ap,patch_accuracy\n"
    '10,dino-ep0010,"40.00 [38.00, 42.00]",12.50,"71.25 [70.00, 72.50]"\n'
    '20,dino-ep0020,"50.00 [48.00, 52.00]",12.50,\n'
)
RUN_REF_CSV = (
    "epoch,checkpoint,jaccard,ap\n"
    ',ref,"30.00 [28.00, 32.00]",12.50\n'
)
RUN_DINO_MD = (
    "| epoch | checkpoint | jaccard | ap | patch_accuracy |\n"
    "|---|---|---|---|---|\n"
    "| 10 | dino-ep0010 | 40.00 [38.00, 42.00] | 12.50 | 71.25 [70.00, 72.50] |\n"
    "| 20 | dino-ep0020 | 50.00 [48.00, 52.00] | 12.50 |  |\n"
)
RUN_DINO_TEX = (
    "\\begin{tabular}{lrrrr}\n"
    "\\hline\n"
    "epoch & checkpoint & jaccard & ap & patch\\_accuracy \\\\\n"
    "\\hline\n"
    "10 & dino-ep0010 & 40.00 [38.00, 42.00] & 12.50 & 71.25 [70.00, 72.50] \\\\\n"
    "20 & dino-ep0020 & 50.00 [48.00, 52.00] & 12.50 &  \\\\\n"
    "\\hline\n"
    "\\end{tabular}\n"
)
COMPARE_CSV = (
    "run,epoch,checkpoint,jaccard - dino-ep0010,patch_accuracy - dino-ep0010\n"
    'dino,10,dino-ep0010,"0.00 [0.00, 0.00]","0.00 [0.00, 0.00]"\n'
    'dino,20,dino-ep0020,"10.00 [10.00, 10.00]",\n'
    'ref,,ref,"-10.00 [-10.00, -10.00]",\n'
)
SWEEP_IN = (
    "setting,value,ci_low,ci_high,n_images\n"
    "c0-t0.2,30.5,28.25,32.75,79\n"
    "c1-t0.2,33.04,31.0,35.1,79\n"
    "c1-t0.3,33.04,30.0,36.0,79\n"
)
SWEEP_CSV = (
    "setting,jaccard,n_images\n"
    'c1-t0.2,"33.04 [31.00, 35.10]",79\n'
    'c1-t0.3,"33.04 [30.00, 36.00]",79\n'
    'c0-t0.2,"30.50 [28.25, 32.75]",79\n'
)


def test_formatting_rules():
    assert fmt_interval(33.044, 31.0, 35.096) == "33.04 [31.00, 35.10]"
    assert fmt_interval(-0.001, -0.004, 0.0) == "0.00 [0.00, 0.00]"
    assert fmt_interval(12.5, None, None) == "12.50"
    assert fmt_interval(None, None, None) == ""
    assert latex_escape("a_b & 5% #1") == "a\\_b \\& 5\\% \\#1"
    assert to_markdown(["a|b"], [["1"]]) == "| a\\|b |\n|---|\n| 1 |\n"
    assert to_latex(["x_1", "y"], [["50%", "a&b"]]).splitlines()[4] == "50\\% & a\\&b \\\\"


def test_tables_rebuilt_from_hand_made_records_equal_hand_computed_tables(tmp_path):
    write_ledger(tmp_path / "ledger")
    (tmp_path / "sweep.csv").write_text(SWEEP_IN)
    out = tmp_path / "tables"
    files = build_tables(tmp_path / "ledger", out, compare_to="dino-ep0010", sweep_csv=tmp_path / "sweep.csv",
                         resamples=200, seed=0)
    assert sorted(p.name for p in files) == sorted(
        f"{stem}.{ext}" for stem in ("run-dino_val", "run-ref_val", "compare-dino-ep0010_val", "sweep")
        for ext in ("csv", "md", "tex"))
    assert (out / "run-dino_val.csv").read_text() == RUN_DINO_CSV
    assert (out / "run-ref_val.csv").read_text() == RUN_REF_CSV
    assert (out / "run-dino_val.md").read_text() == RUN_DINO_MD
    assert (out / "run-dino_val.tex").read_text() == RUN_DINO_TEX
    assert (out / "compare-dino-ep0010_val.csv").read_text() == COMPARE_CSV
    assert (out / "sweep.csv").read_text() == SWEEP_CSV
    # rebuilding gives the same bytes
    before = {p.name: p.read_bytes() for p in files}
    again = build_tables(tmp_path / "ledger", out, compare_to="dino-ep0010", sweep_csv=tmp_path / "sweep.csv",
                         resamples=200, seed=0)
    assert {p.name: p.read_bytes() for p in again} == before


def test_paired_difference_of_identical_checkpoints_is_exactly_zero():
    a = measure("jaccard", 40.0, 38.0, 42.0, "mean", [1, 2, 3, 4, 5], [0.3, 0.4, 0.5, 0.125, 0.9725])
    b = dict(a, image_ids=[5, 4, 3, 2, 1], per_image=[0.9725, 0.125, 0.5, 0.4, 0.3])  # same images, reordered
    assert paired_difference(a, b, resamples=500, seed=3) == (0.0, 0.0, 0.0, 5)
    conf = [[[0, 0, 10], [1, 1, 4], [1, 0, 2]], [[0, 0, 7], [2, 2, 3]], [[2, 1, 1], [1, 1, 5]]]
    m = measure("miou", 50.0, 40.0, 60.0, "miou", [1, 2, 3], conf)
    assert paired_difference(m, m, resamples=300, seed=0) == (0.0, 0.0, 0.0, 3)
    r = measure("corloc", 50.0, 0.0, 100.0, "ratio", [1, 2, 3], [[1, 1], [0, 1], [1, 1]])
    assert paired_difference(r, r, resamples=300, seed=0) == (0.0, 0.0, 0.0, 3)


def test_paired_difference_matches_an_independent_paired_bootstrap():
    rng = np.random.default_rng(5)
    a_vals, b_vals = rng.random(12), rng.random(12)
    ids = list(range(100, 112))
    a = measure("jaccard", 0.0, 0.0, 0.0, "mean", ids, a_vals.tolist())
    order = rng.permutation(12)
    b = measure("jaccard", 0.0, 0.0, 0.0, "mean", [ids[i] for i in order] + [999], [*b_vals[order].tolist(), 0.5])
    diff, lo, hi, n = paired_difference(a, b, resamples=300, seed=2)
    draw = np.random.default_rng(2)
    boot = []
    for _ in range(300):
        idx = draw.integers(0, 12, size=12)
        boot.append(a_vals[idx].mean() - b_vals[idx].mean())
    want_lo, want_hi = np.percentile(boot, [2.5, 97.5])
    assert n == 12
    assert diff == pytest.approx(100 * (a_vals.mean() - b_vals.mean()), abs=1e-9)
    assert (lo, hi) == (pytest.approx(100 * want_lo, abs=1e-9), pytest.approx(100 * want_hi, abs=1e-9))


def test_compare_tables_only_pair_measures_with_a_reducer(tmp_path):
    write_ledger(tmp_path)
    records = read_records(tmp_path / "records")
    (stem, header, rows), = compare_tables(records, "dino-ep0010", resamples=100, seed=0)
    assert stem == "compare-dino-ep0010_val" and not any(h.startswith("ap ") for h in header)
    with pytest.raises(LedgerError, match="compare_to checkpoint 'nope'"):
        compare_tables(records, "nope", resamples=100, seed=0)


def test_duplicate_measure_for_one_checkpoint_is_an_error(tmp_path):
    write_ledger(tmp_path)
    records = read_records(tmp_path / "records")
    dup = dict(records[0], record_sha256="d" * 64)
    with pytest.raises(LedgerError, match="two records report"):
        run_tables([*records, dup])


def test_sweep_csv_without_needed_columns_names_the_file(tmp_path):
    (tmp_path / "sweep.csv").write_text("setting,value\nc0,1.0\n")
    with pytest.raises(LedgerError, match="sweep.csv: sweep CSV lacks column.*ci_low"):
        sweep_table(tmp_path / "sweep.csv")
    (tmp_path / "sweep.csv").write_text("setting,value,ci_low,ci_high\nc0,abc,1,2\n")
    with pytest.raises(LedgerError, match="line 2 column value"):
        sweep_table(tmp_path / "sweep.csv")
