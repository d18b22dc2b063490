"""What a job reads of the config when it runs (`RunTime`, docs/design.md §8): the values it carries, and the
Snakemake behaviour it relies on to never re-run a job (the workflow tests show that end to end, slowly; this pins
the assumption in a second)."""

from __future__ import annotations

import hashlib
import json

import pytest
from snakemake.persistence import UNREPRESENTABLE
from snakemake.persistence.file import FilePersistence

from evaluate.experiment import Experiment, load_config
from evaluate.plumbing.config import RunTime

from sources import shipped_config


def shipped() -> Experiment:
    return Experiment(load_config(shipped_config()))


def test_a_data_set_s_run_time_values_are_its_config_entry_s():
    exp = shipped()
    val = exp.run_time("demo-val")
    # config.yaml: demo-val is the sealed eval set with a budget of 50; features.keep and workers are the schema's
    assert (val.roles, val.sealed, val.budget) == (("eval",), True, 50)
    assert (val.keep, val.workers) == (True, 2)
    assert val.checkpoints == tuple(shipped_config()["checkpoints"])  # explicit ones, in the config's order
    train = exp.run_time("demo-train")
    assert (train.roles, train.sealed, train.budget) == (("probe-train",), False, None)


def test_the_config_hash_is_that_of_the_validated_config_s_canonical_json():
    exp = shipped()
    text = json.dumps(exp.config, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    assert exp.run_time("demo-val").config_hash == hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    assert "features" in exp.config and exp.config["features"]["keep"] is True  # the schema's defaults filled in


@pytest.mark.parametrize("serialiser", ["_serialize_param_builtin", "_serialize_param_pandas"])
def test_snakemake_leaves_a_run_time_param_out_of_its_params_rerun_trigger(serialiser):
    """Snakemake re-runs a job when a param it can represent changes (with pandas installed, as here, through its
    pandas serialiser, which falls back on the builtin one); a RunTime is not one, while the same values in a dict or
    a tuple are (the control: what a params entry of builtin values would do)."""
    run_time = shipped().run_time("demo-val")
    serialise = getattr(object.__new__(FilePersistence), serialiser)  # stateless: no workflow needed
    assert serialise(run_time) is UNREPRESENTABLE
    assert serialise(run_time.__dict__) is not UNREPRESENTABLE
    assert serialise(tuple(run_time.__dict__.values())) is not UNREPRESENTABLE
    assert isinstance(run_time, RunTime)
