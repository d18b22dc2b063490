"""The report page: built from tables and figures alone, byte-identical on a rebuild, grouped by data set then
reading under a contents tree (order pinned on hand-named files, a new reading slotting in), and checked in a real
headless Chromium (every table and figure present once, every image decoded, no broken link, a screenshot)."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
from PIL import Image

from browser import chromium, open_page
from evaluate.outputs.figures import ledger_figures
from evaluate.ledger.records import record_path, write_record
from evaluate.outputs.report import ReportError, build_report, group_outputs
from evaluate.outputs.tables import build_tables

from sources import REPO
needs_browser = pytest.mark.skipif(chromium() is None, reason="headless Chromium absent (/usr/bin/chromium from "
                                   "Debian's chromium package; .ci/run installs it)")
SWEEP = (
    "setting,value,ci_low,ci_high,n_images,dataset,tau,eps,foreground,split,component\n"
    "s1,30.0,29,31,4,sel,0.1,1e-05,seed,mean,seed\n"
    "s2,40.0,39,41,4,sel,0.2,1e-05,seed,mean,seed\n"
)


def rec(kind, checkpoint, epoch, role, dataset, measures, setting="s2", **extra):
    return {"kind": kind, "checkpoint": checkpoint, "run": "r", "epoch": epoch, "checkpoint_sha256": "c" * 64,
            "dataset": dataset, "role": role, "setting": setting, "code_version": "x", "config_hash": "f" * 16,
            "torch_version": "2.13.0", "started": "2026-01-01T00:00:00.000000Z",
            "finished": "2026-01-01T00:00:01.000000Z", "wall_s": 1.0, "max_rss_mb": 1.0,
            "opening_row_sha256": "0" * 64, "measures": measures, **extra}


def mean(name, ids, values):
    return {"measure": name, "value": 100 * float(np.mean(values)), "ci_low": 1.0, "ci_high": 99.0,
            "n_images": len(ids), "n_left_out": 0, "reducer": "mean", "image_ids": ids, "per_image": values}


def make_results(root: Path) -> Path:
    """A hand-made ledger of three checkpoints -> tables, figures and report under root/results."""
    ledger = root / "results" / "ledger"
    ids = [1, 2, 3, 4]
    for k, epoch in enumerate((10, 20, 30)):
        name = f"ck{epoch}"
        jac = [0.2 + 0.1 * k, 0.5, 0.3, 0.9 - 0.2 * k]
        conf = [[[0, 0, 50 + k], [1, 1, 20], [0, 1, 5 - k]] for _ in ids]
        write_record(record_path(ledger, "decoder", name, "val"), rec(
            "decoder", name, epoch, "eval", "val", [mean("jaccard", ids, jac)],
            image_categories=[[i, ["cat"] if i % 2 else ["cat", "dog"]] for i in ids]))
        write_record(record_path(ledger, "probe", name, "val"), rec(
            "probe", name, epoch, "eval", "val",
            [{"measure": "probe_miou", "value": 50.0, "ci_low": 40.0, "ci_high": 60.0, "n_images": 4,
              "n_left_out": 0, "reducer": "miou", "image_ids": ids, "per_image": conf}],
            setting="linear", class_names=["background", "cat"]))
    write_record(record_path(ledger, "sweep", "ck10", "sel"),
                 rec("sweep", "ck10", 10, "select", "sel", [mean("jaccard", [7], [0.4])]))
    (root / "sweep.csv").write_text(SWEEP)
    results = root / "results"
    build_tables(ledger, results / "tables", "ck10", resamples=100, seed=0, sweep_csv=root / "sweep.csv",
                 gallery_images=1)
    ledger_figures(ledger, results / "figures", sweep_csv=root / "sweep.csv", overlay_images=4, resamples=100, seed=0)
    return build_report(results / "tables", results / "figures", results / "report.html")


def check_in_browser(report: Path, screenshot: Path) -> dict:
    """Open `report` in Chromium; assert every table and figure of its folders is there, every image decoded
    and every link resolves (files exist, anchors exist); return the page facts."""
    facts = open_page(report, screenshot)
    results = report.parent
    stems = sorted(p.stem for p in (results / "tables").glob("*.html"))
    figures = sorted(p.name for p in (results / "figures").glob("*.png"))
    tables = {t["id"]: t["rows"] for t in facts["tables"]}
    assert sorted(tables) == sorted(f"tab-{s}" for s in stems) and stems
    assert all(rows >= 2 for rows in tables.values()), tables  # a header and at least one row each
    shown = sorted(Path(unquote(urlsplit(i["src"]).path)).name for i in facts["images"])
    assert shown == figures and figures
    linked = Counter(Path(unquote(urlsplit(href).path)).name for href in facts["links"] if "#" not in href)
    files = [p.name for p in (*(results / "tables").iterdir(), *(results / "figures").iterdir())
             if p.suffix in (".csv", ".md", ".tex", ".png", ".pdf")]
    assert linked == Counter(files), "every table's CSV, Markdown, LaTeX and every figure's PNG, PDF: one link each"
    broken = [i["src"] for i in facts["images"] if not i["ok"]]
    assert not broken, f"images the browser could not decode: {broken}"
    for href in facts["links"]:
        parts = urlsplit(href)
        assert parts.scheme == "file", href
        target = Path(unquote(parts.path))
        assert target.is_file(), f"broken link {href}"
        if parts.fragment:
            assert target == report.resolve() and parts.fragment in facts["ids"], f"broken anchor {href}"
    with Image.open(screenshot) as im:
        assert im.format == "PNG" and im.size == (1280, 1000)
        assert len(set(np.asarray(im.convert("L")).ravel().tolist())) > 10  # not a blank page
    return facts


def test_report_is_built_from_tables_and_figures_and_identical_on_a_rebuild(tmp_path):
    report = make_results(tmp_path)
    first = report.read_bytes()
    build_report(tmp_path / "results" / "tables", tmp_path / "results" / "figures", report)
    assert report.read_bytes() == first
    text = first.decode()
    for stem in ("checkpoints_val", "categories_val", "probe-classes_val", "gallery_val", "agreement_val", "sweep"):
        assert f'id="tab-{stem}"' in text and f'href="tables/{stem}.tex"' in text
    assert 'src="figures/sweep_heatmap.png"' in text and 'href="figures/sweep_heatmap.pdf"' in text
    (tmp_path / "results" / "tables" / "sweep.csv").unlink()
    with pytest.raises(ReportError, match="table sweep: missing .*sweep.csv"):
        build_report(tmp_path / "results" / "tables", tmp_path / "results" / "figures", report)


@needs_browser
def test_report_of_hand_made_records_in_headless_chromium(tmp_path):
    report = make_results(tmp_path)
    facts = check_in_browser(report, tmp_path / "report.png")
    assert len(facts["images"]) == 4  # measure against epoch (jaccard, probe_miou), sweep heatmap, agreement
    # the check can fail: a figure gone from disk is an image the browser cannot decode
    (tmp_path / "results" / "figures" / "sweep_heatmap.png").unlink()
    facts = open_page(report, tmp_path / "again.png")
    assert [i["ok"] for i in facts["images"] if i["src"].endswith("sweep_heatmap.png")] == [False]


@needs_browser
def test_the_checkouts_report_in_headless_chromium():
    report = REPO / "results" / "report.html"
    if not report.is_file():
        pytest.skip(f"{report} absent: `make run` writes it")
    check_in_browser(report, REPO / "results" / "report-screenshot.png")


# ---------------------------------------------------------------------------------------- grouping and order

# Hand-named outputs of three data sets, one name holding '_' and one a prefix-free neighbour of another; the
# `discovery` and `saliency` readings are unknown to the report, so they must slot in after the known ones.
TABLES = ["checkpoints_val", "checkpoints_demo-val", "checkpoints_my_set", "run-r_val", "run-r_my_set",
          "compare-a_demo-val", "agreement_val", "discovery-corloc_val", "sweep"]
FIGURES = ["val_jaccard", "val_ap", "my_set_probe_miou", "gallery_demo-val_ck", "attention-heatmap_val_a",
           "agreement_val_jaccard_probe_miou", "saliency_my_set_a", "sweep_heatmap"]
EXPECTED = [  # (section, [(reading, tables, figures)]) in page order, worked out by hand from the rules
    ("demo-val", [("checkpoints", ["checkpoints_demo-val"], []), ("compare", ["compare-a_demo-val"], []),
                  ("gallery", [], ["gallery_demo-val_ck"])]),
    ("my_set", [("checkpoints", ["checkpoints_my_set"], ["my_set_probe_miou"]), ("run", ["run-r_my_set"], []),
                ("saliency", [], ["saliency_my_set_a"])]),
    ("val", [("checkpoints", ["checkpoints_val"], ["val_ap", "val_jaccard"]), ("run", ["run-r_val"], []),
             ("agreement", ["agreement_val"], ["agreement_val_jaccard_probe_miou"]),
             ("attention", [], ["attention-heatmap_val_a"]), ("discovery", ["discovery-corloc_val"], [])]),
    (None, [("sweep", ["sweep"], ["sweep_heatmap"])]),
]


def test_outputs_are_grouped_by_data_set_then_reading_from_their_names_alone():
    sections = group_outputs(TABLES, FIGURES)
    got = [(s.dataset, [(r.name, r.tables, r.figures) for r in s.readings]) for s in sections]
    assert got == EXPECTED
    assert group_outputs(list(reversed(TABLES)), list(reversed(FIGURES))) == sections  # no order of discovery


class PageOutline(HTMLParser):
    """In document order: ('section', id) where a section opens, ('table', id), ('figure', id); every href and
    src; every id."""

    def __init__(self, text: str):
        super().__init__()
        self.outline, self.hrefs, self.srcs, self.ids = [], [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
            if tag in ("section", "table", "figure"):
                self.outline.append((tag, attrs["id"]))
        if tag == "a":
            self.hrefs.append(attrs["href"])
        if tag == "img":
            self.srcs.append(attrs["src"])


def write_hand_named_outputs(results: Path) -> None:
    """Each TABLES stem as the four files a table has (a one-row fragment), each FIGURES stem as a PNG and a PDF."""
    for folder in ("tables", "figures"):
        (results / folder).mkdir(parents=True)
    for stem in TABLES:
        (results / "tables" / f"{stem}.html").write_text(
            f'<table id="tab-{stem}"><thead><tr><th>x</th></tr></thead><tbody><tr><td>1</td></tr></tbody></table>\n')
        for suffix in (".csv", ".md", ".tex"):
            (results / "tables" / f"{stem}{suffix}").write_text("x\n1\n")
    for stem in FIGURES:
        Image.new("RGB", (8, 6), (200, 40, 40)).save(results / "figures" / f"{stem}.png")
        (results / "figures" / f"{stem}.pdf").write_bytes(b"%PDF-1.4\n")


def test_the_page_follows_the_grouping_under_a_contents_tree_that_resolves(tmp_path):
    results = tmp_path / "results"
    write_hand_named_outputs(results)
    report = build_report(results / "tables", results / "figures", results / "report.html")
    text = report.read_text()
    page = PageOutline(text)
    expected_outline = []
    for dataset, readings in EXPECTED:
        anchor = "across" if dataset is None else f"ds:{dataset}"
        expected_outline.append(("section", anchor))
        for reading, tables, figures in readings:
            expected_outline.append(("section", f"{anchor}:{reading}"))
            expected_outline += [("table", f"tab-{t}") for t in tables] + [("figure", f"fig-{f}") for f in figures]
    assert page.outline == expected_outline
    # the contents tree comes before the first section and links every section and reading, in page order
    contents = [h[1:] for h in page.hrefs if h.startswith("#")]
    assert contents == [id_ for kind, id_ in expected_outline if kind == "section"]
    assert text.index('href="#ds:demo-val"') < text.index('id="ds:demo-val"')
    assert len(page.ids) == len(set(page.ids))  # every anchor names one element
    # every file of every table and figure linked once (the PNG also shown once)
    files = sorted(f"tables/{t}{x}" for t in TABLES for x in (".csv", ".md", ".tex")) + sorted(
        f"figures/{f}{x}" for f in FIGURES for x in (".png", ".pdf"))
    assert sorted(h for h in page.hrefs if not h.startswith("#")) == sorted(files)
    assert sorted(page.srcs) == sorted(f"figures/{f}.png" for f in FIGURES)
    first = text
    build_report(results / "tables", results / "figures", report)
    assert report.read_text() == first
