"""The rows and caption parts that the ledger's tables (`evaluate.outputs.tables`) and the views of one reading
(`evaluate.outputs.views`) share: checkpoint rows, their identity columns, the dash of an absent reading, the
caption's description of a data set and the percent scaling of a cell.

It imports neither of those modules, so both can import it (docs/design.md §8: no import cycle).
"""

from __future__ import annotations

import math
from typing import Sequence

from evaluate.networks import REFERENCE_PRECISION, SEED_NETWORK
from evaluate.outputs.table_model import Cell, text
from evaluate.scores import catalogue
from evaluate.scores.measures import PERCENT

ABSENT = Cell(text="–", latex="--")  # a reading the checkpoint's network does not have (XCiT's attention spread)
INTERVAL_TEXT = "value [95% bootstrap interval over images]"


def run_name(rec: dict) -> str:
    return rec["run"] if rec["run"] else rec["checkpoint"]


def _architecture(recs: Sequence[dict], checkpoint: str) -> str:
    return next((str(r["architecture"]) for r in recs if r["checkpoint"] == checkpoint and r.get("architecture")),
                "")


def network_text(rec: dict) -> str:
    """How a record's network ran, in words: "patch 14, 384 wide, 4 registers, released" (docs/design.md §11); ""
    for a record older than the network fields."""
    if rec.get("patch") is None:
        return ""
    registers = f", {rec['registers']} registers" if rec.get("registers") else ""
    return f"patch {rec['patch']}, {rec['width']} wide{registers}, {rec.get('form') or SEED_NETWORK['form']}"


def _network(recs: Sequence[dict], checkpoint: str) -> str:
    return next((words for r in recs if r["checkpoint"] == checkpoint and (words := network_text(r))), "")


def describe_dataset(recs: Sequence[dict], dataset: str) -> str:
    """Caption text: the data set, its number of images (and how many a measure left out), the decoder and
    probe settings of these records, and the network precision of their features unless all are float32 (a table
    that mixes precisions lists each with its checkpoints)."""
    measures = [m for r in recs for m in r["measures"]]
    n = max((m["n_images"] + m["n_left_out"] for m in measures), default=0)
    parts = [f"{dataset}, {n} {unit(recs)}"]
    left = sorted({(m["n_images"], m["measure"]) for m in measures if m["n_left_out"]})
    for scored in sorted({s for s, _ in left}):
        names = ", ".join(catalogue.plain(x) for s, x in left if s == scored)
        parts.append(f"{names} over the {scored} with non-crowd ground truth")
    text_ = "; ".join(parts) + "."
    for kind, noun in (("decoder", "Decoder setting"), ("probe", "Probe")):
        settings = sorted({r["setting"] for r in recs if r["kind"] == kind})
        if settings:
            text_ += f" {noun}: {'; '.join(settings)}."
    return text_ + _precision_note(recs) + _form_note(recs)


def _run_note(recs: Sequence[dict], field: str, default: str, noun: str, single: str = "") -> str:
    """The caption's note on how the records' networks ran (`field`: "precision" or "form"): "" when every record
    ran the `default` (a record older than the field counts as the default); else the one value ("Network
    precision: bfloat16.", with `single` after it), or, where the records mix values, each with its checkpoints, so a
    table never passes off one kind's numbers as another's."""
    by_value: dict[str, set[str]] = {}
    for r in recs:
        by_value.setdefault(r.get(field) or default, set()).add(r["checkpoint"])
    if set(by_value) <= {default}:
        return ""
    if len(by_value) == 1:
        return f" Network {noun}: {next(iter(by_value))}{single}."
    listed = "; ".join(f"{v} ({', '.join(sorted(c))})" for v, c in sorted(by_value.items()))
    return f" Mixed network {noun}s: {listed}."


def _precision_note(recs: Sequence[dict]) -> str:
    """float32 is the reference (docs/design.md §3), the one precision of the CPU before `features.precision`."""
    return _run_note(recs, "precision", REFERENCE_PRECISION, "precision")


def _form_note(recs: Sequence[dict]) -> str:
    """The backbone form is the seed's protocol (docs/design.md §14), what every record before the field ran."""
    return _run_note(recs, "form", SEED_NETWORK["form"], "form",
                     " (class token and registers in the forward, final norm)")


def unit(recs: Sequence[dict]) -> str:
    """What the records' intervals resample: "sequences" for video records (§12), else "images"."""
    return "sequences" if recs and all(r["kind"] == "video" for r in recs) else "images"


def absent_of(record: dict) -> dict | None:
    """What a record says its network lacks, {"reason": str, "measures": [names]} (its `absent`), or None. An
    attention record older than that field says it in `attention_absent` (the reason alone): it lacks the
    catalogue's descriptive measures."""
    if record.get("absent"):
        return record["absent"]
    if record.get("attention_absent"):
        return {"reason": record["attention_absent"], "measures": [m for m in catalogue.ORDER
                                                                   if catalogue.describes(m)]}
    return None


def missing_cell(recs: Sequence[dict], checkpoint: str, dataset: str, col: str) -> Cell:
    """The cell of a measure a checkpoint lacks: a dash where its record says the reading is absent (`absent_of`),
    else empty."""
    measure = col.split(":", 1)[-1]
    for r in recs:
        if r["checkpoint"] == checkpoint and r["dataset"] == dataset:
            absent = absent_of(r)
            if absent and measure in absent["measures"]:
                return ABSENT
    return Cell()


def checkpoint_rows(recs: Sequence[dict], index: dict, dataset: str, cols: Sequence[str],
                     ids: Sequence[str]) -> list[list[Cell]]:
    """Rows of checkpoint tables: identity cells (`ids` among run, epoch, architecture, network, checkpoint), then one
    value [lo, hi] cell per measure column; sorted by run, epoch (None last), checkpoint."""
    order = sorted({(run_name(r), r["epoch"] is None, r["epoch"] or 0, r["checkpoint"]) for r in recs})
    rows = []
    for run, _, _, ckpt in order:
        epoch = next(r["epoch"] for r in recs if r["checkpoint"] == ckpt)
        identity = {"run": run, "epoch": epoch, "architecture": _architecture(recs, ckpt),
                    "network": _network(recs, ckpt), "checkpoint": ckpt}
        cells = [text(identity[k]) for k in ids]
        for col in cols:
            hit = index.get((ckpt, dataset, col))
            cells.append(missing_cell(recs, ckpt, dataset, col) if hit is None
                         else Cell(hit[1]["value"], hit[1]["ci_low"], hit[1]["ci_high"]))
        rows.append(cells)
    return rows


def identity_columns(recs: Sequence[dict], with_run: bool) -> list[str]:
    ids = (["run"] if with_run else []) + ["epoch"]
    if any(r.get("architecture") for r in recs):
        ids.append("architecture")
    if any(network_text(r) for r in recs):
        ids.append("network")
    return ids + ["checkpoint"]


def percent(x: float, scale: float = PERCENT) -> float | None:
    """`scale` (PERCENT unless a measure's unit is another: `measure_scale`) x `x`; None where the bootstrap left
    it undefined (NaN)."""
    return None if not math.isfinite(float(x)) else scale * float(x)
