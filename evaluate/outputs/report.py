"""`results/report.html`: one static page with every table and figure, built from `results/tables/` and
`results/figures/` alone (so from the ledger alone), byte-identical on a re-run (no time stamp).

Why our own page beside Snakemake's report (`make report` -> results/snakemake-report.html): Snakemake's report
is a JavaScript application that unpacks its embedded files at view time, so what a reader sees cannot be checked
as a page; this one is plain HTML whose tables, images and links a browser test (tests/test_report.py) opens,
checks and photographs.

Layout: a short contents tree (data set -> its readings), then one section per data set, then one for what names
no data set (the decoder's settings sweep). A data set's section holds its readings, the checkpoints table first
with its figures beside it. The grouping is read from the files' names alone, so a new reading's tables and
figures slot in without an edit here (`group_outputs`):
- the data sets are those with a `checkpoints_{dataset}` table (every eval data set has one);
- a stem belongs to the data set named at its earliest `_`-bounded place (`{kind}_{dataset}[_{detail}]`, or
  `{dataset}_{measure}` for a measure plotted per checkpoint), the longest such name on a tie;
- its reading is the kind's first `-`-separated word (`run-dino_val` -> run, `attention-heatmap_val_a` ->
  attention); a stem that starts with its data set belongs to the checkpoints reading;
- a stem that names no data set goes to the last section, its reading the stem's first word.
Readings come in READING_ORDER, then any other by name; within one, its tables, then its figures, each by name.
Each table is its `{stem}.html` fragment from `evaluate.outputs.tables`, with one link to each of its CSV,
Markdown and LaTeX files; each figure is its PNG (the image links to it) and one link to its PDF. Anchors:
`tab-{stem}`, `fig-{stem}`, `ds:{dataset}`, `ds:{dataset}:{reading}`, `across`, `across:{reading}` (`:` is in no
name, so none can clash). Every link is relative to the page.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path

from evaluate import EvaluationError
from evaluate.plumbing.atomic import write_text

CHECKPOINTS = "checkpoints"
READING_ORDER = (CHECKPOINTS, "run", "compare", "agreement", "categories", "probe", "gallery", "overlays",
                 "eigenvector", "video", "attention", "sweep")
READING_TITLES = {
    CHECKPOINTS: "Every checkpoint", "run": "Each run by epoch", "compare": "Against the baseline",
    "agreement": "Do the measures agree?", "categories": "Per category", "probe": "The probe, per class",
    "gallery": "Gallery", "overlays": "Masks on the images", "eigenvector": "The eigenvector",
    "video": "Video, per sequence", "attention": "Attention", "sweep": "The decoder's settings sweep",
}
ACROSS_TITLE = "Across data sets"
STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1250px; color: #222; }
h1 { margin-bottom: 0.2em; }
section.dataset { border-top: 3px solid #222; margin-top: 2em; }
section.reading { margin-top: 1em; }
h3 { margin: 0.8em 0 0.2em; }
nav ul.tree { margin: 0.3em 0; padding-left: 1.2em; }
nav ul.tree ul { display: inline; padding: 0; }
nav ul.tree ul li { display: inline; }
nav ul.tree ul li + li::before { content: " · "; }
div.table { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
caption { caption-side: top; text-align: left; padding: 0.3em 0; max-width: 1100px; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #ccc; }
thead th { border-bottom: 2px solid #222; }
td.num, th.num { text-align: right; white-space: nowrap; }
div.figures { display: flex; flex-wrap: wrap; gap: 0.8em; align-items: flex-start; }
figure { margin: 0.5em 0; max-width: 400px; }
figure img { max-width: 100%; max-height: 420px; border: 1px solid #ddd; }
figcaption { font-size: 0.85em; }
.files { font-size: 0.85em; }
"""


class ReportError(EvaluationError):
    """A table or figure the report needs is missing; names the file."""


@dataclass
class Reading:
    """One reading of one data set (or of the last section): its table and figure stems, each sorted."""

    name: str
    tables: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)


@dataclass
class Section:
    """A data set's part of the page (`dataset` None: what names no data set), its readings in page order."""

    dataset: str | None
    readings: list[Reading]

    @property
    def anchor(self) -> str:
        return "across" if self.dataset is None else f"ds:{self.dataset}"

    @property
    def title(self) -> str:
        return ACROSS_TITLE if self.dataset is None else self.dataset


def _reading_rank(name: str) -> tuple[int, str]:
    return (READING_ORDER.index(name) if name in READING_ORDER else len(READING_ORDER)), name


def _place(stem: str, datasets: list[str]) -> tuple[str | None, str]:
    """(data set, reading) of one table or figure stem; the rules are in the module docstring."""
    found = []
    for name in datasets:
        for start in range(len(stem) - len(name) + 1):
            if (stem.startswith(name, start) and (start == 0 or stem[start - 1] == "_")
                    and stem[start + len(name):start + len(name) + 1] in ("", "_")):
                found.append((start, -len(name), name))
                break
    if not found:
        return None, stem.split("_", 1)[0].split("-", 1)[0]
    start, _, name = min(found)
    return name, (stem[:start - 1].split("-", 1)[0] if start else CHECKPOINTS)


def group_outputs(table_stems: list[str], figure_stems: list[str]) -> list[Section]:
    """The page's sections: one per data set (by name), then one for stems that name none, if any."""
    datasets = sorted(s[len(CHECKPOINTS) + 1:] for s in table_stems if s.startswith(CHECKPOINTS + "_"))
    groups: dict[str | None, dict[str, Reading]] = {}
    for kind, stems in (("tables", table_stems), ("figures", figure_stems)):
        for stem in sorted(stems):
            dataset, reading = _place(stem, datasets)
            entry = groups.setdefault(dataset, {}).setdefault(reading, Reading(reading))
            getattr(entry, kind).append(stem)
    order = [d for d in datasets if d in groups] + ([None] if None in groups else [])
    return [Section(d, sorted(groups[d].values(), key=lambda r: _reading_rank(r.name))) for d in order]


def build_report(tables_dir: str | os.PathLike, figures_dir: str | os.PathLike, out_html: str | os.PathLike,
                 title: str = "labelfree-seg-eval results") -> Path:
    """Write the report page to `out_html`; return its path. A table without its four files is a ReportError."""
    tables_dir, figures_dir, out_html = Path(tables_dir), Path(figures_dir), Path(out_html)
    base = out_html.parent
    esc = html.escape

    def rel(path: Path) -> str:
        return esc(os.path.relpath(path, base).replace(os.sep, "/"))

    def table_html(stem: str) -> list[str]:
        files = [tables_dir / f"{stem}{suffix}" for suffix in (".html", ".csv", ".md", ".tex")]
        missing = [str(p) for p in files if not p.is_file()]
        if missing:
            raise ReportError(f"table {stem}: missing {', '.join(missing)} (re-run the tables rule)")
        links = " · ".join(f'<a href="{rel(p)}">{p.suffix[1:].upper() if p.suffix != ".md" else "Markdown"}</a>'
                           for p in files[1:])
        return ['<div class="table">', files[0].read_text(encoding="utf-8").rstrip("\n"), "</div>",
                f'<p class="files">{links}</p>']

    def figure_html(stem: str) -> str:
        png, pdf = figures_dir / f"{stem}.png", figures_dir / f"{stem}.pdf"
        links = f' · <a href="{rel(pdf)}">PDF</a>' if pdf.is_file() else ""
        return (f'<figure id="fig-{esc(stem)}"><a href="{rel(png)}"><img src="{rel(png)}" alt="{esc(stem)}"></a>'
                f'<figcaption>{esc(stem)}{links}</figcaption></figure>')

    sections = group_outputs(sorted({p.stem for p in tables_dir.glob("*.html")}),
                             sorted({p.stem for p in figures_dir.glob("*.png")}))
    body = [f"<h1>{esc(title)}</h1>",
            "<p>Every number comes from <code>results/ledger/records</code>; intervals are 95% percentile bootstraps "
            "over images. Best value per column (per row in per-category tables) in bold.</p>",
            '<nav><ul class="tree">']
    for section in sections:
        body.append(f'<li><a href="#{esc(section.anchor)}">{esc(section.title)}</a>: <ul>' + "".join(
            f'<li><a href="#{esc(section.anchor)}:{esc(r.name)}">{esc(READING_TITLES.get(r.name, r.name))}</a></li>'
            for r in section.readings) + "</ul></li>")
    body.append("</ul></nav>")
    for section in sections:
        body.append(f'<section class="dataset" id="{esc(section.anchor)}"><h2>{esc(section.title)}</h2>')
        for reading in section.readings:
            body.append(f'<section class="reading" id="{esc(section.anchor)}:{esc(reading.name)}">'
                        f"<h3>{esc(READING_TITLES.get(reading.name, reading.name))}</h3>")
            for stem in reading.tables:
                body += table_html(stem)
            if reading.figures:
                body.append('<div class="figures">')
                body += [figure_html(stem) for stem in reading.figures]
                body.append("</div>")
            body.append("</section>")
        body.append("</section>")
    page = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
    write_text(out_html, page)
    return out_html
