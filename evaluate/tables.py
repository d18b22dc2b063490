"""Tables from the ledger alone (`results/tables/`): CSV, Markdown and LaTeX of the same rows.

Three kinds (DESIGN section 7), all built from verified records (`evaluate.ledger.read_records`), never features:

- `run-{run}_{dataset}`: for each run and each `eval` data set, one row per epoch (then checkpoint), one column
  per measure, cells "value [lo, hi]" (2 decimals; "value" alone for a measure without an interval).
- `compare-{baseline}_{dataset}`: for each `eval` data set, every checkpoint minus the baseline checkpoint: paired
  bootstrap differences (`evaluate.scores.paired_bootstrap_diff`) over the images both records scored (aligned by
  image id), for measures with a reducer; the baseline's own row is 0 [0, 0] by construction.
- `sweep`: the decoder sweep, one row per setting with mean Jaccard and its interval, from a sweep CSV with columns
  `setting`, `value` (or `jaccard`), `ci_low`, `ci_high` (any of `checkpoint`, `dataset`, `n_images` are kept),
  sorted best first within each checkpoint and data set.

A measure name that occurs in records of more than one kind becomes `{kind}:{measure}` in column headers.
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Sequence

from evaluate.atomic import write_text
from evaluate.ledger import LedgerError
from evaluate.ledger.records import read_records
from evaluate.measures import PERCENT, stats_array

MEASURE_ORDER = ("jaccard", "corloc", "ap", "ap50", "ar10", "miou", "patch_accuracy")
LATEX_SPECIALS = {
    "\\": r"\textbackslash{}", "_": r"\_", "&": r"\&", "%": r"\%", "#": r"\#", "$": r"\$", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}


# ----------------------------------------------------------------------------------------------- formatters


def fmt_number(value: float | None, digits: int = 2) -> str:
    """`value` with `digits` decimals; "" for None; never "-0.00"."""
    if value is None:
        return ""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def fmt_interval(value: float | None, lo: float | None, hi: float | None, digits: int = 2) -> str:
    """"v [lo, hi]", or "v" when there is no interval, or "" when there is no value."""
    if value is None:
        return ""
    if lo is None or hi is None:
        return fmt_number(value, digits)
    return f"{fmt_number(value, digits)} [{fmt_number(lo, digits)}, {fmt_number(hi, digits)}]"


def to_csv(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def to_markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    out = [line(header), "|" + "|".join("---" for _ in header) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out) + "\n"


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIALS.get(ch, ch) for ch in str(text))


def to_latex(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain `tabular` (first column left, the rest right aligned) with \\hline rules; no packages needed."""
    spec = "l" + "r" * (len(header) - 1)
    out = [f"\\begin{{tabular}}{{{spec}}}", "\\hline",
           " & ".join(latex_escape(h) for h in header) + " \\\\", "\\hline"]
    out += [" & ".join(latex_escape(c) for c in r) + " \\\\" for r in rows]
    out += ["\\hline", "\\end{tabular}"]
    return "\n".join(out) + "\n"


def write_table(out_dir: str | os.PathLike, stem: str, header: Sequence[str],
                rows: Sequence[Sequence[str]]) -> list[Path]:
    """Write `{stem}.csv`, `{stem}.md` and `{stem}.tex` atomically; return the three paths."""
    out_dir = Path(out_dir)
    paths = []
    for suffix, render in ((".csv", to_csv), (".md", to_markdown), (".tex", to_latex)):
        path = out_dir / f"{stem}{suffix}"
        write_text(path, render(header, rows))
        paths.append(path)
    return paths


# --------------------------------------------------------------------------------------------------- tables


def _measure_sort_key(name: str) -> tuple:
    base = name.split(":", 1)[-1]
    return (MEASURE_ORDER.index(base) if base in MEASURE_ORDER else len(MEASURE_ORDER), base, name)


def _column_names(records: Sequence[dict]) -> dict[tuple[str, str], str]:
    """(kind, measure) -> column header: the measure, or `kind:measure` when several kinds report it."""
    kinds: dict[str, set[str]] = {}
    for rec in records:
        for m in rec["measures"]:
            kinds.setdefault(m["measure"], set()).add(rec["kind"])
    return {(k, name): (name if len(ks) == 1 else f"{k}:{name}") for name, ks in kinds.items() for k in ks}


def _run_name(rec: dict) -> str:
    return rec["run"] if rec["run"] else rec["checkpoint"]


def _index_measures(records: Sequence[dict], columns: dict) -> dict[tuple[str, str, str], tuple[dict, dict]]:
    """(checkpoint, dataset, column) -> (record, measure); a duplicate is a LedgerError."""
    out: dict[tuple[str, str, str], tuple[dict, dict]] = {}
    for rec in records:
        for m in rec["measures"]:
            key = (rec["checkpoint"], rec["dataset"], columns[(rec["kind"], m["measure"])])
            if key in out:
                raise LedgerError(
                    f"two records report {key[2]} for checkpoint {key[0]} on {key[1]} (record_sha256 "
                    f"{out[key][0]['record_sha256'][:12]}… and {rec['record_sha256'][:12]}…); tables need one"
                )
            out[key] = (rec, m)
    return out


def run_tables(records: Sequence[dict]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per run and eval data set: (stem, header, rows); rows sorted by epoch (None last), then checkpoint."""
    evals = [r for r in records if r["role"] == "eval"]
    columns = _column_names(evals)
    index = _index_measures(evals, columns)
    tables = []
    for run in sorted({_run_name(r) for r in evals}):
        for dataset in sorted({r["dataset"] for r in evals if _run_name(r) == run}):
            recs = [r for r in evals if _run_name(r) == run and r["dataset"] == dataset]
            cols = sorted({columns[(r["kind"], m["measure"])] for r in recs for m in r["measures"]},
                          key=_measure_sort_key)
            ckpts = sorted({(r["epoch"] is None, r["epoch"] or 0, r["checkpoint"]) for r in recs})
            rows = []
            for *_, ckpt in ckpts:
                epoch = next(r["epoch"] for r in recs if r["checkpoint"] == ckpt)
                cells = []
                for col in cols:
                    hit = index.get((ckpt, dataset, col))
                    cells.append("" if hit is None else
                                 fmt_interval(hit[1]["value"], hit[1]["ci_low"], hit[1]["ci_high"]))
                rows.append(["" if epoch is None else str(epoch), ckpt, *cells])
            tables.append((f"run-{run}_{dataset}", ["epoch", "checkpoint", *cols], rows))
    return tables


def _percent(x: float) -> float | None:
    """PERCENT x `x`; None where the bootstrap left it undefined (NaN)."""
    return None if not math.isfinite(float(x)) else PERCENT * float(x)


def paired_difference(measure_a: dict, measure_b: dict, *, resamples: int,
                      seed: int) -> tuple[float | None, float | None, float | None, int]:
    """(diff, lo, hi, n) in percent points: measure a minus measure b over the images both scored, paired by
    image id (`evaluate.scores.paired_bootstrap_diff` on the per-image statistics, times PERCENT).

    Both must have the same reducer; miou counts of both use one common class count.
    """
    from evaluate.scores import paired_bootstrap_diff  # noqa: PLC0415

    reducer = measure_a["reducer"]
    if reducer is None or reducer != measure_b["reducer"]:
        raise LedgerError(f"{measure_a['measure']}: cannot pair reducers {reducer!r} and {measure_b['reducer']!r}")
    pos_b = {int(i): k for k, i in enumerate(measure_b["image_ids"])}
    pairs = [(k, pos_b[int(i)]) for k, i in enumerate(measure_a["image_ids"]) if int(i) in pos_b]
    if not pairs:
        raise LedgerError(f"{measure_a['measure']}: the two records share no image ids, nothing to pair")
    per_a = [measure_a["per_image"][k] for k, _ in pairs]
    per_b = [measure_b["per_image"][k] for _, k in pairs]
    n_classes = None
    if reducer == "miou":
        labels = [max(int(t), int(p)) for per in (per_a, per_b) for entries in per for t, p, _ in entries]
        n_classes = max(labels) + 1 if labels else 1
    stats_a, name = stats_array(per_a, reducer, n_classes)
    stats_b, _ = stats_array(per_b, reducer, n_classes)
    diff, lo, hi = paired_bootstrap_diff(stats_a, stats_b, name, resamples=resamples, seed=seed)
    return _percent(diff), _percent(lo), _percent(hi), len(pairs)


def compare_tables(records: Sequence[dict], compare_to: str, *, resamples: int,
                   seed: int) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per eval data set: every checkpoint minus `compare_to`, paired bootstrap "diff [lo, hi]" per measure."""
    evals = [r for r in records if r["role"] == "eval"]
    if not any(r["checkpoint"] == compare_to for r in evals):
        raise LedgerError(f"compare_to checkpoint {compare_to!r} has no eval records in the ledger "
                          f"(checkpoints there: {sorted({r['checkpoint'] for r in evals})})")
    columns = _column_names(evals)
    index = _index_measures(evals, columns)
    tables = []
    for dataset in sorted({r["dataset"] for r in evals if r["checkpoint"] == compare_to}):
        base_cols = sorted(
            {col for (ck, ds, col), (_, m) in index.items()
             if ck == compare_to and ds == dataset and m["reducer"] is not None},
            key=_measure_sort_key,
        )
        recs = [r for r in evals if r["dataset"] == dataset]
        ckpts = sorted({(_run_name(r), r["epoch"] is None, r["epoch"] or 0, r["checkpoint"]) for r in recs})
        rows = []
        for run, _, _, ckpt in ckpts:
            epoch = next(r["epoch"] for r in recs if r["checkpoint"] == ckpt)
            cells = []
            for col in base_cols:
                hit = index.get((ckpt, dataset, col))
                if hit is None:
                    cells.append("")
                    continue
                diff, lo, hi, _ = paired_difference(hit[1], index[(compare_to, dataset, col)][1],
                                                    resamples=resamples, seed=seed)
                cells.append(fmt_interval(diff, lo, hi))
            rows.append([run, "" if epoch is None else str(epoch), ckpt, *cells])
        header = ["run", "epoch", "checkpoint", *[f"{c} - {compare_to}" for c in base_cols]]
        tables.append((f"compare-{compare_to}_{dataset}", header, rows))
    return tables


def sweep_table(sweep_csv: str | os.PathLike) -> tuple[str, list[str], list[list[str]]]:
    """The decoder sweep as a table: settings best first (mean Jaccard, then setting name)."""
    path = Path(sweep_csv)
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            fieldnames = reader.fieldnames or []
            entries = list(reader)
    except OSError as exc:
        raise LedgerError(f"{path}: cannot read the sweep CSV ({exc})") from exc
    value_col = "value" if "value" in fieldnames else "jaccard" if "jaccard" in fieldnames else None
    missing = [c for c in ("setting", "ci_low", "ci_high") if c not in fieldnames] + ([] if value_col else ["value"])
    if missing:
        raise LedgerError(f"{path}: sweep CSV lacks column(s) {', '.join(missing)} (has {fieldnames})")
    keys = [c for c in ("checkpoint", "dataset") if c in fieldnames]

    def num(entry: dict, col: str, line: int) -> float | None:
        text = entry[col].strip()
        if text == "":
            return None
        try:
            return float(text)
        except ValueError:
            raise LedgerError(f"{path}: line {line} column {col}: {text!r} is not a number") from None

    parsed = []
    for line, e in enumerate(entries, start=2):
        v, lo, hi = num(e, value_col, line), num(e, "ci_low", line), num(e, "ci_high", line)
        parsed.append(([e[k] for k in keys], e["setting"], v, lo, hi, e.get("n_images", "")))
    parsed.sort(key=lambda p: (p[0], p[2] is None, -(p[2] or 0.0), p[1]))
    header = [*keys, "setting", "jaccard"] + (["n_images"] if "n_images" in fieldnames else [])
    rows = [[*k, s, fmt_interval(v, lo, hi)] + ([n] if "n_images" in fieldnames else [])
            for k, s, v, lo, hi, n in parsed]
    return "sweep", header, rows


def build_tables(ledger_dir: str | os.PathLike, out_dir: str | os.PathLike, compare_to: str | None, *,
                 resamples: int, seed: int, sweep_csv: str | os.PathLike | None = None) -> list[Path]:
    """Every table from `{ledger_dir}/records` (and the sweep CSV when given) into `out_dir`; return the files.

    resamples, seed: the run's bootstrap (config.yaml `bootstrap`), for the paired differences.
    """
    records = read_records(Path(ledger_dir) / "records")
    tables = run_tables(records)
    if compare_to is not None:
        tables += compare_tables(records, compare_to, resamples=resamples, seed=seed)
    if sweep_csv is not None:
        tables.append(sweep_table(sweep_csv))
    files: list[Path] = []
    for stem, header, rows in tables:
        files += write_table(out_dir, stem, header, rows)
    return files
