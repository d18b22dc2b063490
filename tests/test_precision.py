"""features.precision (docs/design.md §3): the setting reaches the network; bfloat16 differs from float32 by its own
rounding and agrees within the bound measured on real photos; bfloat16 features are the same bytes run after run;
a float32 run after a bfloat16 one is untouched by it; float16 on the CPU is refused before anything is written, and
a CPU without bfloat16 units says in the log that bfloat16 is slower there.

bfloat16 runs slowly on a CPU without bfloat16 units, so the networks here see small inputs (64 x 64, 16 patches)
or are two blocks deep.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from evaluate.pixels.geometry import SEED

from evaluate.datasets.coco import CocoDataset
from gauges import relative_error
from sources import demo_coco
from evaluate.demo.checkpoints import demo_network
from evaluate.networks.vit import VisionTransformer
from evaluate.readings import features
from evaluate.readings.features import FeatureError, extract_shard, network_precision
from evaluate.pixels.images import normalise_pixels

# Relative error ||bfloat16 - float32|| / ||float32|| of keys480 and tokens224, per architecture. On coco2017-mini
# photos the seeded checkpoints gave at most 6e-3 (ViT-S/16, its LayerScale form, XCiT-S12/16) and 2.4e-2
# (Aug-ViT-S) (bench/precision.py, docs/devices.md; docs/design.md §3); bfloat16 keeps 8 significant bits
# (2^-9 = 2e-3 relative per rounding), so the bounds are about three times the measured figures.
BFLOAT16_BOUND = {"vit-s16": 2e-2, "vit-s16-layerscale": 2e-2, "xcit-s12-16": 2e-2, "augvit-s16": 6e-2}
# float32 against float32 computed the same way is exact; a bfloat16 run must differ by far more than float32's own
# rounding (1e-7), or it did not run in bfloat16.
BFLOAT16_AT_LEAST = 1e-4


@pytest.fixture(scope="module")
def demo_ds(tmp_path_factory) -> CocoDataset:
    return demo_coco(tmp_path_factory, 2, seed=5)


@pytest.fixture(scope="module")
def small_input(demo_ds) -> torch.Tensor:
    """Demo image 1 resized to 64 x 64, normalised: (1, 3, 64, 64) float32."""
    pixels = np.asarray(demo_ds.open_image(1).resize((64, 64)), dtype=np.uint8)
    return normalise_pixels(pixels[None])


def seeded(architecture: str) -> torch.nn.Module:
    return demo_network(architecture, 0).eval()


@pytest.mark.parametrize("architecture", [a if a == "vit-s16" else pytest.param(a, marks=pytest.mark.slow)
                                          for a in BFLOAT16_BOUND])
def test_bfloat16_differs_from_float32_within_the_measured_bound(architecture, small_input):
    model = seeded(architecture)
    with torch.inference_mode():
        reference = {"keys": model.last_keys(small_input), "tokens": model.tokens(small_input)}
        with network_precision("bfloat16", "cpu"):
            lowered = {"keys": model.last_keys(small_input), "tokens": model.tokens(small_input)}
        again = {"keys": model.last_keys(small_input), "tokens": model.tokens(small_input)}
    for reading in reference:
        error = relative_error(lowered[reading], reference[reading])
        assert BFLOAT16_AT_LEAST < error < BFLOAT16_BOUND[architecture], (reading, error)
        # a float32 run after the bfloat16 one gives the float32 numbers: nothing cached (position tables) was
        # computed in bfloat16
        assert torch.equal(again[reading], reference[reading]), reading


def test_position_tables_stay_float32_under_autocast(small_input):
    """The cached tables (ViT's resampled position table, XCiT's Fourier encoding) are float32 islands."""
    vit, xcit = seeded("vit-s16"), seeded("xcit-s12-16")
    with torch.inference_mode(), network_precision("bfloat16", "cpu"):
        assert vit.pos_embed_for((4, 4)).dtype == torch.float32
        assert xcit.pos_embeder((4, 4)).dtype == torch.float32
        assert vit.prepare_tokens(small_input).dtype == torch.float32  # the residual stream starts in float32
        assert xcit.prepare_tokens(small_input)[0].dtype == torch.float32


class AutocastRecorder(torch.nn.Module):
    """Records the autocast state each reading runs under; returns constant features."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[str, bool, torch.dtype]] = []
        self.geometry, self.form = SEED, "backbone"  # the seed's sizes: keys480 (900, 384), tokens224 (196, 384)

    def _record(self, reading: str, x: torch.Tensor, n: int) -> torch.Tensor:
        self.seen.append((reading, torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return torch.ones(x.shape[0], n, 384)

    def last_keys(self, x):
        return self._record("keys480", x, 900)

    def tokens(self, x):
        return self._record("tokens224", x, 196)


@pytest.mark.parametrize("precision, autocast", [("float32", False), ("bfloat16", True)])
def test_the_setting_reaches_the_network_and_meta_json(precision, autocast, demo_ds, tmp_path):
    model = AutocastRecorder()
    extract_shard(model, demo_ds, [1, 2], tmp_path, batch_size=1, dtype="float16", precision=precision)
    assert [(reading, enabled) for reading, enabled, _ in model.seen] == [
        ("keys480", autocast), ("tokens224", autocast)] * 2
    if autocast:
        assert {dtype for _, _, dtype in model.seen} == {torch.bfloat16}
    assert json.loads((tmp_path / "meta.json").read_text())["precision"] == precision


def test_bfloat16_features_are_the_same_bytes_run_after_run(demo_ds, tmp_path):
    """Two blocks of ViT-S/16 through the real extraction, twice in bfloat16 on two threads, once in float32."""
    torch.manual_seed(0)
    model = VisionTransformer(depth=2).eval()
    runs = {}
    for name, precision in (("first", "bfloat16"), ("second", "bfloat16"), ("float32", "float32")):
        runs[name] = extract_shard(model, demo_ds, [1], tmp_path / name, batch_size=1, dtype="float32", threads=2,
                                   precision=precision)
    for kind in ("keys480", "tokens224"):
        first, second = ((runs[n] / f"{kind}.npy").read_bytes() for n in ("first", "second"))
        assert first == second, kind
        lowered, reference = (np.load(runs[n] / f"{kind}.npy") for n in ("first", "float32"))
        assert BFLOAT16_AT_LEAST < relative_error(lowered, reference) < BFLOAT16_BOUND["vit-s16"], kind
    assert (runs["first"] / "meta.json").read_bytes() == (runs["second"] / "meta.json").read_bytes()


@pytest.mark.badinput
def test_float16_on_the_cpu_is_refused_before_anything_is_written(demo_ds, tmp_path):
    with pytest.raises(FeatureError, match="features.precision: float16 runs on CUDA only.*choose bfloat16"):
        extract_shard(AutocastRecorder(), demo_ds, [1], tmp_path / "shard", batch_size=1, dtype="float16",
                      precision="float16")
    assert not (tmp_path / "shard").exists()


@pytest.mark.parametrize("units", [False, True])
def test_bfloat16_on_a_cpu_without_bfloat16_units_warns_in_the_log(units, monkeypatch, caplog):
    monkeypatch.setattr(features, "cpu_has_bfloat16_units", lambda: units)
    with caplog.at_level(logging.WARNING, logger="evaluate.readings.features"):
        network_precision("bfloat16", "cpu")
        network_precision("float32", "cpu")
    warned = [r.getMessage() for r in caplog.records if "SLOWER than in float32" in r.getMessage()]
    assert len(warned) == (0 if units else 1)
