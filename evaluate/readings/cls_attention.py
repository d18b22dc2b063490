"""The class-token attention reading (docs/design.md §17; DESIGN 15): where the class token of the last block looks.

Per image, as DINO's `visualize_attention.py` reads it, but at the image's own size:
1. the image as section 3 opens it (`open_rgb`: EXIF orientation, RGB), no resize;
2. / 255, ImageNet mean and std (`normalise_pixels`), cropped at the bottom and the right to H' = p floor(H / p),
   W' = p floor(W / p) (the script's crop; the pixels are cropped before they are normalised: the same values);
3. the network in its `released` form (class token, registers, final norm; the caller loads it so), its position
   table resampled to (gh, gw) = (H' / p, W' / p) by its own rule;
4. the last block's softmax attention softmax(q k^T / sqrt(d)) over all its rows (class token, registers,
   patches), the class token's row, the patch columns only (DINO's `attentions[0, :, 0, 1:]`, registers dropped
   as well): (heads, gh, gw) float32, row-major.
The queries and keys are those the network's own attention used (`VisionTransformer.tokens_tapped`).

Not every network has this reading; `not_applicable(model)` says why by name, never an error: a network without a
class token (a SelfPatch backbone) and XCiT (its XCA blocks attend across channels; its class-attention blocks are
not the paper's layer).

The protocol fixes the network's form (`released`, whatever `features.form` says: the class token is the point) and
its precision (float32): `CLS_ATTENTION`. A shard (`write_cls_attention`, the runner's body) is one .npz:
    image_ids (n,) int64; grids (n, 2) int64 (gh, gw); heads () int64; values (heads * sum gh * gw,) float32, each
    image's (heads, gh, gw) attention flattened, one after the other (empty where the reading does not apply);
and the runner's meta beside it, whose `absent` says why where the network has no such reading. `ShardAttention`
reads it back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image
from torch import Tensor, nn

from evaluate import EvaluationError
from evaluate.pixels.images import normalise_pixels
from evaluate.plumbing.atomic import atomic_path
from evaluate.readings.runner import Reading, Shard

CLS_ATTENTION = Reading("cls-attention", form="released", precision="float32")

NO_CLASS_TOKEN = "SelfPatch backbone: no class token"
NO_TOKEN_ATTENTION = ("XCiT: no token attention in its XCA blocks (they attend across channels; its class-attention "
                      "blocks are not the paper's layer)")
TRANSFORM = ("PIL open, EXIF orientation, RGB (16-bit >> 8); no resize; / 255, mean (0.485, 0.456, 0.406), std "
             "(0.229, 0.224, 0.225); cropped bottom and right to p floor(H/p) x p floor(W/p); released form; the "
             "last block's softmax attention, the class token's row over the patch columns: (heads, gh, gw)")


class ClassAttentionError(EvaluationError, ValueError):
    """A network or image the reading cannot take (a bug of the caller: `not_applicable` says which networks
    have no such reading)."""


def not_applicable(model: nn.Module) -> str | None:
    """Why `model` has no class-token attention reading, by name (`NO_TOKEN_ATTENTION` for XCiT, `NO_CLASS_TOKEN`
    for a network loaded without a class token), or None where it has one."""
    if not getattr(model, "patch_attention", False):
        return NO_TOKEN_ATTENTION
    if getattr(model, "cls_token", None) is None:
        return NO_CLASS_TOKEN
    return None


def cropped_size(height: int, width: int, patch: int) -> tuple[int, int]:
    """(H', W') = (p floor(H / p), p floor(W / p))."""
    return int(height) // int(patch) * int(patch), int(width) // int(patch) * int(patch)


def network_input(img: Image.Image, patch: int) -> Tensor:
    """An RGB PIL image -> (3, H', W') float32, normalised and cropped at the bottom and right to multiples of p."""
    pixels = np.asarray(img, dtype=np.uint8)
    height, width = cropped_size(pixels.shape[0], pixels.shape[1], patch)
    if height == 0 or width == 0:
        raise ClassAttentionError(f"a {pixels.shape[1]} x {pixels.shape[0]} image holds no {patch}-px patch")
    return normalise_pixels(np.ascontiguousarray(pixels[:height, :width]))


def class_token_attention(model: nn.Module, x: Tensor) -> Tensor:
    """The last block's class-token attention over the patches: x (B, 3, H', W') float32, sides multiples of p ->
    (B, heads, gh, gw) float32, each row softmax(q_cls k^T / sqrt(d)) over every row (class token, registers,
    patches), its patch columns only (module docstring). The network runs in full (`tokens_tapped`)."""
    reason = not_applicable(model)
    if reason is not None:
        raise ClassAttentionError(f"no class-token attention reading: {reason}")
    patch = int(model.geometry.patch)
    gh, gw = x.shape[-2] // patch, x.shape[-1] // patch
    extra = int(model.extra_tokens)  # the class token and the registers
    last = len(model.blocks) - 1
    rows: list[Tensor] = []

    def tap(block: int, q: Tensor, k: Tensor) -> None:
        if block == last:
            with torch.autocast(q.device.type, enabled=False):
                logits = (q[:, :, :1].float() @ k.float().transpose(-2, -1)) * q.shape[-1] ** -0.5
                rows.append(logits.softmax(-1)[:, :, 0, extra:])

    with torch.inference_mode():
        model.tokens_tapped(x, tap)
    attention = rows[0]
    if attention.shape[-1] != gh * gw:
        raise ClassAttentionError(f"the last block gave {attention.shape[-1]} patch columns for a {gh} x {gw} grid")
    return attention.reshape(attention.shape[0], attention.shape[1], gh, gw)


@dataclass(frozen=True)
class ClassAttention:
    """One image's reading: size (H, W) of the opened image; grid (gh, gw); attention (heads, gh, gw) float32."""

    size: tuple[int, int]
    grid: tuple[int, int]
    attention: np.ndarray


def read_class_attention(model: nn.Module, img: Image.Image) -> ClassAttention:
    """The reading of one RGB image (section 3's opening) by a network in its released form, eval mode."""
    patch = int(model.geometry.patch)
    device = next(model.parameters()).device
    x = network_input(img, patch).unsqueeze(0).to(device)
    attention = class_token_attention(model, x)[0].to("cpu", torch.float32).numpy()
    return ClassAttention((img.height, img.width), (x.shape[-2] // patch, x.shape[-1] // patch), attention)


def write_cls_attention(shard: Shard, out: str | os.PathLike) -> dict:
    """The runner's body: the reading of the shard's images into the .npz `out` (module docstring), atomically;
    returns what the meta says of it: the images, the heads, and `absent` (the reason, by name) where the network
    has no such reading (nothing is read then)."""
    reason = not_applicable(shard.model)
    grids, values, heads = [], [], 0
    if reason is None:
        for image_id in shard.units:
            reading = read_class_attention(shard.model, shard.dataset.open_image(image_id))
            grids.append(reading.grid)
            values.append(reading.attention.ravel())
            heads = int(reading.attention.shape[0])
    with atomic_path(out) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, image_ids=np.asarray(shard.units, np.int64),
                 grids=np.asarray(grids, np.int64).reshape(-1, 2), heads=np.int64(heads),
                 values=np.concatenate(values).astype(np.float32) if values else np.zeros(0, np.float32))
    return {"n_images": len(shard.units), "heads": heads, "absent": reason, "transforms": {CLS_ATTENTION.name:
                                                                                           TRANSFORM}}


class ShardAttention:
    """One shard's reading file: `image_ids`, `grids`, `heads`, and per position the (heads, gh, gw) attention."""

    def __init__(self, path: str | os.PathLike) -> None:
        with np.load(path, allow_pickle=False) as data:
            self.image_ids = [int(i) for i in data["image_ids"]]
            self.grids = [tuple(int(x) for x in g) for g in data["grids"]]
            self.heads = int(data["heads"])
            self._values = data["values"]
        self._offsets = np.cumsum([0] + [self.heads * gh * gw for gh, gw in self.grids])

    def attention(self, k: int) -> np.ndarray:
        """(heads, gh, gw) float32 of the shard's k-th image."""
        return self._values[self._offsets[k]: self._offsets[k + 1]].reshape(self.heads, *self.grids[k])
