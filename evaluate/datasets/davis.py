"""Video data sets in DAVIS's own layout (docs/design.md §12), read unchanged.

    <root>/JPEGImages/<resolution>/<sequence>/<frame>.jpg     every frame, sorted by file name
    <root>/Annotations/<resolution>/<sequence>/<frame>.png    masks, each named after its frame
    <root>/ImageSets/2017/val.txt                             optional: the sequences, one a line

The sequences are the folders of `JPEGImages/<resolution>/`, or the lines of a list file (read as every list file is,
`evaluate.datasets.lists`: a byte-order mark accepted, not UTF-8 or a sequence listed twice refused). What a mask
PNG holds goes by its MODE, never by its values (`read_mask`): grayscale (L or 1-bit; DAVIS-2016, 0 and 255) is one
object, every non-zero pixel object 1; palette (P; DAVIS-2017) holds object ids 0..K, and in the ground truth 255 is
void, read as background. The objects of a sequence are ids 1..M, M the highest id of its first frame's mask (an id
missing below M is an object with an empty mask); an id above M in a later mask is background, counted
(`TruthMask.n_extra`).

Listing a data set opens no label: `DavisDataset` checks the layout from folder listings alone, one line naming the
file for a listed sequence without a folder, a sequence without frames, a missing first-frame mask or a mask without
a frame. Masks are decoded only where a job reads them: the first one (`first_mask`, what propagation is given)
apart from the rest (`truth_mask`, what scoring reads); a corrupt mask or frame, a mask whose size differs from its
frame's, or a first mask without any object is an error naming the file.

Label identity (for the ledger's openings): `labels_sha256(part)`, the sha256 of the canonical JSON of the
sorted [path relative to the root, sha256 of the file] pairs of the first-frame masks ("first") or of every other
mask ("rest").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from evaluate.datasets import DataSetError
from evaluate.datasets.lists import read_lines, unique
from evaluate.plumbing.atomic import atomic_path
from evaluate.plumbing.provenance import sha256_file, sha256_json
from evaluate.pixels.images import header_size, opened_image

RESOLUTION = "480p"  # DAVIS's folder of 480-pixel frames; "Full-Resolution" is the other one DAVIS ships
FRAME_SUFFIXES = (".jpg", ".jpeg")
MASK_SUFFIX = ".png"
VOID = 255  # DAVIS-2017's void label in a palette ground-truth mask
GRAYSCALE_MODES = ("L", "1")
PALETTE_MODE = "P"
LABEL_PARTS = ("first", "rest")


class VideoDatasetError(DataSetError):
    """A DAVIS-layout folder, frame or mask that cannot be used; the message names the file."""


@dataclass(frozen=True)
class VideoSequence:
    """One sequence: its frames in sorted file-name order and its annotation masks (each named after a frame).

    frames: (n,) paths `JPEGImages/<res>/<name>/*.jpg`; masks: paths `Annotations/<res>/<name>/*.png` in the order of
    their frames, masks[0] the first frame's. `frame_of(mask)` is the frame a mask annotates.
    """

    name: str
    frames: tuple[Path, ...]
    masks: tuple[Path, ...]

    @property
    def first_mask_path(self) -> Path:
        return self.masks[0]

    def frame_of(self, mask: Path) -> Path:
        by_stem = {frame.stem: frame for frame in self.frames}
        return by_stem[Path(mask).stem]


@dataclass(frozen=True)
class FirstMask:
    """The first frame's ground truth: labels (H, W) uint8, ids 0..n_objects (void read as 0)."""

    labels: np.ndarray
    n_objects: int


@dataclass(frozen=True)
class TruthMask:
    """A later frame's ground truth: labels (H, W) uint8 in 0..M; n_extra pixels held an id above M (now 0)."""

    labels: np.ndarray
    n_extra: int


def _frames_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in FRAME_SUFFIXES)


def frame_size(path: str | os.PathLike) -> tuple[int, int]:
    """(width, height) of a frame after its EXIF orientation, from the file's header (no decoding)."""
    return header_size(path, "frame", VideoDatasetError)


def read_mask(path: str | os.PathLike, *, result: bool = False) -> np.ndarray:
    """A mask PNG as object ids: (H, W) uint8.

    By mode: L or 1 (grayscale) -> one object, every non-zero pixel 1; P (palette) -> the indices as ids, 255
    (void) read as 0 in a ground truth; in a result (`result=True`) a palette's 255 is an id like any other. Any
    other mode, a file that is not a PNG, or a corrupt one is a VideoDatasetError naming the file.
    """
    path = Path(path)
    with opened_image(path, "mask", VideoDatasetError) as img:
        img.load()
        mode, fmt = img.mode, img.format
        ids = np.array(img, dtype=np.uint8) if mode in (PALETTE_MODE, *GRAYSCALE_MODES) else None
    if fmt != "PNG":
        raise VideoDatasetError(f"{path}: a mask must be a PNG file, this is {fmt}")
    if ids is None:
        raise VideoDatasetError(
            f"{path}: a {mode} PNG is not a mask; masks are grayscale (mode L: one object, non-zero pixels) or "
            "palette (mode P: object ids, 255 void)"
        )
    if mode in GRAYSCALE_MODES:
        return (ids != 0).astype(np.uint8)
    if not result:
        ids[ids == VOID] = 0
    return ids


def _checked_size(mask: Path, labels: np.ndarray, frame: Path) -> None:
    width, height = frame_size(frame)
    if labels.shape != (height, width):
        raise VideoDatasetError(
            f"{mask}: mask is {labels.shape[1]} x {labels.shape[0]} px but its frame {frame.name} is "
            f"{width} x {height}"
        )


def first_mask(sequence: VideoSequence) -> FirstMask:
    """Read the first frame's mask (the propagation's given input): ids 0..M, M its highest id (>= 1)."""
    path = sequence.first_mask_path
    labels = read_mask(path)
    _checked_size(path, labels, sequence.frames[0])
    n_objects = int(labels.max())
    if n_objects == 0:
        raise VideoDatasetError(f"{path}: the first frame's mask of sequence {sequence.name} holds no object")
    return FirstMask(labels, n_objects)


def truth_mask(sequence: VideoSequence, mask: Path, n_objects: int) -> TruthMask:
    """Read a ground-truth mask of `sequence` against its frame; ids above `n_objects` become 0 (counted)."""
    labels = read_mask(mask)
    _checked_size(mask, labels, sequence.frame_of(mask))
    extra = labels > n_objects
    n_extra = int(np.count_nonzero(extra))
    if n_extra:
        labels[extra] = 0
    return TruthMask(labels, n_extra)


def davis_palette() -> list[int]:
    """DAVIS's palette (PASCAL VOC's colour map): 256 RGB triples, flat; id 0 black, 1 red, 2 green, 3 olive, ..."""
    palette = []
    for index in range(256):
        rgb, code = [0, 0, 0], index
        for bit in range(8):
            for channel in range(3):
                rgb[channel] |= ((code >> channel) & 1) << (7 - bit)
            code >>= 3
        palette.extend(rgb)
    return palette


PALETTE = davis_palette()


def write_mask(path: str | os.PathLike, labels: np.ndarray) -> None:
    """Write object ids (H, W) uint8 as an index PNG (mode P, DAVIS's palette), atomically (temporary name, rename)."""
    labels = np.asarray(labels)
    if labels.dtype != np.uint8 or labels.ndim != 2:
        raise ValueError(f"expected object ids (H, W) uint8, got {labels.dtype} {labels.shape}")
    img = Image.fromarray(labels)  # mode L; putpalette makes it P with the same indices
    img.putpalette(PALETTE)
    with atomic_path(path) as tmp:
        img.save(tmp, format="PNG")


def masks_sha256(root: Path, paths: Iterable[Path]) -> str:
    """sha256 of the canonical JSON of the sorted [path relative to root, sha256 of its bytes] pairs."""
    return sha256_json(sorted([Path(p).relative_to(root).as_posix(), sha256_file(p)] for p in paths))


class DavisDataset:
    """A video data set in DAVIS's layout under `root` (see the module docstring).

    `sequences_file`: a list of sequence names, one a line (blank lines skipped), e.g. `ImageSets/2017/val.txt`; a
    relative path is taken relative to `root`. Without one, the sequences are the folders of
    `JPEGImages/<resolution>/`, sorted. `.names` the sequence names in order; `.sequence(name)` a `VideoSequence`.
    """

    kind = "davis"
    has_labels = True

    def __init__(self, root: str | os.PathLike, resolution: str = RESOLUTION,
                 sequences_file: str | os.PathLike | None = None):
        self.root = Path(root)
        self.resolution = str(resolution)
        self.frames_dir = self.root / "JPEGImages" / self.resolution
        self.masks_dir = self.labels_path = self.root / "Annotations" / self.resolution
        for folder in (self.frames_dir, self.masks_dir):
            if not folder.is_dir():
                raise VideoDatasetError(f"{folder}: folder not found (a DAVIS-layout data set holds "
                                        f"JPEGImages/{self.resolution}/ and Annotations/{self.resolution}/)")
        self.sequences_file = None if sequences_file is None else self._resolve(Path(sequences_file))
        self.names = self._listed() if self.sequences_file is not None else sorted(
            p.name for p in self.frames_dir.iterdir() if p.is_dir())
        if not self.names:
            raise VideoDatasetError(f"{self.frames_dir}: no sequence folders")
        self._sequences = {name: self._read_sequence(name) for name in self.names}

    @classmethod
    def from_spec(cls, spec: dict) -> DavisDataset:
        """From its config entry's spec (`root`, `resolution`, optional `sequences_file`)."""
        return cls(spec["root"], spec["resolution"], spec.get("sequences_file"))

    def _resolve(self, path: Path) -> Path:
        path = path if path.is_absolute() else self.root / path
        if not path.is_file():
            raise VideoDatasetError(f"{path}: sequence list file not found")
        return path

    def _listed(self) -> list[str]:
        """The list file's sequences, in its order (`evaluate.datasets.lists`: UTF-8, a byte-order mark accepted, a
        name listed twice refused naming both lines), each a folder of `JPEGImages/<resolution>/`."""
        listed = unique(read_lines(self.sequences_file, "sequence list", VideoDatasetError), self.sequences_file,
                        VideoDatasetError)
        if not listed:
            raise VideoDatasetError(f"{self.sequences_file}: the sequence list is empty")
        for name, (number, _) in listed.items():
            if "/" in name or name in (".", "..") or not (self.frames_dir / name).is_dir():
                raise VideoDatasetError(f"{self.sequences_file}: line {number}: listed sequence {name!r} does not "
                                        f"exist (no folder {self.frames_dir / name})")
        return list(listed)

    def _read_sequence(self, name: str) -> VideoSequence:
        frames = _frames_in(self.frames_dir / name)
        if not frames:
            raise VideoDatasetError(f"{self.frames_dir / name}: sequence {name} has no frames (*.jpg)")
        stems = {frame.stem: i for i, frame in enumerate(frames)}
        mask_dir = self.masks_dir / name
        found = sorted(p for p in mask_dir.iterdir() if p.suffix == MASK_SUFFIX) if mask_dir.is_dir() else []
        first = mask_dir / (frames[0].stem + MASK_SUFFIX)
        if first not in found:
            raise VideoDatasetError(f"{first}: missing first-frame mask of sequence {name} (its first frame is "
                                    f"{frames[0].name})")
        for mask in found:
            if mask.stem not in stems:
                raise VideoDatasetError(f"{mask}: mask of a frame that does not exist (no {mask.stem}.jpg in "
                                        f"{self.frames_dir / name})")
        masks = sorted(found, key=lambda mask: stems[mask.stem])
        return VideoSequence(name, tuple(frames), tuple(masks))

    @property
    def sequences(self) -> list[VideoSequence]:
        return [self._sequences[name] for name in self.names]

    def sequence(self, name: str) -> VideoSequence:
        if name not in self._sequences:
            raise VideoDatasetError(f"{self.frames_dir}: no sequence {name!r} in this data set")
        return self._sequences[name]

    def label_paths(self, part: str, names: Sequence[str] | None = None) -> list[Path]:
        """The mask files of `part` ("first": each sequence's first-frame mask; "rest": every other mask)."""
        if part not in LABEL_PARTS:
            raise ValueError(f"part must be one of {', '.join(LABEL_PARTS)}, got {part!r}")
        chosen = [self.sequence(name) for name in (self.names if names is None else names)]
        if part == "first":
            return [seq.masks[0] for seq in chosen]
        return [mask for seq in chosen for mask in seq.masks[1:]]

    def labels_sha256(self, part: str, names: Sequence[str] | None = None) -> str:
        """The identity of a part of the labels (of all sequences, or of `names`): see the module docstring."""
        return masks_sha256(self.root, self.label_paths(part, names))

    @property
    def annotations_sha256(self) -> str:
        """The identity of the labels scoring reads: every mask but the first frames' (`labels_sha256("rest")`)."""
        return self.labels_sha256("rest")

    def listing(self) -> dict:
        """The manifest's listing (`evaluate.datasets.manifest`): per sequence its frame and mask file names, and the
        identity of the first-frame masks (propagation's given input; the rest are `annotations_sha256`)."""
        return {
            "resolution": self.resolution,
            "sequences": [
                {"name": seq.name, "frames": [p.name for p in seq.frames], "masks": [p.name for p in seq.masks]}
                for seq in self.sequences
            ],
            "first_masks_sha256": self.labels_sha256("first"),
        }
