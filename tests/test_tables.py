"""Tables rebuilt from hand-made ledger records equal tables worked out by hand."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sources import REPO

from evaluate.ledger import LedgerError
from evaluate.ledger.records import read_records, record_path, write_record
from evaluate.outputs.table_model import (
    Cell,
    Column,
    Table,
    bold_cells,
    fmt_interval,
    latex_escape,
    to_csv,
    to_latex,
    to_markdown,
)
from evaluate.outputs.tables import build_tables, compare_tables, paired_difference, run_tables, sweep_table

DATA = Path(__file__).parent / "data"


def measure(name, value, lo, hi, reducer, image_ids, per_image, n_left_out=0):
    return {"measure": name, "value": value, "ci_low": lo, "ci_high": hi, "n_images": len(image_ids),
            "n_left_out": n_left_out, "reducer": reducer, "image_ids": image_ids, "per_image": per_image}


def record(kind, checkpoint, run, epoch, dataset, role, measures, setting="c1-t0.2", **extra):
    return {
        "kind": kind, "checkpoint": checkpoint, "run": run, "epoch": epoch, "checkpoint_sha256": "c" * 64,
        "dataset": dataset, "role": role, "setting": setting, "code_version": "x", "config_hash": "f" * 16,
        "torch_version": "2.13.0", "started": "2026-01-01T00:00:00.000000Z",
        "finished": "2026-01-01T00:00:01.000000Z", "wall_s": 1.0, "max_rss_mb": 1.0,
        "opening_row_sha256": "0" * 64, "measures": measures, **extra,
    }


BASE_J = [0.3, 0.4, 0.5]  # images 1, 2, 3
PROBE_SETTING = "linear,wd=0.0001,it=100"


def write_ledger(ledger: Path) -> None:
    """Two epochs of run dino (architecture vit-s16), one reference checkpoint without an architecture field, a
    probe record and a select record (not in tables)."""
    recs = [
        record("decoder", "dino-ep0010", "dino", 10, "val", "eval", [
            measure("jaccard", 40.0, 38.0, 42.0, "mean", [1, 2, 3], BASE_J),
            measure("ap", 12.5, None, None, None, [1, 2, 3], []),
        ], architecture="vit-s16"),
        # the same images in another order, every image 10 points better
        record("decoder", "dino-ep0020", "dino", 20, "val", "eval", [
            measure("jaccard", 50.0, 48.0, 52.0, "mean", [3, 1, 2], [0.6, 0.4, 0.5]),
            measure("ap", 12.5, None, None, None, [1, 2, 3], []),
        ], architecture="vit-s16"),
        # image 3 left out, image 4 extra: paired over images 1 and 2 only, each 10 points worse
        record("decoder", "ref", None, None, "val", "eval", [
            measure("jaccard", 30.0, 28.0, 32.0, "mean", [1, 2, 4], [0.2, 0.3, 0.99]),
            measure("ap", 12.5, None, None, None, [1, 2, 4], []),
        ]),
        record("probe", "dino-ep0010", "dino", 10, "val", "eval", [
            measure("probe_accuracy", 71.5, 70.0, 72.5, "ratio", [1, 2], [[50, 70], [64, 90]]),
        ], setting=PROBE_SETTING, architecture="vit-s16"),
        record("decoder", "dino-ep0010", "dino", 10, "sel", "select", [
            measure("jaccard", 1.0, 0.0, 2.0, "mean", [7], [0.01]),
        ]),
    ]
    for rec in recs:
        write_record(record_path(ledger, f"{rec['kind']}-{rec['role']}", rec["checkpoint"], rec["dataset"]), rec)


CAPTION_TAIL = ("val, 3 images. Decoder setting: c1-t0.2. Probe: linear,wd=0.0001,it=100. Percent, value [95% "
                "bootstrap interval over images]; best per column in bold.")
CHECKPOINTS_CSV = (
    "run,epoch,architecture,checkpoint,jaccard,jaccard_ci_low,jaccard_ci_high,ap,probe_accuracy,"
    "probe_accuracy_ci_low,probe_accuracy_ci_high\n"
    "dino,10,vit-s16,dino-ep0010,40.0,38.0,42.0,12.5,71.5,70.0,72.5\n"
    "dino,20,vit-s16,dino-ep0020,50.0,48.0,52.0,12.5,,,\n"
    "ref,,,ref,30.0,28.0,32.0,12.5,,,\n"
)
CHECKPOINTS_MD = (
    f"Every checkpoint on {CAPTION_TAIL}\n"
    "\n"
    "| run | epoch | architecture | checkpoint | Jaccard | AP | probe accuracy |\n"
    "|---|---|---|---|---:|---:|---:|\n"
    "| dino | 10 | vit-s16 | dino-ep0010 | 40.0 [38.0, 42.0] | **12.5** | 71.5 [70.0, 72.5] |\n"
    "| dino | 20 | vit-s16 | dino-ep0020 | **50.0** [48.0, 52.0] | **12.5** |  |\n"
    "| ref |  |  | ref | 30.0 [28.0, 32.0] | **12.5** |  |\n"
)
RUN_REF_CSV = (
    "epoch,checkpoint,jaccard,jaccard_ci_low,jaccard_ci_high,ap\n"
    ",ref,30.0,28.0,32.0,12.5\n"
)
COMPARE_HEADER = [
    "run", "epoch", "architecture", "checkpoint", "jaccard - dino-ep0010", "jaccard - dino-ep0010_ci_low",
    "jaccard - dino-ep0010_ci_high", "probe_accuracy - dino-ep0010", "probe_accuracy - dino-ep0010_ci_low",
    "probe_accuracy - dino-ep0010_ci_high",
]
COMPARE_ROWS = [  # full precision: every image of ep0020 is 10 points better, ref's two paired images 10 worse
    ["dino", "10", "vit-s16", "dino-ep0010", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    ["dino", "20", "vit-s16", "dino-ep0020", 10.0, 10.0, 10.0, "", "", ""],
    ["ref", "", "", "ref", -10.0, -10.0, -10.0, "", "", ""],
]
SWEEP_IN = (
    "setting,value,ci_low,ci_high,n_images\n"
    "c0-t0.2,30.5,28.25,32.75,79\n"
    "c1-t0.2,33.04,31.0,35.1,79\n"
    "c1-t0.3,33.04,30.0,36.0,79\n"
)
SWEEP_MD = (
    "Decoder sweep, 79 images: mean Jaccard of every setting, best first. Percent, value [95% bootstrap interval "
    "over images]; the best (the selected setting) in bold.\n"
    "\n"
    "| setting | Jaccard | images |\n"
    "|---|---:|---|\n"
    "| c1-t0.2 | **33.0** [31.0, 35.1] | 79 |\n"
    "| c1-t0.3 | **33.0** [30.0, 36.0] | 79 |\n"
    "| c0-t0.2 | 30.5 [28.2, 32.8] | 79 |\n"
)


def test_formatting_rules():
    assert fmt_interval(33.044, 31.0, 35.096) == "33.0 [31.0, 35.1]"
    assert fmt_interval(33.044, 31.0, 35.096, digits=2) == "33.04 [31.00, 35.10]"
    assert fmt_interval(-0.001, -0.004, 0.0) == "0.0 [0.0, 0.0]"
    assert fmt_interval(12.5, None, None) == "12.5"
    assert fmt_interval(None, None, None) == ""
    assert latex_escape("a_b & 5% #1") == "a\\_b \\& 5\\% \\#1"
    table = Table("t", "cap_1", [Column("a|b", "a|b", "a", numeric=False), Column("x_1", "x_1", "x\\_1", True)],
                  [[Cell(text="50%"), Cell(-10.0, -12.25, 3.0)]])
    assert to_markdown(table) == "cap_1\n\n| a\\|b | x_1 |\n|---|---:|\n| 50% | -10.0 [-12.2, 3.0] |\n"
    assert "50\\% & $-$10.0 {\\scriptsize [$-$12.2, 3.0]} \\\\" in to_latex(table).splitlines()
    assert "\\caption{cap\\_1}" in to_latex(table)
    assert to_csv(table) == "a|b,x_1,x_1_ci_low,x_1_ci_high\n50%,-10.0,-12.25,3.0\n"


def test_best_is_bold_by_the_number_ties_share_it_and_a_lone_value_is_not_bold():
    cols = [Column("a", "a", "a", True, best=True), Column("b", "b", "b", True, best=True),
            Column("c", "c", "c", True, best=False)]
    # 33.04 and 33.0449 both show as 33.0, but only the larger number is the best
    rows = [[Cell(33.04), Cell(5.0), Cell(9.0)], [Cell(33.0449), Cell(), Cell(1.0)], [Cell(7.0), Cell(), Cell(3.0)]]
    assert bold_cells(Table("t", "", cols, rows)) == {(1, 0)}
    rows[2][0] = Cell(33.0449)
    assert bold_cells(Table("t", "", cols, rows)) == {(1, 0), (2, 0)}
    # by row: the best of the `best` columns in each row
    assert bold_cells(Table("t", "", cols, rows, best_by="row")) == {(0, 0)}


def test_tables_rebuilt_from_hand_made_records_equal_hand_computed_tables(tmp_path):
    write_ledger(tmp_path / "ledger")
    (tmp_path / "sweep.csv").write_text(SWEEP_IN)
    out = tmp_path / "tables"
    files = build_tables(tmp_path / "ledger", out, compare_to="dino-ep0010", sweep_csv=tmp_path / "sweep.csv",
                         resamples=200, seed=0)
    stems = ("checkpoints_val", "run-dino_val", "run-ref_val", "compare-dino-ep0010_val", "sweep", "agreement_val")
    assert sorted(p.name for p in files) == sorted(f"{s}.{e}" for s in stems for e in ("csv", "md", "tex", "html"))
    assert (out / "checkpoints_val.csv").read_text() == CHECKPOINTS_CSV
    assert (out / "checkpoints_val.md").read_text() == CHECKPOINTS_MD
    assert (out / "checkpoints_val.tex").read_text() == (DATA / "checkpoints_val.tex").read_text()
    assert (out / "run-ref_val.csv").read_text() == RUN_REF_CSV
    header, *rows = list(csv.reader(io.StringIO((out / "compare-dino-ep0010_val.csv").read_text())))
    assert header == COMPARE_HEADER
    assert [[float(c) if isinstance(w, float) else c for c, w in zip(row, want)] for row, want in
            zip(rows, COMPARE_ROWS)] == [[pytest.approx(w, abs=1e-12) if isinstance(w, float) else w for w in want]
                                         for want in COMPARE_ROWS]
    assert (out / "sweep.md").read_text() == SWEEP_MD
    assert "ref &  &  & ref & $-$10.0 {\\scriptsize [$-$10.0, $-$10.0]} &  \\\\" in (
        out / "compare-dino-ep0010_val.tex").read_text()
    html = (out / "checkpoints_val.html").read_text()
    assert '<td class="num"><strong>50.0</strong> [48.0, 52.0]</td>' in html and "<caption>Every checkpoint" in html
    # rebuilding gives the same bytes
    before = {p.name: p.read_bytes() for p in files}
    again = build_tables(tmp_path / "ledger", out, compare_to="dino-ep0010", sweep_csv=tmp_path / "sweep.csv",
                         resamples=200, seed=0)
    assert {p.name: p.read_bytes() for p in again} == before


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex absent (Debian: texlive-latex-base, "
                    "texlive-latex-recommended for booktabs.sty)")
def test_latex_table_compiles_with_booktabs(tmp_path):
    (tmp_path / "table.tex").write_text((DATA / "checkpoints_val.tex").read_text())
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
                                      "\\input{table.tex}\n\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 1000
    assert "Undefined control sequence" not in proc.stdout


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
    (table,) = compare_tables(records, "dino-ep0010", resamples=100, seed=0)
    assert table.stem == "compare-dino-ep0010_val"
    assert [c.key for c in table.columns if c.numeric] == ["jaccard - dino-ep0010", "probe_accuracy - dino-ep0010"]
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


def _with_precisions(ledger: Path, precisions: dict) -> None:
    """The hand-made ledger with each checkpoint's records rewritten to carry `precisions[checkpoint]`."""
    records_dir = ledger / "records"
    for rec in read_records(records_dir):
        if rec["checkpoint"] in precisions:
            rec = {k: v for k, v in rec.items() if k != "record_sha256"}
            rec["precision"] = precisions[rec["checkpoint"]]
            write_record(record_path(ledger, f"{rec['kind']}-{rec['role']}", rec["checkpoint"], rec["dataset"]),
                         rec, replace=True)


def _first_line(path: Path) -> str:
    return path.read_text().splitlines()[0]


def test_a_table_mixing_precisions_lists_each_with_its_checkpoints_and_float32_alone_says_nothing(tmp_path):
    ledger = tmp_path / "ledger"
    write_ledger(ledger)
    _with_precisions(ledger, {"dino-ep0010": "float32", "dino-ep0020": "float32", "ref": "float32"})
    build_tables(ledger, tmp_path / "same", compare_to="dino-ep0010", resamples=50, seed=0)
    assert _first_line(tmp_path / "same" / "checkpoints_val.md") == f"Every checkpoint on {CAPTION_TAIL}"

    _with_precisions(ledger, {"dino-ep0020": "bfloat16"})
    build_tables(ledger, tmp_path / "mixed", compare_to="dino-ep0010", resamples=50, seed=0)
    mixed = "Mixed network precisions: bfloat16 (dino-ep0020); float32 (dino-ep0010, ref)."
    assert mixed in _first_line(tmp_path / "mixed" / "checkpoints_val.md")
    assert "Mixed network precisions: bfloat16 (dino-ep0020); float32 (dino-ep0010)." in _first_line(
        tmp_path / "mixed" / "run-dino_val.md")
    assert "precision" not in _first_line(tmp_path / "mixed" / "run-ref_val.md")  # ref alone: float32 throughout
    assert mixed in (tmp_path / "mixed" / "checkpoints_val.tex").read_text()


def test_a_table_of_one_lower_precision_names_it(tmp_path):
    ledger = tmp_path / "ledger"
    write_ledger(ledger)
    _with_precisions(ledger, {"dino-ep0010": "bfloat16", "dino-ep0020": "bfloat16"})
    build_tables(ledger, tmp_path / "out", compare_to="dino-ep0010", resamples=50, seed=0)
    assert _first_line(tmp_path / "out" / "run-dino_val.md").endswith(
        "Probe: linear,wd=0.0001,it=100. Network precision: bfloat16. Percent, value [95% bootstrap interval over "
        "images]; best per column in bold.")


def _with_networks(ledger: Path, networks: dict) -> None:
    """The hand-made ledger with each checkpoint's records carrying the network fields `networks[checkpoint]`."""
    for rec in read_records(ledger / "records"):
        if rec["checkpoint"] in networks:
            rec = {k: v for k, v in rec.items() if k != "record_sha256"} | networks[rec["checkpoint"]]
            write_record(record_path(ledger, f"{rec['kind']}-{rec['role']}", rec["checkpoint"], rec["dataset"]),
                         rec, replace=True)


def test_the_network_column_and_caption_say_each_checkpoints_patch_width_registers_and_form(tmp_path):
    ledger = tmp_path / "ledger"
    write_ledger(ledger)
    seed = {"form": "backbone", "patch": 16, "width": 384, "registers": 0}
    dinov2 = {"form": "backbone", "patch": 14, "width": 384, "registers": 4}
    _with_networks(ledger, {"dino-ep0010": seed, "dino-ep0020": dinov2, "ref": seed})
    build_tables(ledger, tmp_path / "backbone", compare_to="dino-ep0010", resamples=50, seed=0)
    table = (tmp_path / "backbone" / "checkpoints_val.md").read_text()
    assert "form" not in _first_line(tmp_path / "backbone" / "checkpoints_val.md")  # the default says nothing
    assert "patch 14, 384 wide, 4 registers, backbone" in table and "patch 16, 384 wide, backbone" in table

    _with_networks(ledger, {"dino-ep0020": {**dinov2, "form": "released"}})
    build_tables(ledger, tmp_path / "mixed", compare_to="dino-ep0010", resamples=50, seed=0)
    assert "Mixed network forms: backbone (dino-ep0010, ref); released (dino-ep0020)." in _first_line(
        tmp_path / "mixed" / "checkpoints_val.md")
    assert "patch 14, 384 wide, 4 registers, released" in (tmp_path / "mixed" / "checkpoints_val.md").read_text()
    _with_networks(ledger, {name: {**seed, "form": "released"} for name in ("dino-ep0010", "dino-ep0020", "ref")})
    build_tables(ledger, tmp_path / "released", compare_to="dino-ep0010", resamples=50, seed=0)
    assert "Network form: released" in _first_line(tmp_path / "released" / "checkpoints_val.md")


def test_published_numbers_of_other_protocols_stand_in_a_table_of_their_own_as_their_source_prints_them():
    """The rows of benchmarks.yaml that name a protocol, for the architectures scored, read here with yaml: one row
    each, in the file's order, the value as written there (0.403, not 0.4); none for architectures without any."""
    import yaml

    from evaluate.outputs.tables import protocol_table

    shipped = yaml.safe_load((REPO / "evaluate" / "datasets" / "benchmarks.yaml").read_text(encoding="utf-8"))
    expected = [row for row in shipped["rows"] if row.get("protocol") and row["architecture"] == "dinov3-s16"]
    assert len(expected) == 5
    records = [{"architecture": "dinov3-s16"}, {"architecture": "vit-s16-no-such-rows"}]
    (table,) = protocol_table(records)
    assert table.stem == "published-protocols" and len(table.rows) == len(expected)
    for cells, row in zip(table.rows, expected):
        (value,) = row["values"].values()
        assert cells[0].text == row["method"] and cells[1].text == "dinov3-s16" and cells[4].text == row["protocol"]
        assert cells[-1].text == str(value) and cells[-1].value is None
    assert "| 0.403 |" in to_markdown(table)
    assert not bold_cells(table)
    assert protocol_table([{"architecture": "xcit-s12-16"}]) == []


def test_an_attention_record_older_than_the_absent_field_dashes_its_descriptive_measures_only():
    """A record written before `absent` said its network lacked the attention spread in `attention_absent` (a
    reason alone): the spread and entropy columns show the dash, a score column stays empty, and the caption's note
    gives the reason once with the checkpoint."""
    from evaluate.outputs.rows import ABSENT, missing_cell
    from evaluate.outputs.table_model import Cell
    from evaluate.outputs.tables import _absent_note

    old = {"checkpoint": "xcit", "dataset": "val", "attention_absent": "attends across channels"}
    new = {"checkpoint": "selfpatch", "dataset": "val",
           "absent": {"reason": "no class token", "measures": ["cls_attention_jaccard"]}}
    records = [old, new]
    assert missing_cell(records, "xcit", "val", "attention:attention_spread") == ABSENT
    assert missing_cell(records, "xcit", "val", "attention:attention_entropy") == ABSENT
    assert missing_cell(records, "xcit", "val", "decoder:jaccard") == Cell()
    assert missing_cell(records, "selfpatch", "val", "cls-attention:cls_attention_jaccard") == ABSENT
    assert missing_cell(records, "selfpatch", "val", "attention:attention_spread") == Cell()
    assert _absent_note(records) == (f" {ABSENT.text}: attends across channels (xcit)."
                                     f" {ABSENT.text}: no class token (selfpatch).")
