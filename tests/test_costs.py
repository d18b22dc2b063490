"""What an experiment costs before it runs (evaluate.costs, evaluate.check, `make check`): each reading's openings
of a data set's labels counted by hand on the shipped demo, scorings already on the ledger opening nothing, a sealed
budget too small refused (in the workflow's own process, before any job) with the data set, the openings needed and
the budget, and the features' bytes from their shapes and dtype.
"""

from __future__ import annotations

import copy

import pytest
import yaml
from sources import shipped_config
from workspace import Workspace, checkpoint_entry, tiny_config

from evaluate import ConfigError
from evaluate.check import check, main
from evaluate.costs import (
    OPENINGS,
    budgets,
    disk,
    jobs_per_rule,
    label_uses,
    refuse_over_budget,
    spent_openings,
)
from evaluate.experiment import Experiment, load_config
from evaluate.networks.registry import REGISTRY
from evaluate.plumbing import paths


def experiment(config: dict) -> Experiment:
    return Experiment(load_config(config))


@pytest.fixture()
def demo() -> Experiment:
    """The shipped demo: 8 checkpoints; select, probe-train and a sealed eval set (budget 50), a video set, a VOC
    folder, an ECSSD folder, a VOC segmentation split, a semseg folder; two box decoders (TokenCut's and LOST's)."""
    exp = experiment(shipped_config())
    assert len(exp.checkpoints) == 8 and len(exp.box_decoders) == 2
    return exp


def needed(found) -> dict:
    return {b.dataset: (b.needed, dict(b.needed_by_reading)) for b in found}


def test_each_reading_spends_its_openings_on_the_shipped_demo(demo):
    found = budgets(demo, spent={}, done=set())
    assert needed(found) == {
        "demo-select": (1, {"selection": 1}),  # once, the reference checkpoint
        "demo-train": (8, {"probe-train": 8}),
        "demo-val": (16, {"decoder": 8, "probe": 8}),  # each checkpoint opens the eval labels twice
        "demo-videos": (8, {"video": 8}),  # propagation's first frames are not counted
        "demo-voc": (16, {"discovery": 16}),  # per box decoder
        "demo-ecssd": (8, {"saliency": 8}),
        "demo-voc-seg": (8, {"attention-masks": 8}),  # an upper bound: a network without a class token opens none
        "demo-shapes": (8, {"semseg": 8}),  # fitting the clusters reads no label
    }
    assert [(b.sealed, b.budget, b.left) for b in found if b.dataset == "demo-val"] == [(True, 50, 34)]
    assert OPENINGS["propagation"] == OPENINGS["attention"] == 0


def test_scorings_already_on_the_ledger_open_nothing_and_spent_rows_count_as_the_ledger_counts_them(demo):
    done = {paths.DECODER_RECORD.format(checkpoint=c, dataset="demo-val") for c in ("dino-demo", "xcit-demo")}
    rows = ([{"dataset": "demo-val", "purpose": p} for p in ("budget", "eval", "eval", "probe-eval")]
            + [{"dataset": "demo-videos", "purpose": p} for p in ("propagate", "propagate", "video-eval")])
    spent = spent_openings(rows)
    assert spent == {"demo-val": 3, "demo-videos": 1}  # budget and propagate rows are not counted
    found = {b.dataset: b for b in budgets(demo, spent, done)}
    assert found["demo-val"].needed_by_reading == {"decoder": 6, "probe": 8}
    assert (found["demo-val"].spent, found["demo-val"].left) == (3, 50 - 3 - 14)
    assert (found["demo-videos"].spent, found["demo-videos"].needed) == (1, 8)


def test_a_sealed_budget_too_small_is_refused_naming_the_data_set_the_openings_and_the_budget(demo):
    config = shipped_config()
    config["datasets"]["demo-val"]["budget"] = 20
    exp = experiment(config)
    refuse_over_budget(budgets(exp, {"demo-val": 4}, set()))  # 4 spent + 16 needed = 20: within the budget
    with pytest.raises(ConfigError) as refused:
        refuse_over_budget(budgets(exp, {"demo-val": 5}, set()))  # 5 + 16 = 21
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("config.yaml: datasets.demo-val is sealed with budget 20, but this run needs 16 "
                              "opening(s) of its labels (decoder 8, probe 8) and 5 were spent before: raise "
                              "datasets.demo-val.budget to at least 21")


def test_an_unsealed_data_set_is_never_refused_and_its_budget_is_unlimited(demo):
    config = shipped_config()
    config["datasets"]["demo-val"].update(sealed=False, budget=None)
    del config["datasets"]["demo-val"]["budget"]
    found = {b.dataset: b for b in budgets(experiment(config), {"demo-val": 1000}, set())}
    assert not found["demo-val"].over and found["demo-val"].left is None
    refuse_over_budget(found.values())


def test_an_eval_set_the_probe_does_not_score_and_a_run_without_select_spend_only_what_runs():
    config = shipped_config()
    config["datasets"]["demo-val"]["probe"] = False
    assert needed(budgets(experiment(config), {}, set()))["demo-val"] == (8, {"decoder": 8})
    del config["datasets"]["demo-select"]
    config["datasets"]["demo-val"]["probe"] = True
    exp = experiment(config)
    assert needed(budgets(exp, {}, set()))["demo-val"] == (8, {"probe": 8})
    assert not any(use.reading in ("selection", "decoder") for use in label_uses(exp))


def test_jobs_per_rule_follow_the_shards_sequences_checkpoints_and_box_decoders(demo):
    units = {"demo-select": 2, "demo-train": 2, "demo-val": 2, "demo-videos": 2, "demo-voc": 1, "demo-ecssd": 1,
             "demo-voc-seg": 1, "demo-shapes": 1}
    jobs = jobs_per_rule(demo, units)
    assert jobs["extract"] == 8 * 6 and jobs["preprocess"] == 6 and jobs["sweep_decode"] == 2
    assert (jobs["decode"], jobs["score_decoder"], jobs["score_probe"], jobs["train_probe"]) == (16, 8, 8, 8)
    assert (jobs["propagate"], jobs["score_video"], jobs["score_discovery"], jobs["attention_shard"]) == (16, 8, 16, 16)
    assert (jobs["read_cls_attention"], jobs["score_attention_masks"]) == (8, 8)
    assert (jobs["extract_tokens320"], jobs["fit_clusters"], jobs["predict_clusters"], jobs["score_semseg"]) == \
        (8, 8, 8, 8)
    config = shipped_config()
    config["attention"] = False
    assert not {"attention_shard", "attention_record", "attention_rows"} & set(jobs_per_rule(experiment(config),
                                                                                             units))


def test_features_on_disk_are_the_shapes_times_the_dtype():
    config = shipped_config()
    for name in list(config["checkpoints"])[1:]:
        del config["checkpoints"][name]
    config["checkpoints"]["dinov2-demo"] = shipped_config()["checkpoints"]["dinov2-demo"]
    exp = experiment(config)
    geometries = {"dino-demo": REGISTRY["vit-s16"].geometry, "dinov2-demo": REGISTRY["dinov2-s14-reg4"].geometry}
    images = {"demo-select": 10, "demo-train": 16, "demo-val": 12, "demo-shapes": 6}
    patches = {("demo-voc", 16): 1000, ("demo-voc", 14): 1300}
    space = disk(exp, images, geometries, patches)
    # ViT-S/16: (30 * 30 + 14 * 14) x 384 float16 = 841,728 bytes an image; DINOv2 S/14: (34 * 34 + 16 * 16) x 384
    assert space.features == 38 * (1096 * 384 * 2 + 1412 * 384 * 2)
    assert space.native == (1000 + 1300) * 384 * 2
    assert space.inputs == 38 * (480 * 480 * 3 + 224 * 224 * 3)
    # tokens320 in float32 whatever features.dtype: 20 x 20 at p 16 (320 px), 23 x 23 at p 14 (322 px)
    assert space.tokens320 == 6 * (400 * 384 * 4 + 529 * 384 * 4)
    config["features"]["dtype"] = "float32"
    assert disk(experiment(config), images, geometries, patches).features == 2 * space.features


def test_make_check_prints_the_costs_and_fails_on_a_budget_too_small(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = tiny_config({n: checkpoint_entry(n, "dino-backbone", i, 1) for i, n in enumerate(("a", "b"))})
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump(config))
    text, fits = check("ok.yaml")
    assert fits and "ok.yaml: a valid experiment of 2 checkpoint(s)" in text
    lines = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith("  ")}
    assert lines["extract"] == ["8"] and lines["score_decoder"] == ["2"] and lines["train_probe"] == ["2"]
    assert lines["val"][:5] == ["yes", "10", "0", "4", "6"]  # sealed, budget, spent, needed, left
    assert lines["keys480"][2:4] == ["6.7", "MB"]  # 2 checkpoints x 4 images x 841,728 bytes
    small = copy.deepcopy(config)
    small["datasets"]["val"]["budget"] = 3
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(small))
    assert main(["small.yaml"]) == 1
    out = capsys.readouterr().out
    assert "OVER BUDGET: small.yaml: datasets.val is sealed with budget 3, but this run needs 4 opening(s)" in out
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_the_workflow_refuses_a_run_over_a_sealed_budget_before_any_job(tmp_path):
    """A real run (not a dry run) with two checkpoints and a sealed eval set of budget 3: four openings needed;
    Snakemake stops in its own process, one line naming the data set, the openings and the budget, and no job ran
    (no results/, no log)."""
    ws = Workspace(tmp_path)
    config = tiny_config({n: checkpoint_entry(n, "dino-backbone", i, 1) for i, n in enumerate(("a", "b"))})
    config["datasets"]["val"]["budget"] = 3
    ws.write_config(config)
    out = ws.snakemake(check=False)
    assert "ConfigError" in out
    assert ("config.yaml: datasets.val is sealed with budget 3, but this run needs 4 opening(s) of its labels "
            "(decoder 2, probe 2) and 0 were spent before: raise datasets.val.budget to at least 4") in out
    assert not (ws.work / "results").exists() and not (ws.work / "logs").exists()
