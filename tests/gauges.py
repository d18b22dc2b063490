"""The precision tests' gauge, shared by the CPU and the CUDA tests."""

from __future__ import annotations


def relative_error(a, b) -> float:
    """||a - b|| / ||b|| in float64 on the CPU (a, b: tensors on any device, or arrays): the precision tests' gauge."""
    import torch

    a, b = torch.as_tensor(a).double().cpu(), torch.as_tensor(b).double().cpu()
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))
