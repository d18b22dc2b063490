"""The one reading runner (evaluate/readings/runner.py): it decides the network's form once (the reading's own where its
protocol fixes one, else the config's `features.form`), reads the manifest's shard, hands the body the network on its
device, opens the data set only when the body asks, writes the meta last with the file's identity, and leaves no
meta beside arrays a failed body did not finish."""

from __future__ import annotations

import json

import pytest

from evaluate.datasets.kinds import spec_of
from evaluate.datasets.manifest import write_manifest
from evaluate.readings.runner import Reading, run_reading

CHECKPOINT = {"name": "dino", "which": "teacher", "position_rule": None}


@pytest.fixture(scope="module")
def listed(tmp_path_factory):
    """A demo COCO set of 3 images in shards of 2, listed by the one manifest writer, and a seeded DINO ViT-S/16."""
    from evaluate.demo.checkpoints import make_demo_checkpoint
    from evaluate.demo.scenes import make_demo_dataset

    work = tmp_path_factory.mktemp("runner")
    make_demo_dataset(work / "set", 3, seed=4)
    spec = spec_of("datasets", "set", images=str(work / "set" / "images"),
                   annotations=str(work / "set" / "annotations.json"))
    write_manifest(spec=spec, roles=(), shard_size=2, out=work / "manifest.json")
    checkpoint = make_demo_checkpoint(work / "dino.pth", fmt="dino-backbone", seed=0, architecture="vit-s16")
    return work, spec, checkpoint


def run(listed, reading, body, *, form="backbone", shard="001", meta="meta.json"):
    work, spec, checkpoint = listed
    return run_reading(reading, body, checkpoint=CHECKPOINT, checkpoint_file=checkpoint, spec=spec,
                       manifest_file=work / "manifest.json", shard=shard, meta_out=work / meta,
                       features={"form": form, "device": "cpu", "precision": "float32"})


def test_the_reading_s_own_form_wins_over_the_config_s_and_the_meta_says_what_ran(listed):
    seen = {}

    def body(shard):
        seen.update(form=shard.model.form, units=shard.units, opened="dataset" in vars(shard))
        return {"n_images": len(shard.units)}

    meta = run(listed, Reading("fixed", form="released"), body, form="backbone")
    assert seen == {"form": "released", "units": [3], "opened": False}  # shard 001 of ids 1, 2, 3: the last
    assert (meta["reading"], meta["form"], meta["shard"], meta["n_images"]) == ("fixed", "released", "001", 1)
    assert (meta["patch"], meta["width"], meta["registers"], meta["device"]) == (16, 384, 0, "cpu")
    manifest = json.loads((listed[0] / "manifest.json").read_text())
    assert meta["manifest_sha256"] == manifest["manifest_sha256"] and meta["checkpoint"] == "dino"
    assert json.loads((listed[0] / "meta.json").read_text()) == meta
    meta = run(listed, Reading("free"), body, form="released", shard="000")
    assert seen["form"] == "released" and seen["units"] == [1, 2] and meta["form"] == "released"
    run(listed, Reading("free"), body, form="backbone", shard="000")
    assert seen["form"] == "backbone"


def test_a_body_that_fails_leaves_no_meta_where_an_old_one_was(listed):
    (listed[0] / "old.json").write_text("{}")

    def body(shard):
        assert shard.dataset.image_ids == [1, 2, 3]  # opened when asked for, checked against the manifest
        raise RuntimeError("killed halfway")

    with pytest.raises(RuntimeError, match="killed halfway"):
        run(listed, Reading("any"), body, meta="old.json")
    assert not (listed[0] / "old.json").exists()  # it would have vouched for arrays about to be replaced


def test_a_shard_the_manifest_lacks_is_one_line_naming_the_manifest(listed):
    from evaluate.datasets import DataSetError

    with pytest.raises(DataSetError, match=r"manifest\.json: shard 002 does not exist \(the manifest has 2 shards\)"):
        run(listed, Reading("any"), lambda shard: {}, shard="002")
