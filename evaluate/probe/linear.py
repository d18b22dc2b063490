"""The linear probe on tokens224: a deterministic multinomial logistic regression (docs/design.md §6).

- One linear layer D -> K + 1 (D the tokens' width: 384 for ViT-S, 768 for ViT-B, 1024 for ViT-L, read from the
  features). Training objective, on standardised features x~ = (x - mean) / std (mean, std
  of the training tokens, float64; a constant feature gets std 1):
  `L(W, b) = (1 / N) sum_i -log softmax(W x~_i + b)[y_i] + (weight_decay / 2) ||W||_F^2` (bias not penalised).
  Tokens labelled 255 are not used. The standardisation is folded into the stored layer
  (W' = W / std, b' = b - W' mean), so the saved probe is a plain linear layer on raw tokens.
- Minimiser: scipy's L-BFGS-B from W = 0, b = 0, with `gtol = tol`, `ftol = 64 eps`, `maxls = 50`, `maxiter =
  max_iter` (scikit-learn's lbfgs settings); loss and gradient from two float32 products in torch per chunk of
  65,536 tokens (logits = W x~ + b by oneDNN's inner product, then softmax-minus-one-hot times x~^T by MKL's
  GEMM; `_token_chunks`), the log-softmax in float32 and the loss and gradient summed over chunks in float64.
  scipy's BLAS is held to one thread during the fit: its idle threads would otherwise spin on the cores torch
  needs. Deterministic: no randomness; the same inputs, library versions and torch thread count give bit-identical
  weights (thread count and product kernel are recorded in the probe's metadata).
- scikit-learn equivalence: `LogisticRegression(C = 1 / (weight_decay * N), solver="lbfgs")` on the same
  standardised features minimises the same objective (its loss is `C * sum CE + ||W||^2 / 2`, i.e. ours times
  1 / weight_decay); it has no outputs for classes absent from training, whose logits ours pushes down.
- Settings: `weight_decay`, `max_iter`, `tol` and `max_tokens` come from config.yaml's `probe` section; their
  defaults, and why they are what they are, live in workflow/schemas/config.schema.yaml. When there are more
  non-ignored training tokens than `max_tokens`, the training set is a uniform, seeded subsample across all images.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from evaluate.plumbing.atomic import atomic_path
from evaluate.probe import ProbeError
from evaluate.probe.labels import IGNORE


def probe_setting(weight_decay: float, max_iter: int) -> str:
    """The probe's setting as the ledger names it, e.g. `linear,wd=0.0001,it=100`."""
    return f"linear,wd={weight_decay:g},it={max_iter}"


@dataclass
class LinearProbe:
    """One linear layer on raw tokens224: logits = tokens @ weight.T + bias.

    weight: float32 (C, D), bias: float32 (C,), C = K + 1 (class 0 background), D the tokens' width; meta: how it
    was trained.
    """

    weight: np.ndarray
    bias: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_classes(self) -> int:
        return int(self.weight.shape[0])

    @property
    def width(self) -> int:
        """D: the width of the tokens the probe reads."""
        return int(self.weight.shape[1])

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """tokens float (..., D) -> logits float32 (..., C)."""
        x = torch.as_tensor(np.asarray(tokens, dtype=np.float32))
        if x.ndim < 1 or x.shape[-1] != self.width:
            raise ProbeError(f"the probe reads tokens {self.width} wide, got an array of shape {tuple(x.shape)}: "
                             "it was trained on another network's features")
        w = torch.from_numpy(self.weight)
        return (x @ w.T + torch.from_numpy(self.bias)).numpy()

    def save(self, path: str | os.PathLike) -> None:
        """Write the probe as safetensors (`weight`, `bias`) with `meta` as JSON metadata, atomically."""
        from safetensors.numpy import save_file

        with atomic_path(path) as tmp:
            save_file(
                {"weight": np.ascontiguousarray(self.weight), "bias": np.ascontiguousarray(self.bias)},
                str(tmp),
                metadata={"probe": json.dumps(self.meta, sort_keys=True)},
            )

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LinearProbe":
        """Read a probe written by `save`; a missing tensor or a shape mismatch is a ProbeError naming the file."""
        from safetensors import safe_open

        path = Path(path)
        try:
            with safe_open(str(path), framework="numpy") as f:
                keys = set(f.keys())
                if keys != {"weight", "bias"}:
                    raise ProbeError(f"{path}: a probe file holds tensors weight and bias, found {sorted(keys)}")
                weight, bias = f.get_tensor("weight"), f.get_tensor("bias")
                meta = json.loads((f.metadata() or {}).get("probe", "{}"))
        except ProbeError:
            raise
        except Exception as exc:  # safetensors raises its own types for unreadable files
            raise ProbeError(f"{path}: not a readable probe file ({exc})") from None
        if weight.ndim != 2 or weight.shape[1] < 1 or bias.shape != (weight.shape[0],):
            raise ProbeError(f"{path}: weight {weight.shape} and bias {bias.shape} are not (C, D) and (C,)")
        return cls(weight.astype(np.float32), bias.astype(np.float32), meta)


def _standardised_columns(x: np.ndarray, rows: int = 32) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """The training tokens (N, D) standardised and transposed: (x~ float32 (D, N), mean float64 (D,), std float64 (D,)).

    x~[f] = float32((x[:, f] - mean[f]) / std[f]) computed in float64; mean and std per feature in float64 (two
    passes); a constant feature gets std 1. Feature-major (D, N): the per-feature statistics are then contiguous
    rows, worked `rows` features at a time so no (N, D) float64 copy exists.
    """
    n, width = x.shape
    xt = torch.empty((width, n), dtype=torch.float32)
    step = 16384
    for s in range(0, n, step):
        xt[:, s : s + step] = torch.from_numpy(np.asarray(x[s : s + step], dtype=np.float32)).T
    mean = np.empty(width, dtype=np.float64)
    std = np.empty(width, dtype=np.float64)
    for f in range(0, width, rows):
        block = xt[f : f + rows].double()
        m = block.sum(dim=1, keepdim=True) / n
        v = (block - m).square_().sum(dim=1, keepdim=True) / n
        sd = v.sqrt_()
        sd[~(sd > 1e-12)] = 1.0
        xt[f : f + rows] = block.sub_(m).div_(sd)
        mean[f : f + rows], std[f : f + rows] = m.ravel().numpy(), sd.ravel().numpy()
    return xt, mean, std


TOKEN_CHUNK = 65_536


def _token_chunks(
    xs_t: torch.Tensor, chunk: int = TOKEN_CHUNK
) -> tuple[str, list[tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor]]]]:
    """The objective's two products over the standardised tokens, in chunks of `chunk` tokens, and the kernel's name.

    xs_t: float32 (D, N). Per chunk k of m tokens: forward(w float32 (C, D)) -> float32 (C, m) = w @ xs_t[:, k];
    backward(g float32 (C, m)) -> float32 (C, D) = g @ xs_t[:, k].T. Chunks keep one chunk's (C, m) logits in
    cache while they become softmax and gradient (81 classes, 300,000 tokens: 305 ms an evaluation against 453 ms
    in one piece). The forward runs as oneDNN's fp32 inner product (torch's mkldnn, in the CPU wheels) on a
    token-major copy of the chunk: 22 ms against MKL's 30 ms at 120,000 tokens and 21 classes, 161 against 189 ms at
    300,000 and 81; the backward is MKL's GEMM on the feature-major tokens, as fast as oneDNN there and without a
    third copy. Without oneDNN, MKL for both. Either way float32 and deterministic for a given thread count.
    """
    n = xs_t.shape[1]
    starts = range(0, n, chunk)
    if not (torch.backends.mkldnn.is_available() and hasattr(torch._C._nn, "mkldnn_linear")):
        views = [xs_t[:, s : s + chunk] for s in starts]
        return "mkl-fp32", [((lambda w, v=v: torch.mm(w, v)), (lambda g, v=v: torch.mm(g, v.T))) for v in views]
    linear = torch._C._nn.mkldnn_linear
    products = []
    for s in starts:
        cols = xs_t[:, s : s + chunk]
        rows = cols.T.contiguous().to_mkldnn()  # (m, D): forward contracts over features

        def forward(w: torch.Tensor, rows=rows) -> torch.Tensor:
            return linear(w.to_mkldnn(), rows, None).to_dense()

        def backward(g: torch.Tensor, cols=cols) -> torch.Tensor:
            return torch.mm(g, cols.T)

        products.append((forward, backward))
    return "onednn-fp32", products


def fit_probe(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    *,
    weight_decay: float,
    max_iter: int,
    tol: float,
) -> LinearProbe:
    """Train the probe: multinomial logistic regression with L2 on standardised features (module docstring).

    features: float (N, D) tokens (D any width); labels: int (N,) in 0..n_classes-1 or 255 (left out); n_classes = K + 1
    (background and K categories). Returns a LinearProbe on raw tokens; meta records the fit.
    """
    from scipy.optimize import minimize
    from threadpoolctl import threadpool_limits

    x_all = np.asarray(features)
    y_all = np.asarray(labels).astype(np.int64)
    if x_all.ndim != 2 or x_all.shape[1] < 1 or y_all.shape != (x_all.shape[0],):
        raise ProbeError(f"fit_probe: features must be (N, D) with labels (N,), got {x_all.shape} and {y_all.shape}")
    keep = y_all != IGNORE
    x, y = (x_all, y_all) if keep.all() else (x_all[keep], y_all[keep])  # training_tokens leaves no 255
    n, d, c = x.shape[0], x.shape[1], int(n_classes)
    if n == 0:
        raise ProbeError("fit_probe: no training token has a label (all are 255 = ignore)")
    if y.min() < 0 or y.max() >= c:
        raise ProbeError(f"fit_probe: labels must lie in 0..{c - 1} (or 255), found {y.min()}..{y.max()}")
    if not np.all(np.isfinite(x)):
        raise ProbeError("fit_probe: features contain NaN or infinite values")
    xs_t, mean, std = _standardised_columns(x)  # (d, n) float32
    kernel, products = _token_chunks(xs_t)
    if kernel != "mkl-fp32":
        del xs_t  # the chunks hold their own copies
    # per chunk: flat index of (y_i, i) in its (c, m) logits
    label_at = [yc * yc.numel() + torch.arange(yc.numel()) for yc in torch.from_numpy(y).split(TOKEN_CHUNK)]
    minus_one = torch.tensor(-1.0)
    lam = float(weight_decay)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        params = theta.reshape(c, d + 1)
        w64 = params[:, :d]
        w = torch.from_numpy(np.ascontiguousarray(w64, dtype=np.float32))
        b = torch.from_numpy(np.ascontiguousarray(params[:, d], dtype=np.float32))
        true_log_p = torch.zeros((), dtype=torch.float64)
        grad_w = torch.zeros((c, d), dtype=torch.float64)
        grad_b = torch.zeros(c, dtype=torch.float64)
        for (forward, backward), at in zip(products, label_at):
            log_p = torch.log_softmax(forward(w).add_(b[:, None]), dim=0)  # (c, m)
            true_log_p += log_p.view(-1)[at].sum(dtype=torch.float64)
            residual = log_p.exp_()  # softmax
            residual.view(-1).index_put_((at,), minus_one, accumulate=True)  # d CE / d logits
            grad_w += backward(residual)
            grad_b += residual.sum(dim=1)
        grad = np.empty((c, d + 1), dtype=np.float64)
        grad[:, :d] = grad_w.numpy() / n + lam * w64
        grad[:, d] = grad_b.numpy() / n
        loss = -true_log_p.item() / n + 0.5 * lam * float(np.sum(w64 * w64))
        return loss, grad.ravel()

    # L-BFGS-B's own vector updates call BLAS; left multi-threaded, that BLAS's idle threads spin between calls and
    # take the cores from torch's products (measured: 123 ms vs 57 ms per evaluation on 2 cores). One BLAS thread.
    with threadpool_limits(limits=1, user_api="blas"):
        result = minimize(
            objective,
            np.zeros(c * (d + 1), dtype=np.float64),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": int(max_iter), "gtol": float(tol), "ftol": 64 * np.finfo(float).eps, "maxls": 50},
        )
    params = result.x.reshape(c, d + 1)
    w_raw = params[:, :d] / std  # fold the standardisation into the layer
    b_raw = params[:, d] - w_raw @ mean
    meta = {
        "objective": "mean cross-entropy + weight_decay/2 ||W||^2 on standardised tokens; bias unpenalised",
        "n_classes": c,
        "n_train_tokens": int(n),
        "n_ignored_tokens": int((~keep).sum()),
        "classes_present": int(np.unique(y).size),
        "weight_decay": lam,
        "max_iter": int(max_iter),
        "tol": float(tol),
        "iterations": int(result.nit),
        "evaluations": int(result.nfev),
        "converged": bool(result.success),
        "message": str(result.message),
        "final_objective": float(result.fun),
        "torch_threads": int(torch.get_num_threads()),
        "products": kernel,
    }
    return LinearProbe(w_raw.astype(np.float32), b_raw.astype(np.float32), meta)


def training_tokens(
    reader: Any, labels: np.ndarray, *, max_tokens: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The probe's training set from feature shards: (features float32 (M, D), labels uint8 (M,)).

    reader: `evaluate.readings.features.FeatureReader` (`.image_ids`, `.iter_shards("tokens224")` yielding (image_ids,
    array (m, N224, D))); labels: uint8 (n, N224) patch labels in `reader.image_ids` order, on the same grid as the
    tokens (`patch_labels` with the shards' patch); N224 and D are read from the arrays. The non-ignored tokens
    are numbered in image order, patch order; when there are more than `max_tokens`, a uniform subsample of
    `max_tokens` of them is kept, `numpy.random.default_rng(seed).choice(total, max_tokens, replace=False)` sorted.
    Only one shard is in memory at a time.
    """
    labels = np.asarray(labels)
    ids = [int(i) for i in reader.image_ids]
    if labels.ndim != 2 or labels.shape[0] != len(ids):
        raise ProbeError(f"training_tokens: labels {labels.shape} are not one row of patch labels per image "
                         f"({len(ids)} images)")
    n_patches = labels.shape[1]
    valid = (labels != IGNORE).ravel()
    total = int(valid.sum())
    if total == 0:
        raise ProbeError("training_tokens: every patch of the probe-train data set is ignored (crowd)")
    chosen_flat = np.flatnonzero(valid)
    if total > max_tokens:
        pick = np.sort(np.random.default_rng(seed).choice(total, int(max_tokens), replace=False))
        chosen_flat = chosen_flat[pick]
    feats: np.ndarray | None = None  # (M, D) once the first shard gives D
    filled, first_image = 0, 0
    for shard_ids, array in reader.iter_shards("tokens224"):
        shard_ids = [int(i) for i in shard_ids]
        m = len(shard_ids)
        if shard_ids != ids[first_image : first_image + m]:
            raise ProbeError("training_tokens: the feature shards' image order differs from reader.image_ids")
        if array.ndim != 3 or array.shape[1] != n_patches:
            raise ProbeError(f"training_tokens: tokens {tuple(array.shape)} are not (m, {n_patches}, D) as the "
                             f"labels' {n_patches} patches per image: labels of another patch size")
        if feats is None:
            feats = np.empty((chosen_flat.size, array.shape[2]), dtype=np.float32)
        lo, hi = first_image * n_patches, (first_image + m) * n_patches
        a, b = np.searchsorted(chosen_flat, [lo, hi])
        local = chosen_flat[a:b] - lo
        flat = np.asarray(array).reshape(m * n_patches, feats.shape[1])
        feats[filled : filled + local.size] = flat[local]
        filled += local.size
        first_image += m
    if first_image != len(ids) or filled != chosen_flat.size:
        raise ProbeError(f"training_tokens: the shards hold {first_image} images, the reader lists {len(ids)}")
    return feats, labels.ravel()[chosen_flat]
