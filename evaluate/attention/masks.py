"""Class-token attention masks against the objects people drew (docs/design.md §17; DESIGN 15): DINO's Figure 4 table.

The mask of a head (`mass_masks`, `visualize_attention.py --threshold 0.6`'s own lines): its gh gw attention values
sorted ascending (ties by patch index), divided by their sum, cumulative sum c; keep the patches where c > 1 - 0.6
(the largest values holding at least 60% of the mass; a c of exactly 0.4 is dropped); each patch covers p x p pixels.

The score of an image (`score_image`; dino#54: "for each GT mask, I pick the mask head with the best Jaccard"), on
the labels cropped like the image (top-left H' x W' = p gh x p gw): objects O = the SegmentationObject ids in the
cropped map but 0 and 255, ascending; J(o, h) = |M_h and G_o| / |M_h or G_o| over EVERY pixel of the cropped map
(void and background count); the image's value is the mean over O of max_h J(o, h) (the first best head on ties),
beside it the mean over O of the mean over heads, and per head the mean over O. An image without an object is left
out and counted.

Per checkpoint and data set (`MaskTally`): `attention_mask_jaccard` (the mean over images of the per-image value,
percent, section 6's bootstrap interval, reducer mean) and `attention_mask_jaccard_heads` (the same with the mean
over heads), the per-head table (percent, heads as columns), the per-class table of the objects' best-head J (never
the measure), and per image what decided it (`record_fields`). Per-image values are fractions in [0, 1].
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluate.attention import AttentionError
from evaluate.scores.measures import PERCENT, make_measure

KIND = "attention_masks"  # the ledger kind of the records
MASS = 0.6  # visualize_attention's --threshold: fixed and recorded, reproduced, not swept
SETTING = f"mass={MASS}"
MEASURE = "attention_mask_jaccard"
HEADS_MEASURE = "attention_mask_jaccard_heads"
BACKGROUND, VOID = 0, 255
FIGURE_IMAGES = 4  # the first scored images whose masks (and, unsealed, truths) a record keeps for the figures


def mass_masks(attention: np.ndarray, mass: float = MASS) -> np.ndarray:
    """Each head's mask: attention (heads, gh, gw) float32 or float64 -> (heads, gh, gw) bool.

    Per head, as `visualize_attention.py`: the values sorted ascending (a stable sort: equal values by patch index,
    row-major), divided by their sum, cumulative sum c in the attention's own dtype; kept where c > 1 - mass, the
    comparison in that dtype too."""
    attention = np.asarray(attention)
    if attention.ndim != 3 or not np.issubdtype(attention.dtype, np.floating):
        raise AttentionError(f"attention masks need (heads, gh, gw) float attention, got {attention.dtype} "
                             f"{attention.shape}")
    heads = attention.shape[0]
    flat = attention.reshape(heads, -1)
    order = np.argsort(flat, axis=1, kind="stable")
    values = np.take_along_axis(flat, order, axis=1)
    values = values / values.sum(axis=1, keepdims=True)
    cumulative = np.cumsum(values, axis=1, dtype=values.dtype)
    kept = np.empty(flat.shape, dtype=bool)
    np.put_along_axis(kept, order, cumulative > values.dtype.type(1 - mass), axis=1)
    return kept.reshape(attention.shape)


def crop_labels(labels: np.ndarray, grid: tuple[int, int], patch: int) -> np.ndarray:
    """A label map (H, W) cropped top-left to the reading's (p gh, p gw), as the image was."""
    height, width = int(grid[0]) * int(patch), int(grid[1]) * int(patch)
    if labels.shape[0] < height or labels.shape[1] < width:
        raise AttentionError(f"a {labels.shape[1]} x {labels.shape[0]} label map is smaller than the reading's "
                             f"{width} x {height} crop")
    return labels[:height, :width]


def patch_label_counts(cropped: np.ndarray, patch: int) -> np.ndarray:
    """How many pixels of each label each patch holds: cropped (p gh, p gw) uint8 -> (gh * gw, 256) int64, patches
    row-major."""
    gh, gw = cropped.shape[0] // patch, cropped.shape[1] // patch
    rows = np.repeat(np.arange(gh, dtype=np.int64) * gw, patch)[:, None]
    cols = np.repeat(np.arange(gw, dtype=np.int64), patch)[None, :]
    key = (rows + cols) * 256 + cropped.astype(np.int64)
    return np.bincount(key.ravel(), minlength=gh * gw * 256).reshape(gh * gw, 256)


@dataclass(frozen=True)
class ImageMaskScore:
    """One image's score: grid (gh, gw); objects, the object ids scored (ascending); classes, each one's class;
    jaccard (objects, heads) float64 J(o, h) in [0, 1]; best_head (objects,) int, the first head of the largest J."""

    grid: tuple[int, int]
    objects: list[int]
    classes: list[int]
    jaccard: np.ndarray
    best_head: np.ndarray

    @property
    def best(self) -> float:
        """The mean over objects of the best head's J: the image's value of `attention_mask_jaccard`."""
        return float(self.jaccard.max(axis=1).mean())

    @property
    def heads_mean(self) -> float:
        """The mean over objects of the mean over heads: the image's value of `attention_mask_jaccard_heads`."""
        return float(self.jaccard.mean(axis=1).mean())

    @property
    def per_head(self) -> np.ndarray:
        """(heads,) float64: each head's mean J over the objects."""
        return self.jaccard.mean(axis=0)

    def as_record(self) -> dict[str, Any]:
        """What the record keeps of the image: grid, object ids, their classes, J per object and head, best head."""
        return {"grid": list(self.grid), "objects": list(self.objects), "classes": list(self.classes),
                "jaccard": self.jaccard.tolist(), "best_head": [int(h) for h in self.best_head]}


def score_image(masks: np.ndarray, objects: np.ndarray, patch: int,
                object_class: dict[int, int] | None = None) -> ImageMaskScore | None:
    """The score of one image (module docstring): masks (heads, gh, gw) bool on the patch grid; objects (H, W) uint8,
    the image's SegmentationObject indices (cropped here); object_class: each object id's class, where known.
    None for an image whose cropped map holds no object (left out)."""
    heads, gh, gw = masks.shape
    cropped = crop_labels(objects, (gh, gw), patch)
    counts = patch_label_counts(cropped, patch)  # (patches, 256)
    present = np.flatnonzero(counts.sum(axis=0))
    ids = [int(v) for v in present if v not in (BACKGROUND, VOID)]
    if not ids:
        return None
    truth = counts[:, ids]  # (patches, objects): the pixels of each object in each patch
    flat_masks = masks.reshape(heads, -1).astype(np.int64)
    intersection = truth.T @ flat_masks.T  # (objects, heads)
    mask_area = flat_masks.sum(axis=1) * patch * patch  # (heads,)
    object_area = truth.sum(axis=0)  # (objects,)
    union = mask_area[None, :] + object_area[:, None] - intersection
    jaccard = intersection / union
    classes = [int((object_class or {}).get(o, -1)) for o in ids]
    return ImageMaskScore((gh, gw), ids, classes, jaccard, np.argmax(jaccard, axis=1))


class MaskTally:
    """The measures of one checkpoint on one data set, one image at a time (`add`), in image-id order."""

    def __init__(self) -> None:
        self.scores: dict[int, ImageMaskScore] = {}
        self.left_out: list[int] = []
        self.heads: int | None = None

    def add(self, image_id: int, masks: np.ndarray, objects: np.ndarray, patch: int,
            object_class: dict[int, int] | None = None) -> ImageMaskScore | None:
        """Score one image (`score_image`) and keep it; None (and the image counted as left out) without objects."""
        if self.heads is not None and masks.shape[0] != self.heads:
            raise AttentionError(f"image {image_id}: {masks.shape[0]} heads after images of {self.heads}")
        self.heads = int(masks.shape[0])
        score = score_image(masks, objects, patch, object_class)
        if score is None:
            self.left_out.append(int(image_id))
        else:
            self.scores[int(image_id)] = score
        return score

    def measure_entries(self, *, resamples: int, seed: int) -> list[dict]:
        """`attention_mask_jaccard` and `attention_mask_jaccard_heads`: per image the fraction, reducer mean,
        percent with section 6's bootstrap interval (`make_measure`)."""
        ids = sorted(self.scores)
        boot = {"resamples": resamples, "seed": seed, "n_left_out": len(self.left_out)}
        return [
            make_measure(MEASURE, image_ids=ids, per_image=[self.scores[i].best for i in ids], reducer="mean", **boot),
            make_measure(HEADS_MEASURE, image_ids=ids, per_image=[self.scores[i].heads_mean for i in ids],
                         reducer="mean", **boot),
        ]

    def head_table(self) -> list[float] | None:
        """Per head, the mean over images of its mean J over the objects, percent (heads as columns); None without
        a scored image."""
        if not self.scores:
            return None
        per_head = np.stack([score.per_head for score in self.scores.values()])
        return [float(v) for v in PERCENT * per_head.mean(axis=0)]

    def class_table(self) -> dict[str, dict[str, float | int]]:
        """Per object class (its SegmentationClass index): the mean best-head J of its objects, percent, and their
        number; never the measure."""
        best: dict[int, list[float]] = {}
        for score in self.scores.values():
            for cls, value in zip(score.classes, score.jaccard.max(axis=1)):
                best.setdefault(cls, []).append(float(value))
        return {str(cls): {"value": PERCENT * float(np.mean(values)), "objects": len(values)}
                for cls, values in sorted(best.items())}

    def record_fields(self) -> dict[str, Any]:
        """The record's fields beside its measures: the mass, the per-head and per-class tables, the left-out ids
        and per scored image `ImageMaskScore.as_record` (keyed by image id)."""
        return {"mass": MASS, "head_jaccard": self.head_table(), "class_jaccard": self.class_table(),
                "left_out": sorted(self.left_out),
                "images": {str(i): self.scores[i].as_record() for i in sorted(self.scores)}}


def score_set(dataset: Any, readings: Iterable[tuple[int, int, np.ndarray]], *, sealed: bool, resamples: int,
              seed: int) -> tuple[list[dict], dict[str, Any]]:
    """The scoring of one checkpoint's readings on a segmentation set: (measures, record fields).

    dataset: a `VocSegmentation` (`labels(id)`, `name(id)`, `image_path(id)`); its labels are read here, one image at
    a time. readings: (image id, patch p, attention (heads, gh, gw) float32) in image-id order. sealed: a sealed set's
    record keeps no truth for the figures. resamples, seed: the run's bootstrap. The fields are `record_fields`, the
    images' names and `figure_images` (`figure_entry` of the first `FIGURE_IMAGES` scored images)."""
    tally = MaskTally()
    names: dict[str, str] = {}
    figures: list[dict] = []
    for image_id, patch, attention in readings:
        masks = mass_masks(attention)
        labels = dataset.labels(image_id)
        score = tally.add(image_id, masks, labels.objects, patch, labels.class_of)
        names[str(image_id)] = dataset.name(image_id)
        if score is not None and len(figures) < FIGURE_IMAGES:
            figures.append(figure_entry(dataset.name(image_id), dataset.image_path(image_id), patch, masks, score,
                                        None if sealed else labels.objects))
    measures = tally.measure_entries(resamples=resamples, seed=seed)
    return measures, {**tally.record_fields(), "names": names, "figure_images": figures}


# ----------------------------------------------------------------------------------------------------- figures


def mask_rows(masks: np.ndarray) -> list[list[str]]:
    """Per head its grid mask as text, one string of 0/1 a grid row: (heads, gh, gw) bool -> heads x gh strings."""
    return [["".join("1" if v else "0" for v in row) for row in head] for head in masks]


def masks_from_rows(rows: Sequence[Sequence[str]]) -> np.ndarray:
    """`mask_rows`' text back: (heads, gh, gw) bool."""
    return np.array([[[c == "1" for c in row] for row in head] for head in rows], dtype=bool)


def figure_entry(name: str, image: str, patch: int, masks: np.ndarray, score: ImageMaskScore,
                 objects: np.ndarray | None) -> dict[str, Any]:
    """What the figures draw of one scored image: its name and file, the patch, every head's grid mask
    (`mask_rows`), the objects, each one's best head and J, and (an unsealed set only: `objects` given) each
    object's pixels in the cropped map as COCO RLE."""
    entry: dict[str, Any] = {"name": name, "image": str(image), "patch": int(patch), "grid": list(score.grid),
                             "masks": mask_rows(masks), "objects": list(score.objects),
                             "best_head": [int(h) for h in score.best_head],
                             "best_jaccard": [float(v) for v in score.jaccard.max(axis=1)]}
    if objects is not None:
        from pycocotools import mask as mask_utils

        cropped = crop_labels(objects, score.grid, patch)
        truths = {}
        for object_id in score.objects:
            rle = mask_utils.encode(np.asfortranarray((cropped == object_id).astype(np.uint8)))
            truths[str(object_id)] = {"size": [int(x) for x in rle["size"]], "counts": rle["counts"].decode("ascii")}
        entry["truth_rle"] = truths
    return entry


def figure_truths(entry: dict) -> dict[int, np.ndarray] | None:
    """A figure entry's truths: object id -> (p gh, p gw) bool, or None where the record keeps none (sealed)."""
    if "truth_rle" not in entry:
        return None
    from pycocotools import mask as mask_utils

    return {int(k): mask_utils.decode({"size": v["size"], "counts": v["counts"].encode("ascii")}).astype(bool)
            for k, v in entry["truth_rle"].items()}
