"""config.yaml -> checkpoint and data-set tables: names that become paths, glob discovery, schema errors."""

from __future__ import annotations

import json

import pytest

from evaluate.experiment import ConfigError, Experiment, check_name, config_defaults, discover_checkpoints, load_config

from sources import REPO
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def validate(config: dict) -> dict:
    return load_config(config)


def test_shipped_config_is_valid_and_has_every_role(shipped_config):
    validate(shipped_config)
    exp = Experiment(load_config(shipped_config))
    assert exp.select_dataset == "demo-select"
    assert exp.probe_train_dataset == "demo-train"
    assert exp.by_role("eval") == ["demo-val"]
    assert exp.reference_checkpoint == "dino-demo"
    assert {c.run for c in exp.checkpoints.values()} == {"dino-demo", "selfpatch-demo", "layerscale-demo", "xcit-demo",
                                                         "augvit-demo", "dinov2-demo", "dinov3-demo"}


@pytest.mark.parametrize("name", ["../evil", "a/b", "..", ".", "with space", "", "é"])
def test_names_that_are_not_one_safe_path_component_are_refused(name):
    with pytest.raises(ConfigError, match="not allowed"):
        check_name(name, "checkpoints:")


@pytest.mark.parametrize("name", ["dino_vits16", "run-1.ep0100", "A.b_c-9"])
def test_safe_names_pass(name):
    assert check_name(name, "checkpoints:") == name


def test_schema_names_a_typo_d_key(shipped_config):
    shipped_config["features"]["shard_sise"] = 3
    with pytest.raises(Exception, match="shard_sise"):
        validate(shipped_config)


def test_schema_names_a_wrong_type(shipped_config):
    shipped_config["features"]["shard_size"] = "eight"
    with pytest.raises(Exception, match="eight"):
        validate(shipped_config)


def test_schema_refuses_a_checkpoint_name_with_a_slash(shipped_config):
    shipped_config["checkpoints"]["../../etc"] = {"path": "x.pth"}
    with pytest.raises(Exception, match=r"\.\./\.\./etc"):
        validate(shipped_config)


def test_experiment_refuses_a_dataset_name_with_dotdot(shipped_config):
    shipped_config["datasets"][".."] = dict(shipped_config["datasets"]["demo-val"])
    with pytest.raises(ConfigError, match=r"'\.\.'"):
        Experiment(load_config(shipped_config))


def test_a_config_error_names_the_experiment_file_once_though_its_checks_nest(shipped_config):
    """The experiment's check runs the names check, each naming the file it reads: the message names it once."""
    from evaluate.plumbing.config import in_file

    config = load_config(shipped_config)
    config["features"]["autocast"] = True
    with pytest.raises(ConfigError) as refused:
        Experiment(config, source="runs/exp.yaml")
    assert str(refused.value).startswith("runs/exp.yaml: features.autocast was replaced by features.precision")
    assert str(refused.value).count("exp.yaml") == 1
    with pytest.raises(ConfigError) as nested:
        with in_file("a.yaml"), in_file("b.yaml"):
            raise ConfigError("features.threads: bad")
    assert str(nested.value) == "b.yaml: features.threads: bad"


def test_select_and_eval_on_the_same_data_set_is_refused(shipped_config):
    shipped_config["datasets"]["demo-val"]["roles"] = ["eval", "select"]
    del shipped_config["datasets"]["demo-select"]
    with pytest.raises(ConfigError, match="both roles 'select' and 'eval'"):
        Experiment(load_config(shipped_config))


def test_unknown_reference_checkpoint_is_named(shipped_config):
    shipped_config["reference_checkpoint"] = "dino-dmeo"
    with pytest.raises(ConfigError, match="reference_checkpoint: 'dino-dmeo'"):
        Experiment(load_config(shipped_config))


def test_sealed_without_budget_is_refused(shipped_config):
    del shipped_config["datasets"]["demo-val"]["budget"]
    with pytest.raises(ConfigError, match="sealed but has no 'budget'"):
        Experiment(load_config(shipped_config))


def test_a_semseg_set_fitted_on_a_set_not_in_its_section_is_refused_naming_the_file_read(shipped_config):
    shipped_config["semseg"]["demo-shapes"]["fit_on"] = "demo-val"  # a `datasets:` set, not a semseg one
    with pytest.raises(ConfigError) as refused:
        Experiment(load_config(shipped_config), source="experiments/stuff.yaml")
    assert str(refused.value) == ("experiments/stuff.yaml: semseg.demo-shapes.fit_on: 'demo-val' is not a semseg "
                                  "data set (one of demo-shapes)")
    shipped_config["semseg"]["demo-shapes"]["fit_on"] = "demo-shapes"
    assert Experiment(load_config(shipped_config)).section("semseg")


def test_glob_discovery_reads_run_and_epoch_from_paths(tmp_path):
    for run, epoch in [("selfpatch", 20), ("selfpatch", 100), ("dino", 5)]:
        folder = tmp_path / run
        folder.mkdir(exist_ok=True)
        (folder / f"checkpoint{epoch:04d}.pth").write_bytes(b"x")
    (tmp_path / "dino" / "checkpoint.pth").write_bytes(b"x")  # no epoch: not matched
    found = discover_checkpoints(str(tmp_path / "{run}" / "checkpoint{epoch}.pth"), prefix="", which="teacher")
    assert [(c.name, c.run, c.epoch) for c in found] == [
        ("dino-ep0005", "dino", 5),
        ("selfpatch-ep0020", "selfpatch", 20),
        ("selfpatch-ep0100", "selfpatch", 100),
    ]


def test_glob_pattern_without_fields_is_refused():
    with pytest.raises(ConfigError, match=r"\{run\} and \{epoch\}"):
        discover_checkpoints("/ckpts/*.pth", prefix="", which="teacher")


def test_discovered_name_clash_is_refused(tmp_path, shipped_config):
    (tmp_path / "dino-demo").mkdir()
    (tmp_path / "dino-demo" / "ep100.pth").write_bytes(b"x")
    shipped_config["checkpoints"]["dino-demo-ep0100"] = {"path": "a.pth"}
    shipped_config["checkpoint_globs"] = [{"pattern": str(tmp_path / "{run}" / "ep{epoch}.pth")}]
    with pytest.raises(ConfigError, match="clashes"):
        Experiment(load_config(shipped_config))


def test_validation_fills_every_default_from_the_schema(shipped_config):
    for section in ("features", "probe", "bootstrap", "figures"):
        del shipped_config[section]
    del shipped_config["checkpoints"]["dino-demo"]["epoch"]
    config = load_config(shipped_config)
    assert config["probe"] == config_defaults("probe") == {"weight_decay": 1e-4, "max_iter": 200, "tol": 1e-4,
                                                           "max_tokens": 300000}
    assert config["bootstrap"] == {"resamples": 10000, "seed": 0}  # docs/design.md §6: 10,000 resamples, rng(0)
    assert config["features"]["shard_size"] == 64 and config["features"]["dtype"] == "float16"
    assert config["checkpoints"]["dino-demo"]["epoch"] == 0 and config["checkpoints"]["dino-demo"]["which"] == "teacher"
    assert config["datasets"]["demo-val"]["probe"] is True and config["datasets"]["demo-train"]["sealed"] is False


def test_an_unknown_decoder_setting_is_refused_at_config_time(shipped_config):
    shipped_config["decoder"]["sweep"] = {**config_defaults("decoder")["sweep"], "split": ["mean", "average"]}
    with pytest.raises(ConfigError, match="config.yaml: decoder: .*average"):
        Experiment(load_config(shipped_config))


def test_the_default_sweep_grid_comes_from_the_schema_alone(shipped_config):
    assert "sweep" not in shipped_config["decoder"]  # config.yaml does not repeat it
    grid = load_config(shipped_config)["decoder"]["sweep"]
    assert grid == config_defaults("decoder")["sweep"] == {
        "tau": [0.0, 0.05, 0.1, 0.15, 0.2, 0.3], "eps": [1e-5, 1e-3], "foreground": ["seed", "corners"],
        "split": ["mean", "zero", "median"], "component": ["seed", "all"],
    }


def test_a_sweep_must_name_every_setting_field_and_leaves_centre_and_masks_to_the_run(shipped_config):
    shipped_config["decoder"]["sweep"] = {"tau": [0.1, 0.2], "eps": [1e-5], "foreground": ["seed"]}
    with pytest.raises(ConfigError, match="config.yaml: decoder: .*no values for split, component"):
        Experiment(load_config(shipped_config))
    shipped_config["decoder"]["sweep"] = {**config_defaults("decoder")["sweep"], "masks": [1, 3]}
    with pytest.raises(Exception, match="'masks' should not be valid"):  # the schema: decoder.masks sets it
        load_config(shipped_config)


def test_an_unknown_decoder_name_lists_the_registered_ones(shipped_config):
    shipped_config["decoder"]["name"] = "maskcut"
    with pytest.raises(ConfigError, match="config.yaml: decoder: unknown decoder 'maskcut'; known decoders: lost, ncut, tokencut"):
        Experiment(load_config(shipped_config))


def test_an_unknown_demo_format_names_the_known_ones(shipped_config):
    shipped_config["checkpoints"]["dino-demo"]["demo"]["format"] = "dino-bakbone"
    with pytest.raises(ConfigError, match="checkpoints.dino-demo.demo.format: 'dino-bakbone'.*dino-backbone"):
        Experiment(load_config(shipped_config))


@pytest.mark.parametrize("value", [True, False])
def test_the_old_autocast_key_is_refused_naming_what_replaced_it(shipped_config, value):
    shipped_config["features"]["autocast"] = value
    with pytest.raises(ConfigError, match=r"^config.yaml: features.autocast was replaced by features.precision: "
                                          r"float32 \(the default\), bfloat16 .* or float16 \(CUDA only\)"):
        load_config(shipped_config)


def test_precision_defaults_to_float32_and_takes_only_the_three_precisions(shipped_config):
    del shipped_config["features"]["precision"]
    assert load_config(shipped_config)["features"]["precision"] == "float32"
    shipped_config["features"]["precision"] = "float64"
    with pytest.raises(Exception, match="float64"):
        load_config(shipped_config)


@pytest.mark.parametrize("device, refused", [("cpu", True), ("auto", False), ("cuda", False)])
def test_float16_with_the_cpu_named_as_device_is_refused_before_any_job(shipped_config, device, refused):
    """features.device auto resolves where the job runs (a GPU node may run it), so only an explicit cpu is refused
    at config time; the extract job refuses float16 where `auto` turns out to be the CPU."""
    shipped_config["features"].update(precision="float16", device=device)
    if refused:
        with pytest.raises(ConfigError, match="config.yaml: features.precision: float16 runs on CUDA only, and "
                                              "features.device is cpu"):
            Experiment(load_config(shipped_config))
    else:
        assert Experiment(load_config(shipped_config)).config["features"]["precision"] == "float16"


def _foreground_set(tmp_path, shipped_config, **extra):
    annotations = tmp_path / "fg.json"
    annotations.write_text(json.dumps({"images": [], "annotations": [],
                                       "categories": [{"id": 1, "name": "foreground"}]}))
    shipped_config["datasets"]["fg"] = {"images": str(tmp_path), "annotations": str(annotations), "roles": ["eval"],
                                        **extra}
    return Experiment(load_config(shipped_config))


def test_an_eval_set_whose_category_names_the_probe_lacks_is_refused_at_config_time(tmp_path, shipped_config):
    exp = _foreground_set(tmp_path, shipped_config)
    with pytest.raises(ConfigError) as err:
        exp.check_probe_categories()
    message = str(err.value)
    assert "datasets.fg" in message and "['foreground']" in message and "'demo-train'" in message
    assert "disc" in message and "probe: false" in message  # what the probe-train set has, and the fix


def test_probe_false_makes_an_eval_set_decoder_only(tmp_path, shipped_config):
    exp = _foreground_set(tmp_path, shipped_config, probe=False)
    exp.check_probe_categories()
    assert "fg" in exp.by_role("eval") and "fg" not in exp.probe_eval_datasets
    assert exp.probe_eval_datasets == ["demo-val"]
