"""CUDA agrees with the CPU reference within the documented tolerance (docs/devices.md).

Runs only where a CUDA device is present (skipped elsewhere): nothing in the product depends on a GPU.
Tolerances, as relative Frobenius errors ||cuda - cpu float32|| / ||cpu float32|| of one batch of keys480 and
tokens224: float32 (TF32 off) <= 1e-4; `features.precision` bfloat16 and float16 (autocast) <= 2e-2, the bound
tests/test_precision.py justifies for bfloat16 on the CPU (float16 keeps 3 more bits than bfloat16).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from evaluate.networks.vit import vit_small
from evaluate.readings.features import network_precision
from gauges import relative_error

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here; the CPU path is the reference")

FLOAT32_TOLERANCE = 1e-4
AUTOCAST_TOLERANCE = 2e-2
LOWER_PRECISIONS = ("bfloat16", "float16")


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    cpu = vit_small().eval()
    gpu = vit_small().eval()
    gpu.load_state_dict(cpu.state_dict())
    return cpu, gpu.cuda()


@pytest.mark.parametrize("size, method", [(480, "last_keys"), (224, "tokens")])
def test_cuda_float32_matches_cpu(models, size, method):
    cpu, gpu = models
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref = getattr(cpu, method)(x)
        out = getattr(gpu, method)(x.cuda())
    assert relative_error(out, ref) <= FLOAT32_TOLERANCE


@pytest.mark.parametrize("precision", LOWER_PRECISIONS)
@pytest.mark.parametrize("size, method", [(480, "last_keys"), (224, "tokens")])
def test_cuda_lower_precision_matches_cpu_float32_within_its_bound(models, size, method, precision):
    cpu, gpu = models
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref = getattr(cpu, method)(x)
        reference_on_gpu = getattr(gpu, method)(x.cuda())
        with network_precision(precision, "cuda"):
            out = getattr(gpu, method)(x.cuda())
        again = getattr(gpu, method)(x.cuda())
    assert np.isfinite(out.float().cpu().numpy()).all()
    assert 1e-4 < relative_error(out, ref) <= AUTOCAST_TOLERANCE  # it ran in the lower precision, within bound
    assert torch.equal(again, reference_on_gpu)  # nothing cached in the lower precision leaks into float32


@pytest.mark.parametrize("precision", LOWER_PRECISIONS)
def test_extraction_in_lower_precision_on_cuda_records_it_and_repeats_itself(models, tmp_path, precision):
    from evaluate.demo.scenes import make_demo_dataset
    from evaluate.datasets.coco import CocoDataset
    from evaluate.readings.features import extract_inputs
    from evaluate.readings.inputs import StoredInputs, preprocess_shard

    cpu, gpu = models
    make_demo_dataset(tmp_path / "demo", 2, seed=3)
    dataset = CocoDataset(tmp_path / "demo" / "images", tmp_path / "demo" / "annotations.json")
    folder = preprocess_shard(dataset, [1, 2], tmp_path / "inputs", workers=1)
    runs = [extract_inputs(gpu, StoredInputs(folder), tmp_path / f"run{i}", batch_size=2, dtype="float32",
                           device="cuda", precision=precision) for i in range(2)]
    reference = extract_inputs(cpu, StoredInputs(folder), tmp_path / "cpu", batch_size=2, dtype="float32",
                               device="cpu", precision="float32")
    for kind in ("keys480", "tokens224"):
        assert (runs[0] / f"{kind}.npy").read_bytes() == (runs[1] / f"{kind}.npy").read_bytes(), kind
        got, ref = (torch.from_numpy(np.load(path / f"{kind}.npy")) for path in (runs[0], reference))
        assert relative_error(got, ref) <= AUTOCAST_TOLERANCE, kind
    assert json.loads((runs[0] / "meta.json").read_text())["precision"] == precision


def test_extraction_from_decoded_inputs_on_cuda_matches_cpu(models, tmp_path):
    """The CUDA path of `extract_inputs`: pinned batches, asynchronous copies; float32 features agree with the CPU's."""
    from evaluate.demo.scenes import make_demo_dataset
    from evaluate.datasets.coco import CocoDataset
    from evaluate.readings.features import extract_inputs
    from evaluate.readings.inputs import StoredInputs, preprocess_shard

    cpu, gpu = models
    make_demo_dataset(tmp_path / "demo", 5, seed=3)
    dataset = CocoDataset(tmp_path / "demo" / "images", tmp_path / "demo" / "annotations.json")
    folder = preprocess_shard(dataset, [1, 2, 3, 4, 5], tmp_path / "inputs", workers=2)
    out = {}
    for name, model, device in (("cpu", cpu, "cpu"), ("cuda", gpu, "cuda")):
        out[name] = extract_inputs(model, StoredInputs(folder), tmp_path / name, batch_size=2, dtype="float32",
                                   device=device, precision="float32")
    for kind in ("keys480", "tokens224"):
        ref = torch.from_numpy(np.load(out["cpu"] / f"{kind}.npy"))
        got = torch.from_numpy(np.load(out["cuda"] / f"{kind}.npy"))
        assert relative_error(got, ref) <= FLOAT32_TOLERANCE, kind
