"""Potsdam-3 as IIC ships it and STEGO scores it (docs/design.md §18, DESIGN 16): kind `potsdam`.

Layout, as IIC's preparation script writes it and STEGO's download unpacks it (config: `root`, the potsdam folder):

    <root>/imgs/<id>.mat        `img`: uint8 (200, 200, 4), RGB and infrared; the first three channels are read
    <root>/gt/<id>.mat          `gt`: integer (200, 200), ISPRS's six classes 0..5
    <root>/labelled_test.txt    the scored tiles' ids, one a line (855 of them)

Ids are the tiles' numbers, sorted (the list selects and never orders). The six classes merge into three as STEGO's
`Potsdam.fine_to_coarse`: {0, 4} -> 0 roads and cars, {1, 5} -> 1 buildings and clutter, {2, 3} -> 2 trees and
vegetation; 255 is ignore. The .mat files are read with `scipy.io.loadmat`.

Refused by name: a file that is not a MATLAB file (or a v7.3 HDF5 one), a file without its `img` or `gt` array, an
image that is not uint8 with at least three channels, a listed tile without its image or label, a label of another
size than its image, a label value outside 0..5 and 255.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io
from PIL import Image
from scipy.io.matlab import MatReadError

from evaluate.datasets.semantic import (
    IGNORE,
    SemanticDataError,
    SemanticSet,
    classes_from_values,
    ids_for,
    lookup_table,
    read_list,
)

KIND = "potsdam"
ID_LIST = "labelled_test.txt"
IMAGE_KEY, LABEL_KEY = "img", "gt"
# STEGO (src/data.py, class Potsdam, `fine_to_coarse`) and its `get_class_labels("potsdam")`
FINE_TO_COARSE = {0: 0, 4: 0, 1: 1, 5: 1, 2: 2, 3: 2}
CLASS_NAMES = ("roads and cars", "buildings and clutter", "trees and vegetation")
LOOKUP = lookup_table(FINE_TO_COARSE, ignored=(IGNORE,))


@contextmanager
def _matlab_file(path: Path) -> Iterator[None]:
    """Within: what scipy raises on a MATLAB file it cannot read becomes one line naming `path`."""
    try:
        yield
    except FileNotFoundError:
        raise SemanticDataError(f"{path}: file not found") from None
    except NotImplementedError:
        raise SemanticDataError(f"{path}: a MATLAB v7.3 (HDF5) file; IIC's Potsdam tiles are MATLAB 5 files "
                                "(scipy.io.loadmat)") from None
    except (MatReadError, ValueError, TypeError, OSError, EOFError) as exc:
        raise SemanticDataError(f"{path}: not a readable MATLAB file ({exc})") from None


def _mat_array(path: Path, key: str) -> np.ndarray:
    """The array `key` of a MATLAB file; a missing or unreadable file, or one without `key`, is one line."""
    if not path.is_file():
        raise SemanticDataError(f"{path}: file not found")
    with _matlab_file(path):
        content = scipy.io.loadmat(path, variable_names=[key])
    if key not in content:
        raise SemanticDataError(f"{path}: no {key!r} array in the file")
    return np.asarray(content[key])


def _mat_shape(path: Path, key: str) -> tuple[int, ...]:
    """The shape of array `key` of a MATLAB file, from its header (`scipy.io.whosmat`: nothing decoded)."""
    with _matlab_file(path):
        found = {name: shape for name, shape, _ in scipy.io.whosmat(path)}
    if key not in found:
        raise SemanticDataError(f"{path}: no {key!r} array in the file")
    return tuple(int(s) for s in found[key])


class PotsdamSet(SemanticSet):
    """IIC's Potsdam tiles listed in labelled_test.txt (module docstring)."""

    kind = KIND

    def __init__(self, root: str | os.PathLike):
        root = Path(root)
        if not root.is_dir():
            raise SemanticDataError(f"{root}: Potsdam folder not found")
        list_file = root / ID_LIST
        names = read_list(list_file, "Potsdam id list")
        bad = [name for name in names if not name.isdigit()]
        if bad:
            raise SemanticDataError(f"{list_file}: {bad[0]!r} is not a tile id (IIC's tiles are numbered)")
        ids, names = ids_for(sorted(names), list_file)
        images_dir, labels_dir = root / "imgs", root / "gt"
        for folder in (images_dir, labels_dir):
            if not folder.is_dir():
                raise SemanticDataError(f"{folder}: Potsdam folder not found (IIC's layout: imgs/, gt/, {ID_LIST})")
        image_files, label_files = set(os.listdir(images_dir)), set(os.listdir(labels_dir))
        images, labels = {}, {}
        for image_id, name in zip(ids, names):
            for files, folder, what, store in ((image_files, images_dir, "image", images),
                                               (label_files, labels_dir, "label", labels)):
                if f"{name}.mat" not in files:
                    raise SemanticDataError(f"{folder / (name + '.mat')}: {what} missing (listed in {list_file})")
                store[image_id] = folder / f"{name}.mat"
        super().__init__(image_ids=ids, names=names, images=images, labels=labels, labels_root=labels_dir,
                         class_names=CLASS_NAMES)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> PotsdamSet:
        """`root`: the potsdam folder (imgs/, gt/, labelled_test.txt)."""
        if not spec.get("root"):
            raise SemanticDataError(f"a potsdam data set needs its root (the folder holding imgs/, gt/ and {ID_LIST})")
        return cls(spec["root"])

    def open_image(self, image_id: int) -> Image.Image:
        """The tile's first three channels (RGB; the fourth, infrared, is not read), as STEGO reads them."""
        path = self.image_path(image_id)
        img = _mat_array(path, IMAGE_KEY)
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] < 3:
            raise SemanticDataError(f"{path}: 'img' must be uint8 (H, W, >= 3 channels), found {img.dtype} "
                                    f"{img.shape}")
        return Image.fromarray(np.ascontiguousarray(img[:, :, :3]))

    def image_size(self, image_id: int) -> tuple[int, int]:
        """(width, height) of the tile, from its .mat header."""
        path = self.image_path(image_id)
        shape = _mat_shape(path, IMAGE_KEY)
        if len(shape) != 3:
            raise SemanticDataError(f"{path}: 'img' must be (H, W, channels), found shape {shape}")
        return shape[1], shape[0]

    def _decode_labels(self, image_id: int) -> np.ndarray:
        path = self.label_path(image_id)
        gt = _mat_array(path, LABEL_KEY)
        if gt.ndim != 2 or gt.dtype.kind not in "iu":
            raise SemanticDataError(f"{path}: 'gt' must be an integer (H, W) array, found {gt.dtype} {gt.shape}")
        gt = gt.astype(np.int64)
        defined = "a Potsdam class (0..5) or 255"
        if gt.size and (gt.min() < 0 or gt.max() > 255):
            value = int(gt.min()) if gt.min() < 0 else int(gt.max())
            raise SemanticDataError(f"{path}: label value {value} is not {defined}")
        return classes_from_values(gt, LOOKUP, path, defined)
