"""The measure catalogue (evaluate/scores/catalogue.py) is the one door of a measure: a measure entry, a ledger record
and a table column all refuse or fall back where a name has no entry, and the tables take display names, decimals,
best-marking and column order from it."""

from __future__ import annotations

import pytest

from evaluate.ledger import LedgerError
from evaluate.ledger.records import make_record, write_record
from evaluate.outputs.table_model import measure_column
from evaluate.scores import ScoreError, catalogue
from evaluate.scores.measures import make_measure


def test_a_measure_without_an_entry_is_refused_where_it_is_made():
    with pytest.raises(ScoreError, match=r"measure 'mIoU_typo' is not in the measure catalogue"):
        make_measure("mIoU_typo", image_ids=[1], per_image=[0.5], reducer="mean", resamples=100, seed=0)
    entry = make_measure("jaccard", image_ids=[1, 2], per_image=[0.25, 0.75], reducer="mean", resamples=100, seed=0)
    assert entry["value"] == pytest.approx(50.0)


def test_a_record_with_a_measure_the_catalogue_lacks_is_refused_and_nothing_is_written(tmp_path):
    entry = make_measure("ap", image_ids=[1], per_image=[], reducer=None, value=12.5)
    record = make_record(kind="decoder", checkpoint="c", run="c", epoch=1, checkpoint_sha256="c" * 64, dataset="d",
                         role="eval", setting="s", reading="keys480", decoder="ncut", config_hash="f" * 16,
                         opening_row_sha256="0" * 64, measures=[{**entry, "measure": "ap_typo"}], started=0.0)
    with pytest.raises(LedgerError, match=r"measure\(s\) ap_typo not in the measure catalogue"):
        write_record(tmp_path / "r.json", record)
    assert list(tmp_path.iterdir()) == []
    write_record(tmp_path / "r.json", {**record, "measures": [entry]})
    assert (tmp_path / "r.json").is_file()


def test_columns_take_names_decimals_and_best_marking_from_the_catalogue():
    decay, mae_bs, entropy, jf = (measure_column(k) for k in ("j_decay", "sod_mae_bs", "attention_entropy", "jf_mean"))
    assert (jf.plain, jf.latex, jf.best, jf.digits) == ("J&F", r"$\mathcal{J}\&\mathcal{F}$", True, 1)
    assert not decay.best and not mae_bs.best and mae_bs.plain == "SOD MAE + BS"  # better when lower
    assert not entropy.best and entropy.digits == 2  # a description in nats, not a score
    unknown = measure_column("video:from_an_older_release")
    assert (unknown.plain, unknown.best) == ("video from_an_older_release", True)


def test_every_saliency_measure_has_its_bilateral_solver_variant_right_after_the_seven():
    names = catalogue.SALIENCY_NAMES
    assert len(names) == 7 and all(catalogue.known(n + catalogue.BS_SUFFIX) for n in names)
    order = catalogue.ORDER
    assert [order.index(n + "_bs") for n in names] == [order.index(names[-1]) + 1 + k for k in range(7)]
    assert catalogue.measure("saliency_maxf_bs").latex == r"max$F_\beta$ + BS"
    assert catalogue.place("jaccard") < catalogue.place("ap") < catalogue.place("jf_mean") < catalogue.place("x")


def test_descriptions_and_lower_is_better_are_the_only_measures_without_a_best():
    no_best = {m.name for m in catalogue.CATALOGUE if not m.marks_best}
    assert no_best == {"j_decay", "f_decay", "sod_mae", "sod_mae_bs", "attention_spread", "attention_entropy"}
    assert {m.name for m in catalogue.CATALOGUE if catalogue.describes(m.name)} == {"attention_spread",
                                                                                    "attention_entropy"}
