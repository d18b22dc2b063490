"""Video label propagation (docs/design.md §12): DINO's `eval_video_segmentation.py`, read exactly, on any backbone.

The masks of a sequence's first frame are carried to every later frame by matching each patch with its nearest
neighbours among the frozen patch features of a context of frames:

- context = frame 0 (its features and the one-hot of its mask resized with PIL NEAREST straight to the grid,
  C = M + 1 channels, background first) + the `n_last_frames` previous frames (features and their SOFT label maps at
  patch resolution), oldest dropped first (`Propagator`);
- tokens L2-normalised; affinity exp(cos / temperature); a query patch sees only context patches within
  `neighbourhood` rows and columns, in every context frame; per query the `topk` largest weights over all context
  frames together are kept (values below the k-th set to 0, so ties may keep more), divided by their sum; the soft
  labels of the frame are the context labels weighted so (`Propagator.step`);
- output (`labels_from_soft`): the soft labels bilinearly upsampled x p (the network's patch: x16 for ViT-S/16,
  x8 for p 8, x14 for p 14; align_corners False), each channel whose max is > 0 min-max scaled to [0, 1] (a constant
  positive channel becomes 1), argmax (ties to the lowest id), uint8, resized with PIL NEAREST to the frame's own
  size.

The same numbers, computed in less time and memory than DINO's code: the window is built once per grid with array
operations (`tiles`: blocks of TILE x TILE query patches, each with the box of source patches that holds its windows
and a mask of the box's sources outside them; together exactly `neighbourhood_window`), so only the boxes are
matched, never the full affinity of every context frame; and a query's weights come from its k largest cosines
(exp is monotone), except where another cosine lies so close to the k-th that float32 rounding could order the two
either way (`tie_margin`) or the window holds fewer than k sources: those queries take DINO's rule in float64 on the
tokens as given, over the sources that can matter.

The sizes come from the network's `.geometry` (`evaluate.pixels.geometry.Geometry`; a network without one is the
seed's ViT-S/16): the frames480 size (`Geometry.frames480_size`), the grid (frame size / p) and the upsampling (x p);
the neighbourhood stays in patches.

`propagate_sequence` runs a network frame by frame on `frames480` (one frame decoded at a time; memory holds the
context, never the whole video) and writes one index PNG per frame under the frame's own name, each atomically;
frame 0's is its ground truth. Every setting lives in `PropagationSettings` (no defaults here: the config schema is
their one home).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from evaluate import EvaluationError
from evaluate.datasets.davis import VideoSequence, first_mask, write_mask
from evaluate.readings.frames import (
    frames480_input,
    frames480_size,
    resize_nearest,
)
from evaluate.pixels.geometry import SEED, Geometry
from evaluate.pixels.images import open_rgb
from evaluate.video.settings import PropagationSettings

log = logging.getLogger("evaluate.video.propagate")
TILE = 16  # query patches per block side (speed only: every block is matched with the box around its windows)


def tie_margin(width: int) -> float:
    """Twice the worst rounding of a float32 cosine of two L2-normalised width-wide tokens: (4 width + 8) 2^-24.

    Normalising errs by at most (width / 2 + 2) units of roundoff per component, the dot product by width units
    (over any summation order), so a cosine errs by at most (2 width + 4) 2^-24; two cosines closer than twice that
    may be ordered either way by float32 (4.6e-5 for 384-wide tokens).
    """
    return (4 * width + 8) * 2.0**-24


@contextlib.contextmanager
def one_thread(device: torch.device) -> Iterator[None]:
    """torch's CPU operations on one thread inside the block (on another device, nothing changes)."""
    threads = torch.get_num_threads()
    if device.type != "cpu" or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class PropagationError(EvaluationError):
    """A sequence that cannot be propagated (e.g. frames of different sizes); the message names the frame."""


class TokenNetwork(Protocol):
    """Anything with the last block's output tokens: (1, 3, h, w) float32 -> (1, h/p * w/p, D) float32, row by row,
    and a `geometry` (`Geometry`: p, D; optional, the seed's ViT-S/16 where absent)."""

    def tokens(self, x: Tensor) -> Tensor: ...


def network_geometry(network: Any) -> Geometry:
    """The network's `.geometry`; the seed's (ViT-S/16) for a network that carries none."""
    geometry = getattr(network, "geometry", None)
    return SEED if geometry is None else geometry


def neighbourhood_window(grid: tuple[int, int], radius: int) -> Tensor | None:
    """(N, N) bool, N = gh * gw patches row by row: [query, source] = the source lies within `radius` rows and
    `radius` columns of the query (a (2 radius + 1)^2 square clipped at the frame's edges). None for radius 0: no
    restriction (DINO's code restricts only for a positive size)."""
    if radius == 0:
        return None
    gh, gw = grid
    rows = torch.arange(gh).repeat_interleave(gw)
    cols = torch.arange(gw).repeat(gh)
    return ((rows[:, None] - rows[None, :]).abs() <= radius) & ((cols[:, None] - cols[None, :]).abs() <= radius)


def one_hot(labels: np.ndarray, channels: int) -> Tensor:
    """(gh, gw) integer ids -> (channels, gh * gw) float32 one-hot, channel 0 background."""
    ids = torch.from_numpy(np.ascontiguousarray(labels, dtype=np.int64)).reshape(-1)
    return (ids[None, :] == torch.arange(channels)[:, None]).to(torch.float32)


@dataclass(frozen=True)
class Tile:
    """A block of query patches and the box of source patches that holds all their windows.

    rows, cols: the queries' grid rows and columns; source_rows, source_cols: the box's; outside: (nq, 1, R * W)
    bool, True where a source of the box lies outside a query's window (None: every source is inside).
    """

    rows: slice
    cols: slice
    source_rows: slice
    source_cols: slice
    outside: Tensor | None


def _spans(length: int, radius: int | None) -> list[tuple[slice, slice]]:
    if radius is None:
        return [(slice(0, length), slice(0, length))]
    spans = []
    for start in range(0, length, TILE):
        stop = min(length, start + TILE)
        spans.append((slice(start, stop), slice(max(0, start - radius), min(length, stop + radius))))
    return spans


def tiles(grid: tuple[int, int], radius: int) -> list[Tile]:
    """The query blocks of a grid (TILE x TILE patches) with their source boxes and window masks, built once per
    grid with array operations. Together they hold exactly `neighbourhood_window(grid, radius)`: each query's
    window lies inside its block's box, and the box's other sources are masked out. Radius 0: one block, no mask.
    """
    gh, gw = grid
    out = []
    reach = None if radius == 0 else radius
    for rows, source_rows in _spans(gh, reach):
        for cols, source_cols in _spans(gw, reach):
            qr = torch.arange(rows.start, rows.stop).repeat_interleave(cols.stop - cols.start)
            qc = torch.arange(cols.start, cols.stop).repeat(rows.stop - rows.start)
            sr = torch.arange(source_rows.start, source_rows.stop).repeat_interleave(
                source_cols.stop - source_cols.start)
            sc = torch.arange(source_cols.start, source_cols.stop).repeat(source_rows.stop - source_rows.start)
            outside = None
            if reach is not None:
                outside = ((qr[:, None] - sr[None, :]).abs() > radius) | ((qc[:, None] - sc[None, :]).abs() > radius)
                outside = outside[:, None, :] if bool(outside.any()) else None
            out.append(Tile(rows, cols, source_rows, source_cols, outside))
    return out


class Propagator:
    """One sequence's context and DINO's propagation step.

    first_features: frame 0's tokens (N, D) float; first_labels: its one-hot at patch resolution (C, N) float32;
    grid: (gh, gw), N = gh * gw. `step(features)` propagates to the next frame and queues it.

    The context lives in preallocated stores, one slot per context frame (slot 0: frame 0; slots 1..n_last_frames:
    the previous frames, the oldest overwritten first): tokens as given and L2-normalised, (S, gh, gw, D) float32
    each, and soft labels (S, gh, gw, C) float32. Each query block (`tiles`) is matched with its source box in every
    context frame at once, so only boxes around the windows are computed, never the full affinity; the weights are
    DINO's (`_weighted`).
    """

    def __init__(self, first_features: Tensor, first_labels: Tensor, grid: tuple[int, int],
                 settings: PropagationSettings):
        self.grid = (int(grid[0]), int(grid[1]))
        self.settings = settings
        gh, gw = self.grid
        n = gh * gw
        if first_features.ndim != 2 or first_features.shape[0] != n:
            raise ValueError(f"frame 0's features must be ({n}, D) for a {self.grid} grid, got "
                             f"{tuple(first_features.shape)}")
        if first_labels.ndim != 2 or first_labels.shape[1] != n:
            raise ValueError(f"frame 0's labels must be (C, {n}), got {tuple(first_labels.shape)}")
        device = first_features.device
        width, channels = first_features.shape[1], first_labels.shape[0]
        slots = 1 + settings.n_last_frames
        self.tokens = torch.zeros(slots, gh, gw, width, device=device)
        self.features = torch.zeros(slots, gh, gw, width, device=device)
        self.labels = torch.zeros(slots, gh, gw, channels, device=device)
        self.tokens[0] = first_features.float().view(gh, gw, width)
        self.features[0] = F.normalize(self.tokens[0], dim=-1, p=2)
        self.labels[0] = first_labels.float().T.reshape(gh, gw, channels).to(device)
        self.tiles = [tile if tile.outside is None else Tile(tile.rows, tile.cols, tile.source_rows,
                                                                tile.source_cols, tile.outside.to(device))
                      for tile in tiles(self.grid, settings.neighbourhood)]
        self.queued = 0  # previous frames held (at most n_last_frames)
        self.next_slot = 1

    @property
    def channels(self) -> int:
        return int(self.labels.shape[-1])

    def step(self, features: Tensor) -> Tensor:
        """Soft labels (C, N) float32 of the frame whose tokens are `features` (N, D); the frame joins the queue.

        On the CPU the step runs on one thread (`one_thread`): its few dozen small operations gain little from
        more, and on a busy machine each would wait for every thread to be scheduled.
        """
        with one_thread(features.device):
            return self._step(features)

    def _step(self, features: Tensor) -> Tensor:
        gh, gw = self.grid
        width = self.features.shape[-1]
        if tuple(features.shape) != (gh * gw, width):
            raise ValueError(f"features must be ({gh * gw}, {width}), got {tuple(features.shape)}")
        tokens = features.float().view(gh, gw, width)
        query = F.normalize(tokens, dim=-1, p=2)
        used = 1 + self.queued  # slots in use: frame 0, then the previous frames
        soft = torch.empty(gh, gw, self.channels, device=query.device)
        for tile in self.tiles:
            block = (tile.rows.stop - tile.rows.start, tile.cols.stop - tile.cols.start, self.channels)
            soft[tile.rows, tile.cols] = self._weighted(tile, tokens, query, used).view(block)
        if self.settings.n_last_frames:
            self.tokens[self.next_slot] = tokens
            self.features[self.next_slot] = query
            self.labels[self.next_slot] = soft
            self.queued = min(self.queued + 1, self.settings.n_last_frames)
            self.next_slot = 1 + self.next_slot % self.settings.n_last_frames
        return soft.view(gh * gw, self.channels).T

    def _box(self, store: Tensor, tile: Tile, used: int) -> Tensor:
        """A store's values of the tile's source box in every slot in use: (used * R * W, last axis)."""
        return store[:used, tile.source_rows, tile.source_cols].reshape(-1, store.shape[-1])

    def _weighted(self, tile: Tile, tokens: Tensor, query: Tensor, used: int) -> Tensor:
        """DINO's weights for the tile's queries: their soft labels (nq, C) float32.

        DINO's rule: w = exp(cos / temperature), 0 outside the window; keep w >= the k-th largest, divide by the
        sum. exp is monotone, so the kept weights are those of the k largest cosines: computed so, from the
        normalised float32 tokens, for every query whose k-th largest cosine stands more than `tie_margin` (twice
        float32's worst rounding of a cosine) above the next. The others, a near tie that rounding could decide
        either way, or a window of fewer than k sources, take the rule itself in float64 (`_exact`).
        """
        width = query.shape[-1]
        q = query[tile.rows, tile.cols].reshape(-1, width)
        labels = self._box(self.labels, tile, used)
        cos = q @ self._box(self.features, tile, used).T  # (nq, used * R * W): the box of every context frame
        if tile.outside is not None:
            cos.view(q.shape[0], used, -1).masked_fill_(tile.outside, -math.inf)
        k = min(self.settings.topk, cos.shape[1])
        top, index = torch.topk(cos, k, dim=1)  # (nq, k), largest first
        kth = top[:, -1:]
        near = (cos >= kth - tie_margin(width)).sum(dim=1) > k
        weights = torch.exp(top / self.settings.temperature)
        weights /= weights.sum(dim=1, keepdim=True)
        soft = torch.einsum("qk,qkc->qc", weights, labels[index])
        rows = torch.nonzero(near).flatten()
        if rows.numel():
            own = tokens[tile.rows, tile.cols].reshape(-1, width)[rows]
            soft[rows] = self._exact(tile, own, cos[rows], kth[rows], labels, k)
        return soft

    def _exact(self, tile: Tile, own: Tensor, cos: Tensor, kth: Tensor, labels: Tensor, k: int) -> Tensor:
        """DINO's rule in float64 on the tokens as given, for queries whose own tokens are `own` (n, D).

        cos (n, L) and kth (n, 1): their float32 cosines over the box (-inf outside the window) and k-th largest;
        labels (L, C) the box's. Only sources whose float32 cosine lies within `tie_margin` of the k-th can be among
        the k largest in exact arithmetic: their tokens are gathered from the store and matched in float64.
        Returns soft labels (n, C) float32.
        """
        margin = tie_margin(own.shape[-1])
        count = int((cos >= kth - margin).sum(dim=1).max())
        value, index = torch.topk(cos, count, dim=1)  # (n, K): every candidate, and perhaps a few more
        candidate = (value >= kth - margin) & (value > -math.inf)
        box = (tile.source_rows.stop - tile.source_rows.start) * (tile.source_cols.stop - tile.source_cols.start)
        box_width = tile.source_cols.stop - tile.source_cols.start
        slot, within = index // box, index % box
        sources = self.tokens[slot, tile.source_rows.start + within // box_width,
                              tile.source_cols.start + within % box_width]  # (n, K, D)
        exact = torch.einsum("nd,nkd->nk", F.normalize(own.double(), dim=-1, p=2),
                             F.normalize(sources.double(), dim=-1, p=2))
        aff = torch.exp(exact.masked_fill(~candidate, -math.inf) / self.settings.temperature)
        cut = torch.topk(aff, min(k, count), dim=1).values[:, -1:]
        aff.masked_fill_(aff < cut, 0.0)
        aff /= aff.sum(dim=1, keepdim=True)
        return torch.einsum("nk,nkc->nc", aff, labels[index].double()).float()


def labels_from_soft(soft: Tensor, grid: tuple[int, int], size: tuple[int, int],
                     patch: int = SEED.patch) -> np.ndarray:
    """Soft labels (C, gh * gw) -> object ids (H, W) uint8 at the frame's own `size` = (H, W).

    Bilinear x p (align_corners False) to (p gh, p gw), p the network's patch (the seed's 16 unless given); each
    channel with max > 0 min-max scaled to [0, 1]; a channel whose soft labels are one positive constant becomes 1
    (decided on the soft labels themselves: bilinear rounding may leave an ulp of ripple on a constant, which min-max
    would blow up to [0, 1]); argmax over channels (ties to the lowest id); PIL NEAREST to (H, W).
    """
    gh, gw = grid
    soft = soft.float().reshape(-1, gh * gw)
    constant = ((soft.amax(dim=1) == soft.amin(dim=1)) & (soft.amax(dim=1) > 0))[:, None, None]
    up = F.interpolate(soft.reshape(1, -1, gh, gw), scale_factor=int(patch), mode="bilinear", align_corners=False,
                       recompute_scale_factor=False)[0]  # (C, h, w)
    low = up.amin(dim=(1, 2), keepdim=True)
    high = up.amax(dim=(1, 2), keepdim=True)
    span = high - low
    scaled = (up - low) / torch.where(span > 0, span, 1.0)
    up = torch.where(constant, 1.0, torch.where(high > 0, scaled, up))
    ids = torch.argmax(up, dim=0).to(torch.uint8).cpu().numpy()
    return resize_nearest(ids, size)


@dataclass(frozen=True)
class PropagationRun:
    """What one sequence's propagation did: frames written, objects, frame size (H, W), grid (gh, gw), seconds."""

    sequence: str
    n_frames: int
    n_objects: int
    frame_size: tuple[int, int]
    grid: tuple[int, int]
    seconds: float


def _device_of(network: TokenNetwork) -> torch.device:
    params = getattr(network, "parameters", None)
    first = next(iter(params()), None) if callable(params) else None
    return first.device if first is not None else torch.device("cpu")


def frame_tokens(network: TokenNetwork, frame: Path, height: int, device: torch.device,
                 geometry: Geometry = SEED) -> tuple[Tensor, tuple[int, int]]:
    """Read one frame as frames480 at the network's geometry and run the network: ((N, D) float32 tokens, (H, W) the
    frame's own size)."""
    img = open_rgb(frame)
    x = frames480_input(img, height, geometry).unsqueeze(0).to(device)
    tokens = network.tokens(x)
    return tokens[0].float(), (img.size[1], img.size[0])


@torch.inference_mode()
def propagate_sequence(network: TokenNetwork, sequence: VideoSequence, settings: PropagationSettings,
                       out_dir: str | os.PathLike) -> PropagationRun:
    """Propagate `sequence`'s first-frame masks through all its frames; write `out_dir/<frame>.png` for every frame.

    network: block 12's tokens (`TokenNetwork`), in eval mode, on its device (inputs follow it); sequence: the frames
    and masks (`evaluate.datasets.davis`), of which only the first frame's mask is read. Each PNG holds the object
    ids 0..M (uint8, DAVIS's palette) at the frame's own size. Raises PropagationError for a frame whose size differs
    from frame 0's, and the data set's errors (corrupt frame or first mask, a mask whose size differs from its frame).
    """
    started = time.perf_counter()
    out_dir = Path(out_dir)
    device = _device_of(network)
    geometry = network_geometry(network)
    first = first_mask(sequence)
    frames = sequence.frames
    write_mask(out_dir / f"{frames[0].stem}.png", first.labels)
    tokens, _ = frame_tokens(network, frames[0], settings.height, device, geometry)
    h, w = first.labels.shape
    new_w, new_h = frames480_size(w, h, settings.height, geometry)
    grid = (new_h // geometry.patch, new_w // geometry.patch)
    if tokens.shape[0] != grid[0] * grid[1]:
        raise PropagationError(f"{frames[0]}: the network gave {tokens.shape[0]} tokens for a {new_w} x {new_h} "
                               f"input, not the {grid[0]} x {grid[1]} patches of its geometry (patch {geometry.patch})")
    first_grid = resize_nearest(first.labels, grid)
    propagator = Propagator(tokens, one_hot(first_grid, first.n_objects + 1).to(device), grid, settings)
    log.info("%s: %d frames of %d x %d px, %d object(s), grid %d x %d, settings %s", sequence.name, len(frames), w,
             h, first.n_objects, grid[0], grid[1], settings.name)
    every = max(1, len(frames) // 10)
    for t in range(1, len(frames)):
        tokens, frame_size = frame_tokens(network, frames[t], settings.height, device, geometry)
        if frame_size != (h, w):
            raise PropagationError(f"{frames[t]}: frame is {frame_size[1]} x {frame_size[0]} px but the sequence's "
                                   f"first frame {frames[0].name} is {w} x {h}")
        soft = propagator.step(tokens)
        write_mask(out_dir / f"{frames[t].stem}.png", labels_from_soft(soft, grid, (h, w), geometry.patch))
        if t % every == 0 or t == len(frames) - 1:
            elapsed = time.perf_counter() - started
            log.info("%s: frame %d/%d (%.2f s a frame)", sequence.name, t + 1, len(frames), elapsed / (t + 1))
    return PropagationRun(sequence.name, len(frames), first.n_objects, (h, w), grid,
                          round(time.perf_counter() - started, 3))

