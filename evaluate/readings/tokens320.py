"""The reading `tokens320` (docs/design.md §17, DESIGN 16): a network's tokens on the scored square of unsupervised
semantic segmentation.

Per image (RGB as stored, W x H): the tokens320 square (`evaluate.semseg.transform`: short side to
s = p * ceil(320 / p) with PIL NEAREST, the centre s x s crop, ImageNet-normalised), through the network in its
`released` form (section 11: the caller loads it so): `tokens(x)`, the last block's output after the final norm,
patch rows only (DINO's `get_intermediate_layers(n=1)`): (g * g, D) float32, g = s / p, row by row. A network without
a final norm or a class token (the seed's) runs the same in both forms. The tokens are float32 whatever
`features.dtype` says (DESIGN 16: from float16 tokens the clusters of one test set converged elsewhere).
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from evaluate.readings.features import FeatureError
from evaluate.semseg.transform import TRANSFORM, tokens320_input, tokens320_side

__all__ = ["TRANSFORM", "network_input", "read_tokens320", "tokens320_grid"]


def tokens320_grid(patch: int) -> int:
    """g = s / p: 20 for p 16, 40 for p 8, 23 for p 14."""
    return tokens320_side(patch) // int(patch)


def network_input(img: Image.Image, patch: int) -> torch.Tensor:
    """The network's input for one RGB image: (3, s, s) float32 (`evaluate.semseg.transform.tokens320_input`)."""
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
