"""CUDA agrees with the CPU reference within the documented tolerance (README, "Devices").

Runs only where a CUDA device is present (skipped elsewhere): nothing in the product depends on a GPU.
Tolerances, as relative Frobenius errors ||cuda - cpu|| / ||cpu|| of one batch of keys480 and tokens224:
float32 (TF32 off) <= 1e-4; float16 autocast <= 2e-2.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evaluate.networks.vit import vit_small

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here; the CPU path is the reference")

FLOAT32_TOLERANCE = 1e-4
AUTOCAST_TOLERANCE = 2e-2


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


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


@pytest.mark.parametrize("size, method", [(480, "last_keys"), (224, "tokens")])
def test_cuda_autocast_matches_cpu_within_half_precision(models, size, method):
    cpu, gpu = models
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref = getattr(cpu, method)(x)
        with torch.autocast("cuda", dtype=torch.float16):
            out = getattr(gpu, method)(x.cuda())
    assert np.isfinite(out.float().cpu().numpy()).all()
    assert relative_error(out, ref) <= AUTOCAST_TOLERANCE


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
                                   device=device)
    for kind in ("keys480", "tokens224"):
        ref = torch.from_numpy(np.load(out["cpu"] / f"{kind}.npy"))
        got = torch.from_numpy(np.load(out["cuda"] / f"{kind}.npy"))
        assert relative_error(got, ref) <= FLOAT32_TOLERANCE, kind
