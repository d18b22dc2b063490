"""The reading `tokens320` (docs/design.md §18, DESIGN 16): a network's tokens on the scored square of unsupervised
semantic segmentation.

Per image (RGB as stored, W x H): the tokens320 square (`evaluate.pixels.tokens320`: short side to
s = p * ceil(320 / p) with PIL NEAREST, the centre s x s crop, ImageNet-normalised), through the network in its
`released` form (section 11: the caller loads it so): `tokens(x)`, the last block's output after the final norm,
patch rows only (DINO's `get_intermediate_layers(n=1)`): (g * g, D) float32, g = s / p, row by row. A network without
a final norm or a class token (the seed's) runs the same in both forms. The tokens are float32 whatever
`features.dtype` says (DESIGN 16: from float16 tokens the clusters of one test set converged elsewhere).

The protocol fixes the form (released) and the precision (float32): `TOKENS320`. A shard (`write_tokens320`, the
runner's body) is the folder `results/features/{checkpoint}/{dataset}/{shard}/` holding

    tokens320.npy    (n * g * g, D) float32   every image's tokens, one after the other (what the clustering
                                              streams, in image order)
    image_ids.json   [n ids]                  row order
    meta.json                                 the runner's, written last (the grid g and side s among it)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from numpy.lib.format import open_memmap
from PIL import Image

from evaluate.plumbing.atomic import atomic_path, write_json
from evaluate.readings.features import IDS, FeatureError
from evaluate.readings.runner import Reading, Shard
from evaluate.pixels.tokens320 import TRANSFORM, tokens320_grid, tokens320_input, tokens320_side

TOKENS320 = Reading("tokens320", form="released", precision="float32")
TOKENS = "tokens320.npy"


def network_input(img: Image.Image, patch: int) -> torch.Tensor:
    """The network's input for one RGB image: (3, s, s) float32 (`evaluate.pixels.tokens320.tokens320_input`)."""
    return tokens320_input(img, patch)


def read_tokens320(model: torch.nn.Module, img: Image.Image) -> np.ndarray:
    """One image's tokens320: (g * g, D) float32. model: eval mode, `released` form, with `geometry` (patch p, width
    D) and `tokens(x)`; it runs on the device its parameters are on, in float32."""
    patch, width = int(model.geometry.patch), int(model.geometry.width)
    grid = tokens320_grid(patch)
    device = next(model.parameters()).device
    with torch.inference_mode():
        tokens = model.tokens(network_input(img, patch).unsqueeze(0).to(device))[0]
    if tuple(tokens.shape) != (grid * grid, width):
        raise FeatureError(f"the network gave tokens {tuple(tokens.shape)} for a {grid} x {grid} grid of width "
                           f"{width}")
    return tokens.detach().to("cpu", torch.float32).numpy()


def write_tokens320(shard: Shard, out_dir: str | os.PathLike) -> dict:
    """The runner's body: the shard's images' tokens320 into `out_dir` (module docstring), each file atomically;
    returns what the meta says of them."""
    patch, width = int(shard.model.geometry.patch), int(shard.model.geometry.width)
    grid, side = tokens320_grid(patch), tokens320_side(patch)
    out = Path(out_dir)
    rows = grid * grid
    with atomic_path(out / TOKENS) as tmp:
        array = open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(shard.units) * rows, width))
        for k, image_id in enumerate(shard.units):
            array[k * rows: (k + 1) * rows] = read_tokens320(shard.model, shard.dataset.open_image(image_id))
        array.flush()
        del array
    write_json(out / IDS, [int(i) for i in shard.units])
    return {"n_images": len(shard.units), "dtype": "float32", "grid": grid, "side": side,
            "shapes": {"tokens320": [len(shard.units) * rows, width]}, "transforms": {TOKENS320.name: TRANSFORM}}
