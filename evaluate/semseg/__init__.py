"""Unsupervised semantic segmentation as the field publishes it (docs/design.md §18, DESIGN 16): "Unsupervised Acc /
mIoU", a frozen network's tokens clustered without labels and the clusters matched to the classes once.

- (`evaluate.pixels.tokens320`, beside the other pixel geometries): the tokens320 geometry: short side to s = p * ceil(320 / p) with PIL NEAREST, the centre s x s crop,
  for the image and its label map alike; ImageNet normalisation for the image.
- `cluster`: spherical k-means exactly as the contract writes it (one numpy generator, k-means++-style seeding on
  1 - cosine, Lloyd with first-on-ties, best of n_init restarts, clusters renumbered by first appearance), on tokens
  streamed in chunks with float64 sums, so a set's tokens never need to fit in memory.
- `matching`: each image's cluster map (logits T C^T upsampled bilinearly, argmax), the set's cluster-by-class
  confusion, one Hungarian matching (a surplus cluster to its majority class), per-class IoU, mIoU and pixel
  accuracy, and the per-image statistics of their bootstrap intervals.

The data sets are read by `evaluate.datasets.cocostuff`, `cityscapes`, `potsdam` and `label_folder`; a network's
tokens by `evaluate.readings.tokens320`.
"""

from evaluate import EvaluationError


class SemsegError(EvaluationError):
    """Tokens, centres, settings or label maps that cannot be clustered or scored; the message says which."""
