"""The decoder registry keeps its promise: a new decoder is one file plus one line in decoders/__init__.py.

A copy of the repository's code (`workspace.Workspace`) gets a trivial decoder written here (`decoders/norm.py`:
one mask per image, the patches whose key norm is above a quantile) and the one line that imports it; nothing else in
the copy changes.
Snakemake then runs a tiny experiment (demo data sets of two images, one demo checkpoint) through the sweep, the
selection, decoding and scoring with `decoder.name: norm`, and the records and files carry that decoder's settings.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import yaml
from workspace import Workspace, checkpoint_entry, tiny_config

from evaluate.plumbing import paths

pytestmark = pytest.mark.slow

NORM_DECODER = '''"""A trivial decoder: one mask per image, the patches whose key norm is above a quantile."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass

import numpy as np

from decoders.registry import SettingsError, register

NAME = "norm"
READS = "keys480"
GIVES = "masks"
Stats = dict


@dataclass(frozen=True)
class Settings:
    centre: bool
    quantile: float
    masks: int

    @property
    def name(self) -> str:
        return f"norm,centre={int(self.centre)},q={self.quantile!r},masks={self.masks}"

    @classmethod
    def from_name(cls, name: str) -> "Settings":
        fields = dict(part.split("=") for part in name.split(",")[1:])
        return cls(fields["centre"] == "1", float(fields["q"]), int(fields["masks"]))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Settings":
        return cls(**data)


@dataclass
class GridMask:
    mask: np.ndarray
    score: float


def settings_grid(spec: dict) -> list[Settings]:
    if set(spec) != {"centre", "quantile", "masks"}:
        raise SettingsError(f"norm settings grid: fields centre, quantile, masks; got {sorted(spec)}")
    return [Settings(c, float(q), int(m)) for c in spec["centre"] for q in spec["quantile"] for m in spec["masks"]]


def decode(keys, settings: Settings, grid, *, stats: dict) -> list[GridMask]:
    keys = np.asarray(keys, dtype=np.float64)
    if settings.centre:
        keys = keys - keys.mean(axis=0)
    norms = np.linalg.norm(keys, axis=1)
    stats["decodes"] = stats.get("decodes", 0) + 1
    return [GridMask((norms > np.quantile(norms, settings.quantile)).reshape(tuple(grid)), 1.0 - settings.quantile)]


def sweep(keys, settings_list, grid, *, stats: dict) -> list[list[GridMask]]:
    return [decode(keys, settings, grid, stats=stats) for settings in settings_list]


register(sys.modules[__name__])
'''
REGISTRY_LINE = "from decoders import norm  # noqa: F401\n"


def norm_config() -> dict:
    """The tiny experiment (`workspace.tiny_config`) decoded by `norm`, one shard per data set."""
    config = tiny_config({"a": checkpoint_entry("a", "dino-backbone", 0, 1)})
    config["features"]["shard_size"] = 2
    config["decoder"] = {"name": "norm", "masks": 1, "centre": True, "sweep": {"quantile": [0.5, 0.8]}}
    return config


def test_a_decoder_added_by_one_file_and_one_line_runs_through_sweep_decode_and_scoring(tmp_path):
    ws = Workspace(tmp_path)
    (ws.code / "decoders" / "norm.py").write_text(NORM_DECODER)
    registry = ws.code / "decoders" / "__init__.py"
    registry.write_text(registry.read_text() + REGISTRY_LINE)

    work = ws.work
    ws.write_config(norm_config())
    record = paths.DECODER_RECORD.format(checkpoint="a", dataset="val")
    ws.snakemake(record)

    names = ["norm,centre=1,q=0.5,masks=1", "norm,centre=1,q=0.8,masks=1"]
    selected = yaml.safe_load((work / paths.SELECTED).read_text())
    assert selected["decoder"] == "norm" and selected["n_settings"] == 2 and selected["name"] in names
    assert selected["settings"] == {"centre": True, "quantile": float(selected["name"].split("q=")[1].split(",")[0]),
                                    "masks": 1}
    with open(work / paths.SWEEP_TABLE, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["setting"] for r in rows] == names and {r["quantile"] for r in rows} == {"0.5", "0.8"}
    best = max(rows, key=lambda r: float(r["value"]))  # the selection keeps the best mean Jaccard
    assert selected["name"] == best["setting"]
    sweep_record = json.loads((work / paths.SWEEP_RECORD.format(checkpoint="a", dataset="sel")).read_text())
    assert sweep_record["setting"] == selected["name"]
    decoder_record = json.loads((work / record).read_text())
    assert decoder_record["setting"] == selected["name"]
    assert {m["measure"] for m in decoder_record["measures"]} >= {"jaccard", "ap", "corloc"}
    masks = json.loads((work / paths.MASKS.format(checkpoint="a", dataset="val")).read_text())
    quantile = selected["settings"]["quantile"]
    assert len(masks) == 2 and all(m["score"] == pytest.approx(1.0 - quantile) for m in masks)
    logs = list((work / "logs" / "sweep_decode").rglob("*.log"))
    assert len(logs) == 1 and "stats: {'decodes': 2}" in logs[0].read_text()  # 1 image x 2 settings, its own Stats
    assert np.isfinite([m["value"] for m in decoder_record["measures"] if m["measure"] == "jaccard"]).all()
