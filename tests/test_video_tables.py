"""Video records in the tables: J&F, J and F columns in MEASURE_ORDER, decays without a best, intervals over
sequences, and the per-sequence table (hand-made records of two checkpoints on one video set)."""

from __future__ import annotations

import pytest

from evaluate.outputs.table_model import to_markdown
from evaluate.outputs.tables import checkpoint_tables
from evaluate.outputs.views import video_sequence_tables
from evaluate.scores.measures import make_measure
from evaluate.video.measures import MEASURES

# per sequence [sum over objects, objects] of every measure, unit-free: checkpoint -> measure -> per sequence
PER_SEQUENCE = {
    "a": {"j_mean": [[1.2, 2], [0.5, 1]], "f_mean": [[1.0, 2], [0.7, 1]], "j_decay": [[0.2, 2], [0.1, 1]]},
    "b": {"j_mean": [[1.6, 2], [0.2, 1]], "f_mean": [[1.4, 2], [0.3, 1]], "j_decay": [[0.0, 2], [0.3, 1]]},
}


def video_record(checkpoint: str) -> dict:
    per = dict(PER_SEQUENCE[checkpoint])
    per["jf_mean"] = [[(j[0] + f[0]) / 2, j[1]] for j, f in zip(per["j_mean"], per["f_mean"])]
    for name in MEASURES:
        per.setdefault(name, per["j_mean"])
    measures = [make_measure(m, image_ids=[0, 1], per_image=per[m], reducer="ratio", resamples=200, seed=0)
                for m in MEASURES]
    return {
        "kind": "video", "checkpoint": checkpoint, "run": checkpoint, "epoch": 0, "architecture": "vit-s16",
        "dataset": "clip", "role": "eval", "setting": "h96-n7-k5-r12-t0.1", "record_sha256": checkpoint * 64,
        "measures": measures, "sequences": ["bear", "cows"],
        "per_sequence": [{"sequence": s, "objects": int(per["jf_mean"][i][1]),
                          **{m: 100 * per[m][i][0] / per[m][i][1] for m in MEASURES}}
                         for i, s in enumerate(["bear", "cows"])],
    }


def test_checkpoint_tables_put_j_and_f_first_and_bold_no_decay():
    (table,) = checkpoint_tables([video_record("a"), video_record("b")])
    measure_columns = [c.plain for c in table.columns if c.numeric]
    assert measure_columns == ["J&F", "J", "F", "J recall", "F recall", "J decay", "F decay"]
    assert [c.best for c in table.columns if c.numeric] == [True] * 5 + [False] * 2
    assert "over sequences" in table.caption and "clip, 2 sequences" in table.caption
    jf = {row[3].text: row[4].value for row in table.rows}
    assert jf == {"a": pytest.approx(100 * (1.2 + 1.0 + 0.5 + 0.7) / 2 / 3),
                  "b": pytest.approx(100 * (1.6 + 1.4 + 0.2 + 0.3) / 2 / 3)}


def test_the_per_sequence_table_holds_each_checkpoint_s_j_and_f_mean():
    (table,) = video_sequence_tables([video_record("b"), video_record("a")])
    assert table.stem == "video-sequences_clip"
    assert [c.plain for c in table.columns] == ["sequence", "objects", "a", "b"]
    rows = {row[0].text: (row[1].text, row[2].value, row[3].value) for row in table.rows}
    assert rows == {"bear": ("2", pytest.approx(100 * 2.2 / 2 / 2), pytest.approx(100 * 3.0 / 2 / 2)),
                    "cows": ("1", pytest.approx(100 * 1.2 / 2), pytest.approx(100 * 0.5 / 2))}
    markdown = to_markdown(table)
    assert "| bear | 2 | 55.0 | **75.0** |" in markdown and "| cows | 1 | **60.0** | 25.0 |" in markdown
