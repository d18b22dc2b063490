"""Tables from the ledger alone (`results/tables/`): CSV, Markdown, LaTeX and an HTML fragment of each table.

Every table is built from verified records (`evaluate.ledger.read_records`), never features, as a `Table`
(`evaluate.outputs.table_model`: typed columns, cells holding numbers, the four renderings and the bold best).

Tables (per `eval` data set unless said):
- `checkpoints_{dataset}`: one row per checkpoint (run, epoch, architecture where the records have it,
  checkpoint), one column per measure, value [95% interval].
- `run-{run}_{dataset}`: the same, one table per run, one row per epoch.
- `compare-{baseline}_{dataset}`: every checkpoint minus the baseline checkpoint: paired bootstrap differences
  (`paired_difference`) over the images both records scored, for measures with per-image statistics.
- `sweep`: the decoder sweep on the select data set, best setting first (`sweep_table`).
- the views of one reading (per category, per probe class, per video sequence, the gallery, per attention head):
  `evaluate.outputs.views`.
- `agreement_{dataset}`: Kendall's tau between the checkpoints' rankings for every pair of measures with its 95%
  bootstrap interval over images (`evaluate.scores.agreement`).

A measure name that occurs in records of more than one kind becomes `{kind}:{measure}` in column keys.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Sequence

from evaluate.ledger import LedgerError
from evaluate.ledger.records import read_records
from evaluate.outputs import views
from evaluate.outputs.rows import (
    ABSENT,
    INTERVAL_TEXT,
    absent_of,
    checkpoint_rows,
    describe_dataset,
    identity_columns,
    missing_cell,
    percent,
    run_name,
    unit,
)
from evaluate.outputs.table_model import (
    Cell,
    Column,
    Table,
    measure_column,
    text,
    text_column,
    write_table,
)
from evaluate.plumbing.paths import RECORDS_IN_LEDGER
from evaluate.scores import catalogue
from evaluate.scores.measures import PERCENT, measure_scale, stats_array

TAU_DIGITS = 2  # decimals of Kendall's tau


# --------------------------------------------------------------------------------------------------- tables


def _measure_sort_key(name: str) -> tuple:
    base = name.split(":", 1)[-1]
    return (catalogue.place(base), base, name)


def _column_names(records: Sequence[dict]) -> dict[tuple[str, str], str]:
    """(kind, measure) -> column key: the measure, or `kind:measure` when several kinds report it."""
    kinds: dict[str, set[str]] = {}
    for rec in records:
        for m in rec["measures"]:
            kinds.setdefault(m["measure"], set()).add(rec["kind"])
    return {(k, name): (name if len(ks) == 1 else f"{k}:{name}") for name, ks in kinds.items() for k in ks}


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


def eval_measures(records: Sequence[dict], dataset: str) -> tuple[list[str], dict[str, dict[str, dict]]]:
    """The eval measures of one data set: (column keys in the catalogue's order, {column: {checkpoint: measure}})."""
    evals = [r for r in records if r["role"] == "eval"]
    columns = _column_names(evals)
    out: dict[str, dict[str, dict]] = {}
    for (ckpt, ds, col), (_, m) in _index_measures(evals, columns).items():
        if ds == dataset:
            out.setdefault(col, {})[ckpt] = m
    return sorted(out, key=_measure_sort_key), out


def _units(recs: Sequence[dict]) -> str:
    """"Percent", and the measures in another unit (the attention entropy, in nats) where the records hold any."""
    other = sorted({m["measure"] for r in recs for m in r["measures"] if measure_scale(m) != PERCENT})
    names = ", ".join(catalogue.plain(x) for x in other)
    return f"Percent ({names} in nats)" if other else "Percent"


def _absent_note(recs: Sequence[dict]) -> str:
    """What a dash means, per reason a record gives for a reading its network lacks, with the checkpoints."""
    reasons: dict[str, set[str]] = {}
    for r in recs:
        absent = absent_of(r)
        if absent:
            reasons.setdefault(absent["reason"], set()).add(r["checkpoint"])
    return "".join(f" {ABSENT.text}: {reason} ({', '.join(sorted(c))})." for reason, c in sorted(reasons.items()))


def _score_caption(what: str, recs: Sequence[dict], dataset: str, best: str = "best per column in bold") -> str:
    interval = INTERVAL_TEXT.replace("over images", f"over {unit(recs)}")
    return f"{what} on {describe_dataset(recs, dataset)} {_units(recs)}, {interval}; {best}.{_absent_note(recs)}"


def checkpoint_tables(records: Sequence[dict]) -> list[Table]:
    """Per eval data set: every checkpoint as a row, every measure as a column (`checkpoints_{dataset}`)."""
    evals = [r for r in records if r["role"] == "eval"]
    columns = _column_names(evals)
    index = _index_measures(evals, columns)
    tables = []
    for dataset in sorted({r["dataset"] for r in evals}):
        recs = [r for r in evals if r["dataset"] == dataset]
        cols = sorted({columns[(r["kind"], m["measure"])] for r in recs for m in r["measures"]},
                      key=_measure_sort_key)
        ids = identity_columns(recs, with_run=True)
        table = Table(f"checkpoints_{dataset}", _score_caption("Every checkpoint", recs, dataset),
                      [text_column(k) for k in ids] + [measure_column(c) for c in cols])
        table.rows = checkpoint_rows(recs, index, dataset, cols, ids)
        add_published_rows(table, recs, cols, ids)
        tables.append(table)
    return tables


def add_published_rows(table: Table, recs: Sequence[dict], cols: Sequence[str], ids: Sequence[str]) -> None:
    """Append the published rows (evaluate/datasets/benchmarks.yaml) for the records' architectures on the data set's
    benchmark (a discovery record's `benchmark`), set apart at the end (`Table.apart`: never bold), the sources
    in the caption. A row fills the column of its measure whose kind is its method's name in lower case (the box
    decoder that reproduces it), or the bare measure's column."""
    from evaluate.datasets.benchmarks import published_rows

    benchmark = next((r.get("benchmark") for r in recs if r.get("benchmark")), None)
    if benchmark is None:
        return
    sources: list[str] = []
    for architecture in sorted({r.get("architecture") for r in recs if r.get("architecture")}):
        by_method: dict[str, dict[str, float]] = {}
        for row in published_rows(architecture, benchmark):
            for col in cols:
                kind, _, base = col.rpartition(":")
                if base == row.measure and kind in ("", row.method.lower().replace(" ", "")):
                    by_method.setdefault(row.method, {})[col] = row.value
                    if row.source not in sources:
                        sources.append(row.source)
        for method, values in by_method.items():
            identity = {"run": f"{method} (published)", "epoch": None, "architecture": architecture,
                        "network": "released", "checkpoint": "published"}
            table.rows.append([text(identity[k]) for k in ids] + [Cell(values.get(c)) for c in cols])
            table.apart += 1
    if sources:
        table.caption += f" Rows marked (published) are the authors' numbers on {benchmark}, not measured here: " \
                         f"{'; '.join(sources)}."


def protocol_table(records: Sequence[dict]) -> list[Table]:
    """`published-protocols`: the published numbers of other protocols (evaluate/datasets/benchmarks.yaml rows with a
    `protocol`) for the architectures the records scored, one row each: never a column of a measured number, since
    no one of them was measured the way this tool measures. None where there is none."""
    from evaluate.datasets.benchmarks import load_published, protocol_rows

    rows = protocol_rows({r["architecture"] for r in records if r.get("architecture")})
    if not rows:
        return []
    _, benchmarks = load_published()
    sources = list(dict.fromkeys(r.source for r in rows))
    table = Table("published-protocols", "Published numbers of other protocols for the architectures scored here, "
                  "set apart: none was measured as this tool measures, so none stands beside a measured column. "
                  f"Sources: {'; '.join(sources)}.",
                  [text_column(k) for k in ("method", "architecture", "benchmark", "measure", "protocol")]
                  + [measure_column("value", best=False)])
    for row in rows:  # the value as its source prints it (an RMSE of 0.403 is no percent of one decimal)
        table.rows.append([text(row.method), text(row.architecture), text(benchmarks[row.benchmark]["text"]),
                           text(catalogue.plain(row.measure)), text(row.protocol), text(row.value)])
    return [table]


def run_tables(records: Sequence[dict]) -> list[Table]:
    """Per run and eval data set (`run-{run}_{dataset}`): rows sorted by epoch (None last), then checkpoint."""
    evals = [r for r in records if r["role"] == "eval"]
    columns = _column_names(evals)
    index = _index_measures(evals, columns)
    tables = []
    for run in sorted({run_name(r) for r in evals}):
        for dataset in sorted({r["dataset"] for r in evals if run_name(r) == run}):
            recs = [r for r in evals if run_name(r) == run and r["dataset"] == dataset]
            cols = sorted({columns[(r["kind"], m["measure"])] for r in recs for m in r["measures"]},
                          key=_measure_sort_key)
            ids = identity_columns(recs, with_run=False)
            table = Table(f"run-{run}_{dataset}", _score_caption(f"Run {run} by epoch", recs, dataset),
                          [text_column(k) for k in ids] + [measure_column(c) for c in cols])
            table.rows = checkpoint_rows(recs, index, dataset, cols, ids)
            tables.append(table)
    return tables


def paired_difference(measure_a: dict, measure_b: dict, *, resamples: int,
                      seed: int) -> tuple[float | None, float | None, float | None, int]:
    """(diff, lo, hi, n) in percent points (in the measures' unit, `measure_scale`: nats for the attention
    entropy): measure a minus measure b over the images both scored, paired by image id
    (`evaluate.scores.bootstrap.paired_bootstrap_diff` on the per-image statistics, times the scale).

    Both must have the same reducer; miou counts of both use one common class count.
    """
    from evaluate.scores.bootstrap import paired_bootstrap_diff  # noqa: PLC0415

    reducer = measure_a["reducer"]
    if reducer is None or reducer != measure_b["reducer"]:
        raise LedgerError(f"{measure_a['measure']}: cannot pair reducers {reducer!r} and {measure_b['reducer']!r}")
    scale = measure_scale(measure_a)
    if scale != measure_scale(measure_b):
        raise LedgerError(f"{measure_a['measure']}: cannot pair scales {scale} and {measure_scale(measure_b)}")
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
    return percent(diff, scale), percent(lo, scale), percent(hi, scale), len(pairs)


def compare_tables(records: Sequence[dict], compare_to: str, *, resamples: int,
                   seed: int) -> list[Table]:
    """Per eval data set: every checkpoint minus `compare_to`, paired bootstrap diff [lo, hi] per measure."""
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
        ids = identity_columns(recs, with_run=True)
        caption = _score_caption(
            f"Each checkpoint minus {compare_to} (paired bootstrap over the images both scored)", recs, dataset,
            "largest difference per column in bold")
        table = Table(f"compare-{compare_to}_{dataset}", caption,
                      [text_column(k) for k in ids] + [measure_column(c, suffix=f" - {compare_to}")
                                                       for c in base_cols])
        for row in checkpoint_rows(recs, {}, dataset, [], ids):
            ckpt = row[ids.index("checkpoint")].text
            cells = []
            for col in base_cols:
                hit = index.get((ckpt, dataset, col))
                if hit is None:
                    cells.append(missing_cell(recs, ckpt, dataset, col))
                    continue
                diff, lo, hi, _ = paired_difference(hit[1], index[(compare_to, dataset, col)][1],
                                                    resamples=resamples, seed=seed)
                cells.append(Cell(diff, lo, hi))
            table.rows.append(row + cells)
        tables.append(table)
    return tables


def sweep_table(sweep_csv: str | os.PathLike) -> Table:
    """The decoder sweep as a table: settings best first (mean Jaccard, then setting name); the best in bold."""
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
        text_ = entry[col].strip()
        if text_ == "":
            return None
        try:
            return float(text_)
        except ValueError:
            raise LedgerError(f"{path}: line {line} column {col}: {text_!r} is not a number") from None

    parsed = []
    for line, e in enumerate(entries, start=2):
        v, lo, hi = num(e, value_col, line), num(e, "ci_low", line), num(e, "ci_high", line)
        parsed.append(([e[k] for k in keys], e["setting"], v, lo, hi, e.get("n_images", "")))
    parsed.sort(key=lambda p: (p[0], p[2] is None, -(p[2] or 0.0), p[1]))
    where = sorted({" on ".join(k) for k, *_ in parsed if k})
    n_images = sorted({n for *_, n in parsed if n})
    caption = (f"Decoder sweep{' (' + '; '.join(where) + ')' if where else ''}"
               f"{', ' + '/'.join(n_images) + ' images' if n_images else ''}: mean Jaccard of every setting, best "
               f"first. Percent, {INTERVAL_TEXT}; the best (the selected setting) in bold.")
    has_n = "n_images" in fieldnames
    table = Table("sweep", caption, [text_column(k) for k in keys] + [text_column("setting"), measure_column(
        "jaccard")] + ([text_column("n_images", "images")] if has_n else []))
    table.rows = [[*(text(x) for x in k), text(s), Cell(v, lo, hi)] + ([text(n)] if has_n else [])
                  for k, s, v, lo, hi, n in parsed]
    return table


def agreement_tables(records: Sequence[dict], *, resamples: int, seed: int) -> list[Table]:
    """Per eval data set: Kendall's tau of the checkpoints' rankings for every pair of measures."""
    from evaluate.scores.agreement import rank_agreement  # noqa: PLC0415

    evals = [r for r in records if r["role"] == "eval"]
    tables = []
    for dataset in sorted({r["dataset"] for r in evals}):
        order, measures = eval_measures(records, dataset)
        recs = [r for r in evals if r["dataset"] == dataset]
        caption = (f"Rank agreement on {describe_dataset(recs, dataset)} Kendall's tau-b between the checkpoints' "
                   "rankings under two measures, [95% bootstrap interval] from resampling the images both measures "
                   "scored for every checkpoint (the same draws for all checkpoints); AP, AP50 and AR@10 have no "
                   "per-image statistics, so their pairs show tau without an interval.")
        table = Table(f"agreement_{dataset}", caption,
                      [text_column("measure_a", "measure a"), text_column("measure_b", "measure b"),
                         text_column("n_checkpoints", "checkpoints"), text_column("n_images", "images"),
                         Column("kendall_tau", "Kendall tau", "Kendall $\\tau$", numeric=True, digits=TAU_DIGITS)])
        for entry in rank_agreement(measures, order, resamples=resamples, seed=seed):
            table.rows.append([
                *(Cell(text=measure_column(entry[k]).plain, latex=measure_column(entry[k]).latex)
                  for k in ("measure_a", "measure_b")),
                text(len(entry["checkpoints"])), text(entry["n_images"]),
                Cell(entry["tau"], entry["ci_low"], entry["ci_high"]),
            ])
        tables.append(table)
    return tables


def build_tables(ledger_dir: str | os.PathLike, out_dir: str | os.PathLike, compare_to: str | None, *,
                 resamples: int, seed: int, sweep_csv: str | os.PathLike | None = None,
                 gallery_images: int | None = None) -> list[Path]:
    """Every table from `{ledger_dir}/records` (and the sweep CSV when given) into `out_dir`; return the files.

    resamples, seed: the run's bootstrap (config.yaml `bootstrap`) for every interval drawn here;
    `gallery_images`: images at each end of the gallery table (None: no gallery table).
    """
    boot = {"resamples": resamples, "seed": seed}
    records = read_records(Path(ledger_dir) / RECORDS_IN_LEDGER)
    tables = checkpoint_tables(records) + run_tables(records)
    if compare_to is not None:
        tables += compare_tables(records, compare_to, **boot)
    if sweep_csv is not None:
        tables.append(sweep_table(sweep_csv))
    tables += views.category_tables(records, **boot) + views.probe_class_tables(records, **boot)
    tables += views.video_sequence_tables(records)
    if gallery_images is not None:
        tables += views.gallery_tables(records, int(gallery_images))
    tables += views.attention_head_tables(records) + views.attention_mask_tables(records)
    tables += agreement_tables(records, **boot) + protocol_table(records)
    files: list[Path] = []
    for table in tables:
        files += write_table(out_dir, table)
    return files
