"""Linear probe on tokens224: label maps, patch labels, a deterministic multinomial logistic regression, scores.

Labels (docs/design.md §6)
- `probe_classes(categories)`: the probe-train set's categories become classes 1..K in category-id order; 0 is
  background. `class_index(classes, categories)` maps any data set's category ids to these classes by NAME, so a
  data set that numbers the same classes differently is scored right, and one whose id 1 means something else is
  refused instead of silently scored as class 1.
- `label_map`: each pixel gets the class of the non-crowd instance covering it. Overlaps: the instance with fewer
  decoded pixels wins; on equal areas the higher annotation id. An instance wins over a crowd region; crowd pixels
  that no instance covers are 255 (ignore); everything else is 0.
- `label_map224`: the tokens224 geometry (`evaluate.readings.images.tokens224_geometry`): PIL NEAREST resize of the uint8
  map to (new_w, new_h), then the 224 x 224 crop at (left, top).
- `patch_labels`: per 16 x 16 patch (row-major over the 14 x 14 grid, as the tokens), the majority label of its
  256 pixels not 255; more than 128 ignore pixels -> 255; a tied majority goes to the lowest label.

Probe
- One linear layer 384 -> K + 1. Training objective, on standardised features x~ = (x - mean) / std (mean, std
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

Scores on eval (per image): logits (196, K+1) -> (14, 14) -> bilinear upsample to 224 x 224
(`torch.nn.functional.interpolate`, align_corners=False) -> argmax (first maximum) -> confusion against the
label map224, 255 pixels left out. mIoU (%) from the pooled confusion over classes with nonzero union
(background included). Patch accuracy (%) = correct / valid patches, from per-image [correct, valid] ("ratio").
95% percentile bootstrap intervals over images as for Jaccard: `probe_measures` hands the per-image statistics to
`evaluate.scores.measures.make_measure` (reducers "miou" and "ratio" of `evaluate.scores.masks.bootstrap_ci`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import torch
from PIL import Image

from evaluate import EvaluationError
from evaluate.plumbing.atomic import atomic_path
from evaluate.readings.geometry import PATCH, TOKENS224_GRID, TOKENS224_SIZE, WIDTH

IGNORE = 255
GRID = TOKENS224_GRID
SIZE = TOKENS224_SIZE
N_PATCHES = GRID * GRID
FEATURE_DIM = WIDTH


class ProbeError(EvaluationError):
    """Labels, features or a probe file the probe cannot use; the message names the image, array or file."""


# ----------------------------------------------------------------------------------------------------------- labels


def probe_classes(categories: Mapping[int, str], where: str) -> list[str]:
    """The probe's classes: the probe-train set's category names in category-id order (class k + 1 = names[k]).

    categories: category id -> name of the probe-train data set. Names must be unique: classes are matched by
    name across data sets.
    """
    ids = sorted(int(c) for c in categories)
    if not ids:
        raise ProbeError(f"{where}: the category list is empty; the probe needs at least one category")
    if len(ids) > 254:
        raise ProbeError(f"{where}: {len(ids)} categories do not fit uint8 labels (at most 254; 255 is ignore)")
    names = [str(categories[c]) for c in ids]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ProbeError(f"{where}: category name(s) {repeated} appear more than once; classes are matched by name")
    return names


def unmatched_categories(classes: Sequence[str], categories: Mapping[int, str]) -> list[str]:
    """The category names of a data set that are not among the probe's classes, sorted."""
    known = set(classes)
    return sorted({str(n) for n in categories.values() if str(n) not in known})


def class_index(classes: Sequence[str], categories: Mapping[int, str], where: str) -> dict[int, int]:
    """A data set's category id -> probe class 1..K, matched by NAME (never by id alone).

    classes: `probe_classes` of the probe-train set; categories: category id -> name of the data set scored.
    A category name the probe does not know is a ProbeError naming them (config-time checks catch it first).
    """
    missing = unmatched_categories(classes, categories)
    if missing:
        raise ProbeError(f"{where}: category name(s) {missing} are not among the probe's classes "
                         f"({', '.join(classes)}); set probe: false on this data set to score it by the decoder only")
    class_of_name = {name: k + 1 for k, name in enumerate(classes)}
    return {int(c): class_of_name[str(n)] for c, n in categories.items()}


def probe_setting(weight_decay: float, max_iter: int) -> str:
    """The probe's setting as the ledger names it, e.g. `linear,wd=0.0001,it=100`."""
    return f"linear,wd={weight_decay:g},it={max_iter}"


def _coco_of(source: Any) -> Any:
    """A pycocotools COCO from a COCO object or anything holding one as `.coco` (evaluate.datasets.coco.CocoDataset)."""
    return getattr(source, "coco", source)


def label_map(source: Any, image_id: int, class_of_category: dict[int, int]) -> np.ndarray:
    """Class of every pixel of an image: uint8 (H, W); 0 background, 1..K classes, 255 ignore (crowd only).

    source: pycocotools COCO or an object with `.coco`. Rules: see the module docstring.
    """
    coco = _coco_of(source)
    image_id = int(image_id)
    if image_id not in coco.imgs:
        raise ProbeError(f"label_map: image {image_id} is not in the annotations")
    info = coco.imgs[image_id]
    height, width = int(info["height"]), int(info["width"])
    out = np.zeros((height, width), dtype=np.uint8)
    instances = []
    for ann in coco.imgToAnns.get(image_id, []):
        mask = coco.annToMask(ann).astype(bool)
        if mask.shape != (height, width):
            raise ProbeError(
                f"label_map: image {image_id} annotation {ann.get('id')} decodes to {mask.shape}, "
                f"the image is {(height, width)}"
            )
        if ann.get("iscrowd", 0):
            out[mask] = IGNORE
            continue
        cat = int(ann["category_id"])
        if cat not in class_of_category:
            raise ProbeError(
                f"label_map: image {image_id} annotation {ann.get('id')} has category {cat}, which is not among "
                "the probe's categories (taken from the probe-train data set)"
            )
        instances.append((int(np.count_nonzero(mask)), int(ann["id"]), class_of_category[cat], mask))
    # paint larger first, so smaller instances (and, on equal area, higher ids) are painted last and win
    for _, _, cls, mask in sorted(instances, key=lambda t: (-t[0], t[1])):
        out[mask] = cls
    return out


def label_map224(label_map: np.ndarray) -> np.ndarray:
    """The label map in the tokens224 geometry: uint8 (224, 224) (nearest resize, then the centre crop)."""
    from evaluate.readings.images import tokens224_geometry

    arr = np.asarray(label_map)
    if arr.ndim != 2 or arr.dtype != np.uint8:
        raise ProbeError(f"label_map224: expected a uint8 (H, W) label map, got {arr.dtype} {arr.shape}")
    height, width = arr.shape
    new_w, new_h, left, top = tokens224_geometry(width, height)
    img = Image.fromarray(arr).resize((new_w, new_h), Image.Resampling.NEAREST)
    return np.array(img.crop((left, top, left + SIZE, top + SIZE)), dtype=np.uint8)


def patch_labels(map224: np.ndarray) -> np.ndarray:
    """Label of each 16 x 16 patch, row-major over the 14 x 14 grid: uint8 (196,), 255 = ignored patch."""
    arr = np.asarray(map224)
    if arr.shape != (SIZE, SIZE):
        raise ProbeError(f"patch_labels: expected a (224, 224) label map, got {arr.shape}")
    patches = arr.astype(np.int64).reshape(GRID, PATCH, GRID, PATCH).transpose(0, 2, 1, 3).reshape(N_PATCHES, -1)
    counts = np.bincount((patches + 256 * np.arange(N_PATCHES)[:, None]).ravel(), minlength=256 * N_PATCHES)
    counts = counts.reshape(N_PATCHES, 256)
    ignored = counts[:, IGNORE].copy()
    counts[:, IGNORE] = 0
    labels = counts.argmax(axis=1)  # first maximum: the lowest label on a tie
    labels[ignored > PATCH * PATCH // 2] = IGNORE
    return labels.astype(np.uint8)


def image_patch_labels(source: Any, image_id: int, class_of_category: dict[int, int]) -> np.ndarray:
    """`patch_labels(label_map224(label_map(...)))` of one image: uint8 (196,)."""
    return patch_labels(label_map224(label_map(source, image_id, class_of_category)))


# ------------------------------------------------------------------------------------------------------------ probe


@dataclass
class LinearProbe:
    """One linear layer on raw tokens224: logits = tokens @ weight.T + bias.

    weight: float32 (C, 384), bias: float32 (C,), C = K + 1 (class 0 background); meta: how it was trained.
    """

    weight: np.ndarray
    bias: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_classes(self) -> int:
        return int(self.weight.shape[0])

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """tokens float (..., 384) -> logits float32 (..., C)."""
        x = torch.as_tensor(np.asarray(tokens, dtype=np.float32))
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
        if weight.ndim != 2 or weight.shape[1] != FEATURE_DIM or bias.shape != (weight.shape[0],):
            raise ProbeError(f"{path}: weight {weight.shape} and bias {bias.shape} are not (C, 384) and (C,)")
        return cls(weight.astype(np.float32), bias.astype(np.float32), meta)


def _standardised_columns(x: np.ndarray, rows: int = 32) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """The training tokens standardised and transposed: (x~ float32 (384, N), mean float64 (384,), std float64 (384,)).

    x~[f] = float32((x[:, f] - mean[f]) / std[f]) computed in float64; mean and std per feature in float64 (two
    passes); a constant feature gets std 1. Feature-major (384, N): the per-feature statistics are then contiguous
    rows, worked `rows` features at a time so no (N, 384) float64 copy exists.
    """
    n = x.shape[0]
    xt = torch.empty((FEATURE_DIM, n), dtype=torch.float32)
    step = 16384
    for s in range(0, n, step):
        xt[:, s : s + step] = torch.from_numpy(np.asarray(x[s : s + step], dtype=np.float32)).T
    mean = np.empty(FEATURE_DIM, dtype=np.float64)
    std = np.empty(FEATURE_DIM, dtype=np.float64)
    for f in range(0, FEATURE_DIM, rows):
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

    xs_t: float32 (384, N). Per chunk k of m tokens: forward(w float32 (C, 384)) -> float32 (C, m) = w @ xs_t[:, k];
    backward(g float32 (C, m)) -> float32 (C, 384) = g @ xs_t[:, k].T. Chunks keep one chunk's (C, m) logits in
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
        rows = cols.T.contiguous().to_mkldnn()  # (m, 384): forward contracts over features

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

    features: float (N, 384) tokens; labels: int (N,) in 0..n_classes-1 or 255 (left out); n_classes = K + 1
    (background and K categories). Returns a LinearProbe on raw tokens; meta records the fit.
    """
    from scipy.optimize import minimize
    from threadpoolctl import threadpool_limits

    x_all = np.asarray(features)
    y_all = np.asarray(labels).astype(np.int64)
    if x_all.ndim != 2 or x_all.shape[1] != FEATURE_DIM or y_all.shape != (x_all.shape[0],):
        raise ProbeError(f"fit_probe: features must be (N, 384) with labels (N,), got {x_all.shape} and {y_all.shape}")
    keep = y_all != IGNORE
    x, y = (x_all, y_all) if keep.all() else (x_all[keep], y_all[keep])  # training_tokens leaves no 255
    n, d, c = x.shape[0], FEATURE_DIM, int(n_classes)
    if n == 0:
        raise ProbeError("fit_probe: no training token has a label (all are 255 = ignore)")
    if y.min() < 0 or y.max() >= c:
        raise ProbeError(f"fit_probe: labels must lie in 0..{c - 1} (or 255), found {y.min()}..{y.max()}")
    if not np.all(np.isfinite(x)):
        raise ProbeError("fit_probe: features contain NaN or infinite values")
    xs_t, mean, std = _standardised_columns(x)  # (384, n) float32
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


# --------------------------------------------------------------------------------------------------- data-set glue


def dataset_patch_labels(source: Any, image_ids: Iterable[int], class_of_category: dict[int, int]) -> np.ndarray:
    """Patch labels of many images: uint8 (n, 196) in the given order."""
    ids = [int(i) for i in image_ids]
    out = np.empty((len(ids), N_PATCHES), dtype=np.uint8)
    for row, image_id in enumerate(ids):
        out[row] = image_patch_labels(source, image_id, class_of_category)
    return out


def training_tokens(
    reader: Any, labels: np.ndarray, *, max_tokens: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The probe's training set from feature shards: (features float32 (M, 384), labels uint8 (M,)).

    reader: `evaluate.readings.features.FeatureReader` (`.image_ids`, `.iter_shards("tokens224")` yielding (image_ids,
    array (m, 196, 384))); labels: uint8 (n, 196) patch labels in `reader.image_ids` order. The non-ignored tokens
    are numbered in image order, patch order; when there are more than `max_tokens`, a uniform subsample of
    `max_tokens` of them is kept, `numpy.random.default_rng(seed).choice(total, max_tokens, replace=False)` sorted.
    Only one shard is in memory at a time.
    """
    labels = np.asarray(labels)
    ids = [int(i) for i in reader.image_ids]
    if labels.shape != (len(ids), N_PATCHES):
        raise ProbeError(f"training_tokens: labels {labels.shape} do not match {len(ids)} images x 196 patches")
    valid = (labels != IGNORE).ravel()
    total = int(valid.sum())
    if total == 0:
        raise ProbeError("training_tokens: every patch of the probe-train data set is ignored (crowd)")
    chosen_flat = np.flatnonzero(valid)
    if total > max_tokens:
        pick = np.sort(np.random.default_rng(seed).choice(total, int(max_tokens), replace=False))
        chosen_flat = chosen_flat[pick]
    feats = np.empty((chosen_flat.size, FEATURE_DIM), dtype=np.float32)
    filled, first_image = 0, 0
    for shard_ids, array in reader.iter_shards("tokens224"):
        shard_ids = [int(i) for i in shard_ids]
        m = len(shard_ids)
        if shard_ids != ids[first_image : first_image + m]:
            raise ProbeError("training_tokens: the feature shards' image order differs from reader.image_ids")
        lo, hi = first_image * N_PATCHES, (first_image + m) * N_PATCHES
        a, b = np.searchsorted(chosen_flat, [lo, hi])
        local = chosen_flat[a:b] - lo
        flat = np.asarray(array).reshape(m * N_PATCHES, FEATURE_DIM)
        feats[filled : filled + local.size] = flat[local]
        filled += local.size
        first_image += m
    if first_image != len(ids) or filled != chosen_flat.size:
        raise ProbeError(f"training_tokens: the shards hold {first_image} images, the reader lists {len(ids)}")
    return feats, labels.ravel()[chosen_flat]


# ----------------------------------------------------------------------------------------------------------- scores


def confusion(true: np.ndarray, pred: np.ndarray, n_classes: int) -> np.ndarray:
    """Confusion matrix int64 (C, C), rows true, columns predicted; pixels whose true label is 255 are left out."""
    t = np.asarray(true).ravel().astype(np.int64)
    p = np.asarray(pred).ravel().astype(np.int64)
    keep = t != IGNORE
    t, p = t[keep], p[keep]
    if t.size and (t.max() >= n_classes or p.max() >= n_classes or p.min() < 0):
        raise ProbeError(f"confusion: labels must lie in 0..{n_classes - 1}, found true {t.max()}, pred {p.max()}")
    return np.bincount(t * n_classes + p, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def sparse_confusion(conf: np.ndarray) -> list[list[int]]:
    """Nonzero entries of a confusion matrix as [true, pred, count] triples (row-major order)."""
    t, p = np.nonzero(conf)
    return [[int(a), int(b), int(conf[a, b])] for a, b in zip(t, p)]


def predict_map224(logits: np.ndarray) -> np.ndarray:
    """Patch logits (196, C) -> predicted classes int64 (224, 224): bilinear upsample (align_corners=False), argmax."""
    lg = torch.as_tensor(np.asarray(logits, dtype=np.float32))
    if lg.ndim != 2 or lg.shape[0] != N_PATCHES:
        raise ProbeError(f"predict_map224: expected logits (196, C), got {tuple(lg.shape)}")
    grid = lg.reshape(GRID, GRID, -1).permute(2, 0, 1)[None]
    up = torch.nn.functional.interpolate(grid, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    return up[0].argmax(dim=0).numpy()


@dataclass
class ImageProbeStats:
    """One eval image: sparse pixel confusion [[true, pred, count], ...], correct and valid patch counts."""

    confusion: list[list[int]]
    correct: int
    valid: int


def score_image(probe: LinearProbe, tokens: np.ndarray, map224: np.ndarray) -> ImageProbeStats:
    """Score one image: tokens float (196, 384), map224 uint8 (224, 224) label map in the tokens224 geometry."""
    logits = probe.logits(tokens)
    pred_pixels = predict_map224(logits)
    conf = confusion(map224, pred_pixels, probe.n_classes)
    labels = patch_labels(map224)
    valid = labels != IGNORE
    correct = int(np.count_nonzero(logits.argmax(axis=1)[valid] == labels[valid]))
    return ImageProbeStats(sparse_confusion(conf), correct, int(valid.sum()))


def probe_measures(
    probe: LinearProbe,
    items: Iterable[tuple[int, np.ndarray, np.ndarray]],
    *,
    resamples: int,
    seed: int,
    level: float = 0.95,
) -> list[dict[str, Any]]:
    """Score the probe on eval images -> the ledger measures [probe_miou, probe_accuracy].

    items yield (image_id, tokens (196, 384), map224 uint8 (224, 224)). Each measure keeps the per-image
    statistics (sparse confusions; [correct, valid]) and its value and interval in percent, drawn from them by
    `evaluate.scores.measures.make_measure`, so the pipeline and a paired bootstrap read the same numbers.
    """
    from evaluate.plumbing.memory import keep_large_blocks_mapped
    from evaluate.scores.measures import make_measure

    keep_large_blocks_mapped()  # else each image's temporaries stay resident under its kept statistics
    ids: list[int] = []
    stats: list[ImageProbeStats] = []
    for image_id, tokens, map224 in items:
        ids.append(int(image_id))
        stats.append(score_image(probe, tokens, map224))
    boot = {"resamples": resamples, "seed": seed, "level": level}
    return [
        make_measure("probe_miou", image_ids=ids, per_image=[s.confusion for s in stats], reducer="miou", **boot),
        make_measure("probe_accuracy", image_ids=ids, per_image=[[s.correct, s.valid] for s in stats],
                     reducer="ratio", **boot),
    ]


def eval_items(reader: Any, source: Any, class_of_category: dict[int, int]) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(image_id, tokens float32 (196, 384), map224) for every image of a FeatureReader, one shard at a time."""
    for shard_ids, array in reader.iter_shards("tokens224"):
        for row, image_id in enumerate(shard_ids):
            map224 = label_map224(label_map(source, int(image_id), class_of_category))
            yield int(image_id), np.asarray(array[row], dtype=np.float32), map224


# ------------------------------------------------------------------------------------------------- per-class views

BACKGROUND = "background"


def class_names(classes: Sequence[str]) -> list[str]:
    """Name of every probe class by label: ["background", name of class 1, ..., name of class K] (K + 1 names).

    classes: `probe_classes` of the probe-train set. What the probe record keeps so per-class tables come from
    records alone.
    """
    return [BACKGROUND, *classes]


def per_class_iou(
    per_image: Iterable[Iterable[Iterable[int]]], n_classes: int, *, resamples: int, seed: int,
    level: float = 0.95,
) -> list[dict[str, Any]]:
    """IoU of each class over the pooled per-image confusions, with a percentile bootstrap interval over images.

    per_image: the probe record's sparse confusions, one [[true, pred, count], ...] list per image. Class c's IoU
    is sum I / sum (T + P - I) over images (I, T, P: its intersection, true and predicted pixels), i.e. the
    "ratio" reducer on per-image [I, T + P - I], so the pooled value equals the per-class term of mIoU. Returns
    one entry per label 0..n_classes-1: {"label", "n_images" (images whose truth holds the class), "value",
    "ci_low", "ci_high"} in [0, 1]; all None for a class with no true or predicted pixel anywhere.
    """
    from evaluate.scores.masks import bootstrap_ci

    rows = list(per_image)
    inter = np.zeros((len(rows), n_classes), dtype=np.int64)
    true = np.zeros_like(inter)
    pred = np.zeros_like(inter)
    for i, entries in enumerate(rows):
        for t, p, c in entries:
            t, p, c = int(t), int(p), int(c)
            if not (0 <= t < n_classes and 0 <= p < n_classes):
                raise ProbeError(f"per_class_iou: image {i} has label {max(t, p)} outside 0..{n_classes - 1}")
            if t == p:
                inter[i, t] += c
            true[i, t] += c
            pred[i, p] += c
    union = true + pred - inter
    out = []
    for label in range(n_classes):
        entry = {"label": label, "n_images": int(np.count_nonzero(true[:, label])), "value": None,
                 "ci_low": None, "ci_high": None}
        if rows and union[:, label].sum() > 0:
            stats = np.stack([inter[:, label], union[:, label]], axis=1)
            v, lo, hi = bootstrap_ci(stats, "ratio", resamples=resamples, seed=seed, level=level)
            entry.update(value=v, ci_low=None if np.isnan(lo) else lo, ci_high=None if np.isnan(hi) else hi)
        out.append(entry)
    return out
