"""The figures' settings only a job can check (`figures.attention_image`, `figures.attention_patch`,
`figures.eigenvector_image`): each refused in one line naming the key and what is wrong, nothing written; a
setting inside the range draws (the control). The experiment file goes in front in the job layer
(tests/test_bad_inputs.py: `test_a_config_error_a_job_finds_names_the_experiment_file_the_workflow_read`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import badinputs as bi
from evaluate import ConfigError


@pytest.fixture(scope="module")
def listed(tmp_path_factory):
    """(work folder, spec, manifest file, checkpoint file): two 64 x 80 JPEGs listed as the manifest job lists them
    (ids 5 and 6), and a seeded DINO ViT-S/16 backbone file."""
    from evaluate.datasets.kinds import spec_of
    from evaluate.datasets.manifest import write_manifest
    from evaluate.demo.checkpoints import make_demo_checkpoint

    work = tmp_path_factory.mktemp("figure-settings")
    images, annotations = bi.write_coco(work / "set", n_images=2, height=64, width=80, first_id=5, ext="jpg")
    spec = spec_of("datasets", "val", "coco", images=str(images), annotations=str(annotations))
    write_manifest(spec=spec, roles=("eval",), shard_size=4, out=work / "manifest.json")
    checkpoint = make_demo_checkpoint(work / "dino.pth", fmt="dino-backbone", seed=0, architecture="vit-s16")
    return work, spec, work / "manifest.json", checkpoint


def _rows(listed, out, *, image_id, patch):
    from evaluate.attention.shards import write_attention_rows

    _, spec, manifest, checkpoint = listed
    return write_attention_rows(checkpoint={"name": "dino", "which": "teacher", "position_rule": None},
                                checkpoint_file=checkpoint, spec=spec, manifest_file=manifest, image_id=image_id,
                                patch=patch, out=out, features={"batch_size": 2, "device": "cpu"})


def test_an_attention_image_not_in_the_data_set_is_refused_naming_the_key(listed, tmp_path):
    out = tmp_path / "rows.npz"
    with pytest.raises(ConfigError) as info:
        _rows(listed, out, image_id=7, patch=None)
    assert str(info.value) == f"figures.attention_image: image id 7 is not in data set {listed[2]}"
    assert not out.exists() and not list(tmp_path.iterdir())


def test_an_attention_patch_outside_the_network_s_grid_is_refused_naming_the_key_and_the_checkpoint(listed, tmp_path):
    """ViT-S/16 at 224 px: a 14 x 14 grid, patches 0..195; 196 is one past the last."""
    out = tmp_path / "rows.npz"
    with pytest.raises(ConfigError) as info:
        _rows(listed, out, image_id=6, patch=196)
    message = str(info.value)
    assert message.startswith("figures.attention_patch: patch 196 out of range for 196 patches (the 14 x 14 grid")
    assert str(listed[3]) in message and "leave it unset" in message and "\n" not in message
    assert not out.exists() and not list(tmp_path.iterdir())


def test_the_last_patch_of_the_grid_draws_its_rows(listed, tmp_path):
    """Control for the refusal above: patch 195 of image 6 gives one row of 196 weights per head, each summing
    to 1."""
    out = _rows(listed, tmp_path / "rows.npz", image_id=6, patch=195)
    with np.load(out) as saved:
        assert int(saved["image_id"]) == 6 and int(saved["patch"]) == 195
        rows = saved["rows"]
    assert rows.shape == (6, 196) and rows.dtype == np.float32  # ViT-S's six heads over the 14 x 14 keys
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=1e-5)


def test_an_eigenvector_image_not_in_the_data_set_is_refused_naming_the_key(listed):
    from decoders.shards import eigenvector_of_image

    manifest = json.loads(listed[2].read_text())
    with pytest.raises(ConfigError) as info:
        eigenvector_of_image(manifest, [], settings=None, image_id=4, dataset="val")
    assert str(info.value) == "figures.eigenvector_image: image id 4 is not in data set val"
