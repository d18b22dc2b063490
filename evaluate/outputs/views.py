"""Views of one reading on an eval data set, built from the records alone (`results/tables/`), beside the score tables
of `evaluate.outputs.tables`:
- `categories_{dataset}`: per-category decoder Jaccard (`evaluate.scores.masks.per_category_mean` over the images
  holding each category, from the decoder record's `image_categories`), categories as rows, checkpoints as columns.
- `probe-classes_{dataset}`: per-class probe IoU (`evaluate.probe.scores.per_class_iou` from the probe record's
  confusions and `class_names`).
- `video-sequences_{dataset}`: each video sequence's J&F, J and F per checkpoint (§12).
- `gallery_{dataset}`: each checkpoint's `gallery_images` worst and best images by Jaccard
  (`evaluate.scores.masks.extremes`), with their categories.
- `attention-heads_{dataset}`: block 12's attention spread and entropy of every head, per checkpoint (§13).
- `attention-mask-heads_{dataset}`, `attention-mask-classes_{dataset}`: the class-token attention masks' Jaccard per
  head and per object class (§17).
"""

from __future__ import annotations

from typing import Sequence

from evaluate.ledger import LedgerError
from evaluate.outputs.table_model import Cell, Column, Table, latex_escape, measure_column, text, text_column
from evaluate.outputs.rows import ABSENT, INTERVAL_TEXT, checkpoint_rows, describe_dataset, identity_columns, percent
from evaluate.scores.measures import PERCENT


def _records_of(records: Sequence[dict], kind: str, field_name: str | None = None) -> dict[str, list[dict]]:
    """Eval records of `kind` (holding `field_name`, where given), grouped by data set, sorted by checkpoint."""
    out: dict[str, list[dict]] = {}
    for rec in sorted(records, key=lambda r: r["checkpoint"]):
        if rec["role"] == "eval" and rec["kind"] == kind and (field_name is None or rec.get(field_name) is not None):
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
    return [{**e, **{k: percent(e[k]) for k in ("value", "ci_low", "ci_high")}} for e in out]


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
                Cell(*(None if per[c][label][k] is None else percent(per[c][label][k])
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
    groups = _records_of([r for r in records if _measure(r, "jaccard") is not None], "decoder")
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
    return _records_of(records, "attention")


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
        ids = identity_columns(recs, with_run=True)
        caption = (f"Attention of each head in block {blocks} (the last) on {dataset}, {n} images: the mean over "
                   "images and attention rows of the spread e^H / N (percent of the N patches) and of the entropy H "
                   f"(nats). {ABSENT.text}: the network has no attention over patches (XCiT).")
        table = Table(f"attention-heads_{dataset}", caption, [text_column(k) for k in ids] + [
            measure_column(f"{name}_h{h}", best=False) for name in ("attention_spread", "attention_entropy")
            for h in range(1, heads + 1)])
        for row in checkpoint_rows(recs, {}, dataset, [], ids):
            ckpt = row[ids.index("checkpoint")].text
            found = next(r["attention_tables"] for r in recs if r["checkpoint"] == ckpt)
            if found is None:
                row += [ABSENT] * (2 * heads)
            else:
                row += [Cell(v) for name in ("attention_spread", "attention_entropy") for v in found[name][-1]]
            table.rows.append(row)
        tables.append(table)
    return tables


def attention_mask_tables(records: Sequence[dict]) -> list[Table]:
    """Per segmentation set (docs/design.md §17): `attention-mask-heads_{dataset}`, each head's mean over images of
    its mean Jaccard over the objects (percent), one row per checkpoint, a dash per head where the network has no
    class-token attention; and `attention-mask-classes_{dataset}`, the objects' best-head Jaccard per
    SegmentationClass index (percent, with the objects' number), classes as rows, checkpoints as columns: never the
    measure, a view of it."""
    tables = []
    for dataset, recs in sorted(_records_of(records, "attention_masks").items()):
        present = [r["head_jaccard"] for r in recs if r.get("head_jaccard")]
        if not present:
            continue
        heads = max(len(h) for h in present)
        ids = identity_columns(recs, with_run=True)
        caption = (f"Attention-mask Jaccard of each head on {describe_dataset(recs, dataset)} The mean over images "
                   "of the head's mean Jaccard over the objects, its mask keeping 60% of the last block's class-token "
                   f"attention. Percent. {ABSENT.text}: the network has no class-token attention.")
        table = Table(f"attention-mask-heads_{dataset}", caption, [text_column(k) for k in ids] + [
            measure_column(f"attention_mask_jaccard_h{h}", best=False) for h in range(1, heads + 1)])
        for row in checkpoint_rows(recs, {}, dataset, [], ids):
            ckpt = row[ids.index("checkpoint")].text
            found = next(r.get("head_jaccard") for r in recs if r["checkpoint"] == ckpt)
            row += [ABSENT] * heads if found is None else [Cell(v) for v in found] + [Cell()] * (heads - len(found))
            table.rows.append(row)
        tables.append(table)
        scored = [r for r in recs if r.get("class_jaccard")]
        ckpts = [r["checkpoint"] for r in scored]
        classes = sorted({int(c) for r in scored for c in r["class_jaccard"]})
        caption = (f"Best-head attention-mask Jaccard per object class on {describe_dataset(recs, dataset)} The "
                   "mean over the class's objects (the class most frequent under each object), percent; the objects' "
                   "number beside it. A view of the measure, never the measure; best checkpoint per class in bold.")
        table = Table(f"attention-mask-classes_{dataset}", caption,
                      [text_column("class"), text_column("objects")]
                      + [Column(c, c, latex_escape(c), numeric=True, best=True) for c in ckpts], best_by="row")
        for cls in classes:
            entries = [r["class_jaccard"].get(str(cls)) for r in scored]
            objects = next(e["objects"] for e in entries if e is not None)
            table.rows.append([text(cls), text(objects)]
                              + [Cell(None if e is None else e["value"]) for e in entries])
        tables.append(table)
    return tables
