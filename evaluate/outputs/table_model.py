r"""A table as typed columns and cells holding numbers (`Table`), and its four renderings by one set of rules:

- **LaTeX** (`{stem}.tex`): pandas' own writer (`Styler.to_latex`) with booktabs rules (\toprule, \midrule,
  \bottomrule; the preamble needs `\usepackage{booktabs}`), a `table` float with `\caption` and
  `\label{tab:{stem}}`; display names as LaTeX (AP$_{50}$); a cell is `v {\scriptsize [lo, hi]}`, DIGITS
  decimals, a negative number's sign as `$-$`.
- **Markdown** (`{stem}.md`): the caption, a blank line, then the table; a cell is `v [lo, hi]`.
- **HTML** (`{stem}.html`): a `<table>` with its `<caption>`, for the report (`evaluate.outputs.report`).
- **CSV** (`{stem}.csv`): machine names as headers, every number at full precision (`repr`), and a numeric
  column with intervals as three columns `{key}`, `{key}_ci_low`, `{key}_ci_high`; no caption, no bold.

Best values: in a column marked `best`, the highest value (by the number, not by its rounded text) is bold
(`\textbf{}`, `**`, `<strong>`); every cell that equals it exactly is bold too (ties share the bold); a column
with fewer than two values has no best. Per-category tables (checkpoints as columns) mark the best checkpoint in
each row instead (`best_by="row"`). Every measure here is better when higher (differences too), but the video
decays and the other measures the catalogue (`evaluate.scores.catalogue`) calls better when lower, whose
columns mark no best.
"""

from __future__ import annotations

import csv
import html
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from evaluate.plumbing.atomic import write_text
from evaluate.scores.catalogue import BY_NAME, DIGITS

LATEX_SPECIALS = {
    "\\": r"\textbackslash{}", "_": r"\_", "&": r"\&", "%": r"\%", "#": r"\#", "$": r"\$", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}


# ----------------------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Column:
    """key: CSV header (machine name); plain: Markdown/HTML header; latex: LaTeX header (already LaTeX);
    numeric: cells are numbers (right aligned); digits: decimals shown; best: bold the highest value."""

    key: str
    plain: str
    latex: str
    numeric: bool = False
    digits: int = DIGITS
    best: bool = False


@dataclass(frozen=True)
class Cell:
    """A number with an optional interval (value, lo, hi; None = empty), or a text (`text`; `latex`: the same
    text as LaTeX, where it differs from the escaped text)."""

    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    text: str | None = None
    latex: str | None = None


@dataclass
class Table:
    """stem: file name without suffix; caption: plain text; rows: one Cell per column; best_by: "column" (the
    best of each `best` column among the rows) or "row" (the best `best` column of each row)."""

    stem: str
    caption: str
    columns: list[Column]
    rows: list[list[Cell]] = field(default_factory=list)
    best_by: str = "column"
    apart: int = 0  # the last `apart` rows are set apart (published numbers, not measured): never bold


def text_column(key: str, plain: str | None = None) -> Column:
    plain = key if plain is None else plain
    return Column(key, plain, latex_escape(plain))


def measure_column(key: str, best: bool = True, suffix: str = "") -> Column:
    """The column of measure `key` (`measure` or `kind:measure`, or `measure_h{h}`: its value for head h) under its
    display names (`evaluate.scores.catalogue`; no best marked for a measure better when lower or descriptive)."""
    kind, _, base = key.rpartition(":")
    base, head = (base.rsplit("_h", 1) + [""])[:2] if re.fullmatch(r".+_h\d+", base) else (base, "")
    entry = BY_NAME.get(base)  # a measure the catalogue lacks (a record of an older release): its name, a best
    plain, latex = (entry.plain, entry.latex) if entry else (base, latex_escape(base))
    if head:
        plain, latex = f"{plain} head {head}", f"{latex} head {head}"
    if kind:
        plain, latex = f"{kind} {plain}", f"{latex_escape(kind)} {latex}"
    return Column(key + suffix, plain + suffix, latex + latex_escape(suffix), numeric=True,
                  digits=entry.digits if entry else DIGITS, best=best and (entry.marks_best if entry else True))


def text(value) -> Cell:
    return Cell(text="" if value is None else str(value))


def bold_cells(table: Table) -> set[tuple[int, int]]:
    """(row, column) of every bold cell: see the module docstring (exact ties all bold; two values needed)."""
    bold: set[tuple[int, int]] = set()
    best_cols = [c for c, col in enumerate(table.columns) if col.best]
    measured = len(table.rows) - table.apart
    if table.best_by == "column":
        groups = [[(r, c) for r in range(measured)] for c in best_cols]
    elif table.best_by == "row":
        groups = [[(r, c) for c in best_cols] for r in range(measured)]
    else:
        raise ValueError(f"best_by must be 'column' or 'row', got {table.best_by!r}")
    for group in groups:
        filled = [(rc, table.rows[rc[0]][rc[1]].value) for rc in group if table.rows[rc[0]][rc[1]].value is not None]
        if len(filled) < 2:
            continue
        top = max(v for _, v in filled)
        bold.update(rc for rc, v in filled if v == top)
    return bold


# ----------------------------------------------------------------------------------------------- formatters


def fmt_number(value: float | None, digits: int = DIGITS) -> str:
    """`value` with `digits` decimals; "" for None; never "-0.0"."""
    if value is None:
        return ""
    text_ = f"{value:.{digits}f}"
    return text_[1:] if text_.startswith("-") and float(text_) == 0 else text_


def fmt_interval(value: float | None, lo: float | None, hi: float | None, digits: int = DIGITS) -> str:
    """"v [lo, hi]", or "v" when there is no interval, or "" when there is no value."""
    if value is None:
        return ""
    if lo is None or hi is None:
        return fmt_number(value, digits)
    return f"{fmt_number(value, digits)} [{fmt_number(lo, digits)}, {fmt_number(hi, digits)}]"


def latex_escape(text_: str) -> str:
    return "".join(LATEX_SPECIALS.get(ch, ch) for ch in str(text_))


def _latex_number(value: float, digits: int) -> str:
    shown = fmt_number(value, digits)
    return "$-$" + shown[1:] if shown.startswith("-") else shown


def _number_cell(cell: Cell, col: Column, bold: bool, number: Callable[[float, int], str], strong: tuple[str, str],
                 interval: str) -> str:
    """A numeric cell's text: its value by `number`, wrapped in `strong` when bold, then `interval` (a format
    of `lo` and `hi`, each by `number`) when the cell has an interval; without a value its text (a dash where a
    reading is absent), else ""."""
    if cell.value is None:
        return cell.text or ""
    head = number(cell.value, col.digits)
    if bold:
        head = f"{strong[0]}{head}{strong[1]}"
    if cell.lo is None or cell.hi is None:
        return head
    return head + interval.format(lo=number(cell.lo, col.digits), hi=number(cell.hi, col.digits))


def _plain_cell(cell: Cell, col: Column, bold: bool, strong: tuple[str, str]) -> str:
    if not col.numeric:
        return cell.text or ""
    return _number_cell(cell, col, bold, fmt_number, strong, " [{lo}, {hi}]")


def _latex_cell(cell: Cell, col: Column, bold: bool) -> str:
    if not col.numeric or (cell.value is None and cell.text):
        return cell.latex if cell.latex is not None else latex_escape(cell.text or "")
    return _number_cell(cell, col, bold, _latex_number, ("\\textbf{", "}"), " {{\\scriptsize [{lo}, {hi}]}}")


def _full(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def to_csv(table: Table) -> str:
    """Full precision; a numeric column with any interval gets `{key}_ci_low` and `{key}_ci_high` beside it."""
    with_ci = [col.numeric and any(r[c].lo is not None or r[c].hi is not None for r in table.rows)
               for c, col in enumerate(table.columns)]
    header = []
    for col, ci in zip(table.columns, with_ci):
        header += [col.key, f"{col.key}_ci_low", f"{col.key}_ci_high"] if ci else [col.key]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in table.rows:
        out = []
        for cell, col, ci in zip(row, table.columns, with_ci):
            if not col.numeric:
                out.append(cell.text or "")
            else:
                out += [_full(cell.value), _full(cell.lo), _full(cell.hi)] if ci else [_full(cell.value)]
        writer.writerow(out)
    return buf.getvalue()


def to_markdown(table: Table) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    bold = bold_cells(table)
    out = [table.caption, "", line([c.plain for c in table.columns]),
           "|" + "|".join("---:" if c.numeric else "---" for c in table.columns) + "|"]
    out += [line([_plain_cell(cell, col, (r, c) in bold, ("**", "**"))
                  for c, (cell, col) in enumerate(zip(row, table.columns))]) for r, row in enumerate(table.rows)]
    return "\n".join(out) + "\n"


def to_html(table: Table) -> str:
    """A `<table id="tab-{stem}">` with its caption; cells HTML-escaped, bold as <strong>."""
    bold = bold_cells(table)

    def cell_html(r: int, c: int) -> str:
        col = table.columns[c]
        shown = html.escape(_plain_cell(table.rows[r][c], col, (r, c) in bold, ("\x00", "\x01")))
        shown = shown.replace("\x00", "<strong>").replace("\x01", "</strong>")
        return f'<td class="num">{shown}</td>' if col.numeric else f"<td>{shown}</td>"

    out = [f'<table id="tab-{html.escape(table.stem)}">', f"<caption>{html.escape(table.caption)}</caption>",
           "<thead><tr>" + "".join(('<th class="num">' if c.numeric else "<th>") + f"{html.escape(c.plain)}</th>"
                                   for c in table.columns) + "</tr></thead>", "<tbody>"]
    out += ["<tr>" + "".join(cell_html(r, c) for c in range(len(table.columns))) + "</tr>"
            for r in range(len(table.rows))]
    out += ["</tbody>", "</table>"]
    return "\n".join(out) + "\n"


def to_latex(table: Table) -> str:
    """pandas' Styler.to_latex: booktabs rules, a centred `table` float with caption and label tab:{stem}."""
    import pandas as pd  # noqa: PLC0415

    bold = bold_cells(table)
    data = [[_latex_cell(cell, col, (r, c) in bold) for c, (cell, col) in enumerate(zip(row, table.columns))]
            for r, row in enumerate(table.rows)]
    frame = pd.DataFrame(data, columns=[c.latex for c in table.columns], dtype=object)
    spec = "".join("r" if c.numeric else "l" for c in table.columns)
    return frame.style.hide(axis="index").to_latex(
        hrules=True, column_format=spec, caption=latex_escape(table.caption), label=f"tab:{table.stem}",
        position_float="centering",
    )


RENDERERS = ((".csv", to_csv), (".md", to_markdown), (".tex", to_latex), (".html", to_html))


def write_table(out_dir: str | os.PathLike, table: Table) -> list[Path]:
    """Write `{stem}.csv`, `.md`, `.tex` and `.html` atomically; return the four paths."""
    out_dir = Path(out_dir)
    paths = []
    for suffix, render in RENDERERS:
        path = out_dir / f"{table.stem}{suffix}"
        write_text(path, render(table))
        paths.append(path)
    return paths
