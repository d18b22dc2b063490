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
- `categories_{dataset}`: per-category decoder Jaccard (`evaluate.scores.masks.per_category_mean` over the images
  holding each category, from the decoder record's `image_categories`), categories as rows, checkpoints as
  columns.
- `probe-classes_{dataset}`: per-class probe IoU (`evaluate.probe.scores.per_class_iou` from the probe record's
  confusions and `class_names`).
- `gallery_{dataset}`: each checkpoint's `gallery_images` worst and best images by Jaccard
  (`evaluate.scores.masks.extremes`), with their categories.
- `agreement_{dataset}`: Kendall's tau between the checkpoints' rankings for every pair of measures with its 95%
  bootstrap interval over images (`evaluate.scores.agreement`).

A measure name that occurs in records of more than one kind becomes `{kind}:{measure}` in column keys.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Sequence

from evaluate.ledger import LedgerError
from evaluate.ledger.records import read_records
from evaluate.plumbing.paths import RECORDS_IN_LEDGER
from evaluate.outputs.table_model import (
    DESCRIPTIVE,
    DISPLAY_NAMES,
    Cell,
    Column,
    Table,
    latex_escape,
    measure_column,
    text,
    text_column,
    write_table,
)
from evaluate.scores.measures import PERCENT, measure_scale, stats_array

MEASURE_ORDER = ("jaccard", "corloc", "ap", "ap50", "ar10", "probe_miou", "probe_accuracy", "attention_spread",
                 "attention_entropy", "jf_mean", "j_mean", "f_mean", "j_recall", "f_recall", "j_decay", "f_decay")
ABSENT = Cell(text="–", latex="--")  # a reading the checkpoint's network does not have (XCiT's attention spread)
TAU_DIGITS = 2  # decimals of Kendall's tau
INTERVAL_TEXT = "value [95% bootstrap interval over images]"


# --------------------------------------------------------------------------------------------------- tables


def _measure_sort_key(name: str) -> tuple:
    base = name.split(":", 1)[-1]
    return (MEASURE_ORDER.index(base) if base in MEASURE_ORDER else len(MEASURE_ORDER), base, name)


def _column_names(records: Sequence[dict]) -> dict[tuple[str, str], str]:
    """(kind, measure) -> column key: the measure, or `kind:measure` when several kinds report it."""
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


def eval_measures(records: Sequence[dict], dataset: str) -> tuple[list[str], dict[str, dict[str, dict]]]:
    """The eval measures of one data set: (column keys in MEASURE_ORDER, {column: {checkpoint: measure}})."""
    evals = [r for r in records if r["role"] == "eval"]
    columns = _column_names(evals)
    out: dict[str, dict[str, dict]] = {}
    for (ckpt, ds, col), (_, m) in _index_measures(evals, columns).items():
        if ds == dataset:
            out.setdefault(col, {})[ckpt] = m
    return sorted(out, key=_measure_sort_key), out


def _architecture(recs: Sequence[dict], checkpoint: str) -> str:
    return next((str(r["architecture"]) for r in recs if r["checkpoint"] == checkpoint and r.get("architecture")),
                "")


def describe_dataset(recs: Sequence[dict], dataset: str) -> str:
    """Caption text: the data set, its number of images (and how many a measure left out), the decoder and
    probe settings of these records, and the network precision of their features unless all are float32 (a table
    that mixes precisions lists each with its checkpoints)."""
    measures = [m for r in recs for m in r["measures"]]
    n = max((m["n_images"] + m["n_left_out"] for m in measures), default=0)
    parts = [f"{dataset}, {n} {_unit(recs)}"]
    left = sorted({(m["n_images"], m["measure"]) for m in measures if m["n_left_out"]})
    for scored in sorted({s for s, _ in left}):
        names = ", ".join(DISPLAY_NAMES.get(x, (x,))[0] for s, x in left if s == scored)
        parts.append(f"{names} over the {scored} with non-crowd ground truth")
    text_ = "; ".join(parts) + "."
    for kind, noun in (("decoder", "Decoder setting"), ("probe", "Probe")):
        settings = sorted({r["setting"] for r in recs if r["kind"] == kind})
        if settings:
            text_ += f" {noun}: {'; '.join(settings)}."
    return text_ + _precision_note(recs)


def _precision_note(recs: Sequence[dict]) -> str:
    """"" when every record's features ran in float32 (the reference); else the precision, or, where the records
    mix precisions, each precision with its checkpoints. A record older than the field counts as float32, the one
    precision of the CPU before `features.precision` (`features.autocast` was an opt-in switch of CUDA)."""
    by_precision: dict[str, set[str]] = {}
    for r in recs:
        by_precision.setdefault(r.get("precision") or "float32", set()).add(r["checkpoint"])
    if set(by_precision) <= {"float32"}:
        return ""
    if len(by_precision) == 1:
        return f" Network precision: {next(iter(by_precision))}."
    listed = "; ".join(f"{p} ({', '.join(sorted(c))})" for p, c in sorted(by_precision.items()))
    return f" Mixed network precisions: {listed}."


def _unit(recs: Sequence[dict]) -> str:
    """What the records' intervals resample: "sequences" for video records (§12), else "images"."""
    return "sequences" if recs and all(r["kind"] == "video" for r in recs) else "images"


def _units(recs: Sequence[dict]) -> str:
    """"Percent", and the measures in another unit (the attention entropy, in nats) where the records hold any."""
    other = sorted({m["measure"] for r in recs for m in r["measures"] if measure_scale(m) != PERCENT})
    names = ", ".join(DISPLAY_NAMES.get(x, (x,))[0] for x in other)
    return f"Percent ({names} in nats; {ABSENT.text}: the network has no attention over patches)" if other else \
        "Percent"


def _score_caption(what: str, recs: Sequence[dict], dataset: str, best: str = "best per column in bold") -> str:
    interval = INTERVAL_TEXT.replace("over images", f"over {_unit(recs)}")
    return f"{what} on {describe_dataset(recs, dataset)} {_units(recs)}, {interval}; {best}."


def _missing(recs: Sequence[dict], checkpoint: str, dataset: str, col: str) -> Cell:
    """The cell of a measure a checkpoint lacks: a dash where its record says the reading is absent, else empty."""
    absent = any(r.get("attention_absent") for r in recs if r["checkpoint"] == checkpoint and r["dataset"] == dataset)
    return ABSENT if absent and col.split(":", 1)[-1] in DESCRIPTIVE else Cell()


def _checkpoint_rows(recs: Sequence[dict], index: dict, dataset: str, cols: Sequence[str],
                     ids: Sequence[str]) -> list[list[Cell]]:
    """Rows of checkpoint tables: identity cells (`ids` among run, epoch, architecture, checkpoint), then one
    value [lo, hi] cell per measure column; sorted by run, epoch (None last), checkpoint."""
    order = sorted({(_run_name(r), r["epoch"] is None, r["epoch"] or 0, r["checkpoint"]) for r in recs})
    rows = []
    for run, _, _, ckpt in order:
        epoch = next(r["epoch"] for r in recs if r["checkpoint"] == ckpt)
        identity = {"run": run, "epoch": epoch, "architecture": _architecture(recs, ckpt), "checkpoint": ckpt}
        cells = [text(identity[k]) for k in ids]
        for col in cols:
            hit = index.get((ckpt, dataset, col))
            cells.append(_missing(recs, ckpt, dataset, col) if hit is None
                         else Cell(hit[1]["value"], hit[1]["ci_low"], hit[1]["ci_high"]))
        rows.append(cells)
    return rows


def _identity(recs: Sequence[dict], with_run: bool) -> list[str]:
    ids = (["run"] if with_run else []) + ["epoch"]
    if any(r.get("architecture") for r in recs):
        ids.append("architecture")
    return ids + ["checkpoint"]


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
        ids = _identity(recs, with_run=True)
        table = Table(f"checkpoints_{dataset}", _score_caption("Every checkpoint", recs, dataset),
                      [text_column(k) for k in ids] + [measure_column(c) for c in cols])
        table.rows = _checkpoint_rows(recs, index, dataset, cols, ids)
        tables.append(table)
    return tables


def run_tables(records: Sequence[dict]) -> list[Table]:
    """Per run and eval data set (`run-{run}_{dataset}`): rows sorted by epoch (None last), then checkpoint."""
    evals = [r for r in records if r["role"] == "eval"]
    columns = _column_names(evals)
    index = _index_measures(evals, columns)
    tables = []
    for run in sorted({_run_name(r) for r in evals}):
        for dataset in sorted({r["dataset"] for r in evals if _run_name(r) == run}):
            recs = [r for r in evals if _run_name(r) == run and r["dataset"] == dataset]
            cols = sorted({columns[(r["kind"], m["measure"])] for r in recs for m in r["measures"]},
                          key=_measure_sort_key)
            ids = _identity(recs, with_run=False)
            table = Table(f"run-{run}_{dataset}", _score_caption(f"Run {run} by epoch", recs, dataset),
                          [text_column(k) for k in ids] + [measure_column(c) for c in cols])
            table.rows = _checkpoint_rows(recs, index, dataset, cols, ids)
            tables.append(table)
    return tables


def _percent(x: float, scale: float = PERCENT) -> float | None:
    """`scale` (PERCENT unless a measure's unit is another: `measure_scale`) x `x`; None where the bootstrap left
    it undefined (NaN)."""
    return None if not math.isfinite(float(x)) else scale * float(x)


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
    return _percent(diff, scale), _percent(lo, scale), _percent(hi, scale), len(pairs)


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
        ids = _identity(recs, with_run=True)
        caption = _score_caption(
            f"Each checkpoint minus {compare_to} (paired bootstrap over the images both scored)", recs, dataset,
            "largest difference per column in bold")
        table = Table(f"compare-{compare_to}_{dataset}", caption,
                      [text_column(k) for k in ids] + [measure_column(c, suffix=f" - {compare_to}")
                                                       for c in base_cols])
        for row in _checkpoint_rows(recs, {}, dataset, [], ids):
            ckpt = row[ids.index("checkpoint")].text
            cells = []
            for col in base_cols:
                hit = index.get((ckpt, dataset, col))
                if hit is None:
                    cells.append(_missing(recs, ckpt, dataset, col))
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


def _records_of(records: Sequence[dict], kind: str, field_name: str) -> dict[str, list[dict]]:
    """Eval records of `kind` holding `field_name`, grouped by data set, sorted by checkpoint."""
    out: dict[str, list[dict]] = {}
    for rec in sorted(records, key=lambda r: r["checkpoint"]):
        if rec["role"] == "eval" and rec["kind"] == kind and rec.get(field_name) is not None:
            out.setdefault(rec["dataset"], []).append(rec)
    return out


def _measure(rec: dict, name: str) -> dict | None:
    return next((m for m in rec["measures"] if m["measure"] == name), None)


def category_tables(records: Sequence[dict], *, resamples: int, seed: int) -> list[Table]:
    """Per eval data set: decoder Jaccard per category (rows, by name) for every checkpoint (columns)."""
    tables = []
    for dataset, recs in sorted(_records_of(records, "decoder", "image_categories").items()):
        per: dict[str, dict[str, dict]] = {}
        for rec in recs:
            jac = _measure(rec, "jaccard")
            if jac is None:
                continue
            for entry in per_category_from_record(rec, jac, resamples=resamples, seed=seed):
                per.setdefault(entry["category"], {})[rec["checkpoint"]] = entry
        ckpts = [r["checkpoint"] for r in recs]
        caption = (f"Decoder Jaccard per category on {describe_dataset(recs, dataset)} An image counts for every "
                   f"category with a non-crowd instance in it. Percent, {INTERVAL_TEXT}; best checkpoint per "
                   "category in bold.")
        table = Table(f"categories_{dataset}", caption,
                      [text_column("category"), text_column("n_images", "images")]
                      + [Column(c, c, latex_escape(c), numeric=True, best=True) for c in ckpts], best_by="row")
        for name in sorted(per):
            entries = per[name]
            n = next(iter(entries.values()))["n_images"]
            table.rows.append([text(name), text(n)] + [
                Cell(*(None if entries.get(c) is None or entries[c][k] is None else entries[c][k]
                       for k in ("value", "ci_low", "ci_high"))) for c in ckpts])
        tables.append(table)
    return tables


def per_category_from_record(rec: dict, jaccard: dict, *, resamples: int, seed: int) -> list[dict]:
    """`evaluate.scores.masks.per_category_mean` of a decoder record's Jaccard, in percent (None where undefined)."""
    from evaluate.scores.masks import per_category_mean  # noqa: PLC0415

    out = per_category_mean(jaccard["image_ids"], jaccard["per_image"], rec["image_categories"],
                            resamples=resamples, seed=seed)
    return [{**e, **{k: _percent(e[k]) for k in ("value", "ci_low", "ci_high")}} for e in out]


def probe_class_tables(records: Sequence[dict], *, resamples: int, seed: int) -> list[Table]:
    """Per eval data set: probe IoU per class (rows, in label order) for every checkpoint (columns)."""
    from evaluate.probe.scores import per_class_iou  # noqa: PLC0415

    tables = []
    for dataset, recs in sorted(_records_of(records, "probe", "class_names").items()):
        names = recs[0]["class_names"]
        per: dict[str, list[dict]] = {}
        for rec in recs:
            miou = _measure(rec, "probe_miou")
            if rec["class_names"] != names:
                raise LedgerError(f"probe records on {dataset} name their classes differently ({rec['checkpoint']} "
                                  f"vs {recs[0]['checkpoint']}); per-class tables need one class list")
            if miou is not None:
                per[rec["checkpoint"]] = per_class_iou(miou["per_image"], len(names), resamples=resamples,
                                                       seed=seed)
        ckpts = list(per)
        caption = (f"Probe IoU per class on {describe_dataset(recs, dataset)} Images: those whose labels hold the "
                   f"class. Percent, {INTERVAL_TEXT}; best checkpoint per class in bold.")
        table = Table(f"probe-classes_{dataset}", caption,
                      [text_column("class"), text_column("n_images", "images")]
                      + [Column(c, c, latex_escape(c), numeric=True, best=True) for c in ckpts], best_by="row")
        for label, name in enumerate(names):
            first = per[ckpts[0]][label] if ckpts else {"n_images": ""}
            table.rows.append([text(name), text(first["n_images"])] + [
                Cell(*(None if per[c][label][k] is None else _percent(per[c][label][k])
                       for k in ("value", "ci_low", "ci_high"))) for c in ckpts])
        tables.append(table)
    return tables


def video_sequence_tables(records: Sequence[dict]) -> list[Table]:
    """Per video data set: J&F-Mean of each sequence (rows, in the records' order; the mean over its objects) for
    every checkpoint (columns), from the video records' `per_sequence`."""
    tables = []
    for dataset, recs in sorted(_records_of(records, "video", "per_sequence").items()):
        ckpts = [r["checkpoint"] for r in recs]
        rows = {c: {row["sequence"]: row for row in r["per_sequence"]} for c, r in zip(ckpts, recs)}
        names = list(dict.fromkeys(row["sequence"] for r in recs for row in r["per_sequence"]))
        caption = (f"J&F-Mean per sequence on {dataset}, {len(names)} sequences: the mean over the sequence's "
                   f"objects of (J + F) / 2. Setting: {'; '.join(sorted({r['setting'] for r in recs}))}. Percent; "
                   "best checkpoint per sequence in bold.")
        table = Table(f"video-sequences_{dataset}", caption,
                      [text_column("sequence"), text_column("objects")]
                      + [Column(c, c, latex_escape(c), numeric=True, best=True) for c in ckpts], best_by="row")
        for name in names:
            objects = next(rows[c][name]["objects"] for c in ckpts if name in rows[c])
            table.rows.append([text(name), text(objects)] + [
                Cell(rows[c][name]["jf_mean"] if name in rows[c] else None, None, None) for c in ckpts])
        tables.append(table)
    return tables


def gallery_picks(rec: dict, n: int) -> tuple[list[int], list[int]]:
    """(worst, best) image ids of a decoder record by per-image Jaccard (`evaluate.scores.masks.extremes`)."""
    from evaluate.scores.masks import extremes  # noqa: PLC0415

    jac = _measure(rec, "jaccard")
    if jac is None or not jac["image_ids"]:
        return [], []
    return extremes(jac["image_ids"], jac["per_image"], n)


def gallery_tables(records: Sequence[dict], n: int) -> list[Table]:
    """Per eval data set: each checkpoint's `n` worst then `n` best images by Jaccard, with their categories."""
    groups: dict[str, list[dict]] = {}
    for rec in sorted(records, key=lambda r: r["checkpoint"]):
        if rec["role"] == "eval" and rec["kind"] == "decoder" and _measure(rec, "jaccard") is not None:
            groups.setdefault(rec["dataset"], []).append(rec)
    tables = []
    for dataset, recs in sorted(groups.items()):
        caption = (f"The {n} worst and {n} best images by decoder Jaccard for each checkpoint on "
                   f"{describe_dataset(recs, dataset)} Per-image Jaccard in percent; ties go to the lower image id.")
        table = Table(f"gallery_{dataset}", caption,
                      [text_column("checkpoint"), text_column("end"), text_column("rank"),
                       text_column("image_id", "image"), measure_column("jaccard", best=False),
                       text_column("categories")])
        for rec in recs:
            jac = _measure(rec, "jaccard")
            value = {int(i): float(v) for i, v in zip(jac["image_ids"], jac["per_image"])}
            cats = {int(i): names for i, names in rec.get("image_categories") or []}
            worst, best = gallery_picks(rec, n)
            for end, ids in (("worst", worst), ("best", best)):
                for rank, image_id in enumerate(ids, start=1):
                    table.rows.append([text(rec["checkpoint"]), text(end), text(rank), text(image_id),
                                       Cell(PERCENT * value[image_id]), text(", ".join(cats.get(image_id, [])))])
        tables.append(table)
    return tables


def attention_records(records: Sequence[dict]) -> dict[str, list[dict]]:
    """The eval data sets' `attention` records (docs/design.md §13), grouped by data set, sorted by checkpoint."""
    out: dict[str, list[dict]] = {}
    for rec in sorted(records, key=lambda r: r["checkpoint"]):
        if rec["role"] == "eval" and rec["kind"] == "attention":
            out.setdefault(rec["dataset"], []).append(rec)
    return out


def attention_head_tables(records: Sequence[dict]) -> list[Table]:
    """Per eval data set (`attention-heads_{dataset}`): the last block's spread (percent of the patches) and
    entropy (nats) of every head, one row per checkpoint, from the records' `attention_tables`; a dash per head
    where the network has no attention over patches (XCiT)."""
    tables = []
    for dataset, recs in sorted(attention_records(records).items()):
        present = [r["attention_tables"] for r in recs if r.get("attention_tables")]
        if not present:
            continue
        heads, blocks = max(t["heads"] for t in present), max(t["blocks"] for t in present)
        n = max(m["n_images"] for r in recs for m in r["measures"])
        ids = _identity(recs, with_run=True)
        caption = (f"Attention of each head in block {blocks} (the last) on {dataset}, {n} images: the mean over "
                   "images and attention rows of the spread e^H / N (percent of the N patches) and of the entropy H "
                   f"(nats). {ABSENT.text}: the network has no attention over patches (XCiT).")
        table = Table(f"attention-heads_{dataset}", caption, [text_column(k) for k in ids] + [
            measure_column(f"{name}_h{h}", best=False) for name in ("attention_spread", "attention_entropy")
            for h in range(1, heads + 1)])
        for row in _checkpoint_rows(recs, {}, dataset, [], ids):
            ckpt = row[ids.index("checkpoint")].text
            found = next(r["attention_tables"] for r in recs if r["checkpoint"] == ckpt)
            if found is None:
                row += [ABSENT] * (2 * heads)
            else:
                row += [Cell(v) for name in ("attention_spread", "attention_entropy") for v in found[name][-1]]
            table.rows.append(row)
        tables.append(table)
    return tables


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
    tables += category_tables(records, **boot) + probe_class_tables(records, **boot)
    tables += video_sequence_tables(records)
    if gallery_images is not None:
        tables += gallery_tables(records, int(gallery_images))
    tables += attention_head_tables(records)
    tables += agreement_tables(records, **boot)
    files: list[Path] = []
    for table in tables:
        files += write_table(out_dir, table)
    return files
