"""`results/report.html`: one static page with every table and figure, built from `results/tables/` and
`results/figures/` alone (so from the ledger alone), byte-identical on a re-run (no time stamp).

Why our own page beside Snakemake's report (`make report` -> results/snakemake-report.html): Snakemake's report
is a JavaScript application that unpacks its embedded files at view time, so what a reader sees cannot be checked
as a page; this one is plain HTML whose tables, images and links a browser test (tests/test_report.py) opens,
checks and photographs.

Layout: a contents list, then each table (its `{stem}.html` fragment from `evaluate.outputs.tables`, with links to its
CSV, Markdown and LaTeX files), then each figure (`<img>` of the PNG, a link to its PDF). Tables come in
TABLE_ORDER by stem prefix, figures in FIGURE_ORDER, each group sorted by name. Anchors: `tab-{stem}`,
`fig-{stem}`. Every link is relative to the page.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from evaluate import EvaluationError
from evaluate.plumbing.atomic import write_text

TABLE_ORDER = ("checkpoints_", "run-", "compare-", "agreement_", "attention-heads_", "categories_", "probe-classes_",
               "video-sequences_", "gallery_", "sweep")
FIGURE_ORDER = ("overlays_", "gallery_", "video_", "agreement_", "sweep_heatmap", "eigenvector_", "attention-", "")
STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
caption { caption-side: top; text-align: left; padding: 0.3em 0; max-width: 1100px; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #ccc; }
thead th { border-bottom: 2px solid #222; }
td.num, th.num { text-align: right; white-space: nowrap; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
.files { font-size: 0.85em; }
"""


class ReportError(EvaluationError):
    """A table or figure the report needs is missing; names the file."""


def _rank(stem: str, order: tuple[str, ...]) -> tuple[int, str]:
    return next((k for k, prefix in enumerate(order) if stem.startswith(prefix)), len(order)), stem


def build_report(tables_dir: str | os.PathLike, figures_dir: str | os.PathLike, out_html: str | os.PathLike,
                 title: str = "labelfree-seg-eval results") -> Path:
    """Write the report page to `out_html`; return its path. A table without its four files is a ReportError."""
    tables_dir, figures_dir, out_html = Path(tables_dir), Path(figures_dir), Path(out_html)
    base = out_html.parent

    def rel(path: Path) -> str:
        return html.escape(os.path.relpath(path, base).replace(os.sep, "/"))

    table_stems = sorted({p.stem for p in tables_dir.glob("*.html")}, key=lambda s: _rank(s, TABLE_ORDER))
    figure_stems = sorted({p.stem for p in figures_dir.glob("*.png")}, key=lambda s: _rank(s, FIGURE_ORDER))
    body = [f"<h1>{html.escape(title)}</h1>",
            "<p>Every number comes from <code>results/ledger/records</code>; intervals are 95% percentile bootstraps "
            "over images. Best value per column (per row in per-category tables) in bold.</p>",
            "<h2>Contents</h2>", "<ul>"]
    body += [f'<li><a href="#tab-{html.escape(s)}">table {html.escape(s)}</a></li>' for s in table_stems]
    body += [f'<li><a href="#fig-{html.escape(s)}">figure {html.escape(s)}</a></li>' for s in figure_stems]
    body += ["</ul>", "<h2>Tables</h2>"]
    for stem in table_stems:
        files = [tables_dir / f"{stem}{suffix}" for suffix in (".html", ".csv", ".md", ".tex")]
        missing = [str(p) for p in files if not p.is_file()]
        if missing:
            raise ReportError(f"table {stem}: missing {', '.join(missing)} (re-run the tables rule)")
        body.append(files[0].read_text(encoding="utf-8").rstrip("\n"))
        body.append('<p class="files">' + " · ".join(
            f'<a href="{rel(p)}">{p.suffix[1:].upper() if p.suffix != ".md" else "Markdown"}</a>'
            for p in files[1:]) + "</p>")
    body.append("<h2>Figures</h2>")
    for stem in figure_stems:
        png, pdf = figures_dir / f"{stem}.png", figures_dir / f"{stem}.pdf"
        links = f' · <a href="{rel(pdf)}">PDF</a>' if pdf.is_file() else ""
        body.append(f'<figure id="fig-{html.escape(stem)}"><img src="{rel(png)}" alt="{html.escape(stem)}">'
                    f'<figcaption>{html.escape(stem)}{links}</figcaption></figure>')
    page = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
    write_text(out_html, page)
    return out_html
