"""Box data sets for object discovery (docs/design.md §15): VOC year folders and COCO instances files.

Both give the same face: `.names` (file names, in image-id order), `.image_ids` (sorted ints), `.image_path(id)`,
`.open_image(id)` (section 3's opening), `.annotations_sha256` (the identity of the labels: hashing files is not
opening them) and, once the labels are opened by a scoring job, `.boxes()` -> {id: [(x0, y0, x1, y1), ...]} int
boxes in pixels, x1 and y1 exclusive (IoU without +1).

- `VocBoxes(root, split)`: `root` is a year folder (`VOC2007/`): `ImageSets/Main/<split>.txt` lists the images
  (ids 1..n in the file's sorted order: VOC names are not numbers), `JPEGImages/<name>.jpg` each image,
  `Annotations/<name>.xml` its objects; every `<object>` counts (difficult and truncated too), its box
  [xmin - 1, ymin - 1, xmax, ymax] from the integers in the XML.
- `CocoBoxes(images, annotations, image_list)`: a COCO instances file; the boxes of the non-crowd instances,
  [round(x), round(y), round(x + w), round(y + h)] (Python's round). `image_list`: a file of names, one a line,
  whose trailing number is the image id (LOST's `coco_20k_filenames.txt`: `train2014/COCO_train2014_%012d.jpg`),
  so a COCO-2017 folder (`%012d.jpg`) serves.

Bad input is refused in one line naming the file (`BoxDataError`): malformed XML, a missing JPEG, a box outside its
image, an image-list name without an image or without an entry in the JSON, an empty split file.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from evaluate.datasets import DataSetError
from evaluate.plumbing.provenance import sha256_file, sha256_json
from evaluate.pixels.images import open_rgb

Box = tuple[int, int, int, int]
_TRAILING_NUMBER = re.compile(r"(\d+)\.[A-Za-z]+$")


class BoxDataError(DataSetError):
    """A box data set's file is missing or malformed; the message names the file and what is wrong."""


def _check_box(box: Box, width: int, height: int, where: str) -> Box:
    x0, y0, x1, y1 = box
    if not (0 <= x0 <= x1 <= width and 0 <= y0 <= y1 <= height):
        raise BoxDataError(f"{where}: box {list(box)} (x0, y0, x1, y1) lies outside its {width} x {height} image")
    return box


class VocBoxes:
    """A VOC year folder's split (see the module docstring)."""

    kind = "voc"
    has_labels = True

    def __init__(self, root: str | os.PathLike, split: str):
        self.root = Path(root)
        self.labels_path = self.root / "Annotations"
        split_file = self.root / "ImageSets" / "Main" / f"{split}.txt"
        if not split_file.is_file():
            raise BoxDataError(f"{split_file}: split file not found (a VOC year folder holds ImageSets/Main/"
                               f"{split}.txt, JPEGImages/ and Annotations/)")
        names = sorted({line.split()[0] for line in split_file.read_text(encoding="utf-8").splitlines()
                        if line.strip()})
        if not names:
            raise BoxDataError(f"{split_file}: the split file lists no image")
        self.split_file = split_file
        self.names = names
        self.image_ids = list(range(1, len(names) + 1))
        self._name = dict(zip(self.image_ids, names))
        for name in names:
            for path, what in ((self._jpeg(name), "image"), (self._xml(name), "annotation")):
                if not path.is_file():
                    raise BoxDataError(f"{path}: the {what} of {name}, listed in {split_file}, is missing")

    @classmethod
    def from_spec(cls, spec: dict) -> VocBoxes:
        """From its config entry's spec (`root`, `split`)."""
        return cls(spec["root"], spec["split"])

    def listing(self) -> dict:
        """The manifest's listing: image ids and names (`evaluate.datasets.manifest`)."""
        return {"image_ids": list(self.image_ids), "names": list(self.names)}

    def _jpeg(self, name: str) -> Path:
        return self.root / "JPEGImages" / f"{name}.jpg"

    def _xml(self, name: str) -> Path:
        return self.root / "Annotations" / f"{name}.xml"

    def image_path(self, image_id: int) -> Path:
        return self._jpeg(self._name[int(image_id)])

    def open_image(self, image_id: int):
        return open_rgb(self.image_path(image_id))

    @property
    def annotations_sha256(self) -> str:
        """sha256 of the split's XML files' hashes, in id order (their bytes, not their content read)."""
        return sha256_json([sha256_file(self._xml(n)) for n in self.names])

    def boxes(self) -> dict[int, list[Box]]:
        """Every object's box per image id; reading the XML files is opening the labels."""
        return {image_id: self._read_xml(image_id) for image_id in self.image_ids}

    def _read_xml(self, image_id: int) -> list[Box]:
        path = self._xml(self._name[image_id])
        try:
            tree = ET.parse(path).getroot()
            size = tree.find("size")
            width, height = int(size.findtext("width")), int(size.findtext("height"))
            boxes = []
            for obj in tree.iter("object"):
                bnd = obj.find("bndbox")
                xmin, ymin, xmax, ymax = (int(float(bnd.findtext(k))) for k in ("xmin", "ymin", "xmax", "ymax"))
                boxes.append((xmin - 1, ymin - 1, xmax, ymax))
        except ET.ParseError as exc:
            raise BoxDataError(f"{path}: malformed XML ({exc})") from None
        except (AttributeError, TypeError, ValueError):
            raise BoxDataError(f"{path}: not a VOC annotation (each <object> needs a <bndbox> with integer xmin, "
                               "ymin, xmax, ymax, and the file a <size> with width and height)") from None
        return [_check_box(b, width, height, str(path)) for b in boxes]


class CocoBoxes:
    """A COCO instances file's boxes, optionally restricted to an image list (see the module docstring)."""

    kind = "coco-boxes"
    has_labels = True

    def __init__(self, images: str | os.PathLike, annotations: str | os.PathLike,
                 image_list: str | os.PathLike | None = None):
        self.images_dir = Path(images)
        self.annotations_path = self.labels_path = Path(annotations)
        data = self._load()
        entries = {}
        for image in data.get("images", []):
            entries[int(image["id"])] = image
        if image_list is not None:
            list_path = Path(image_list)
            if not list_path.is_file():
                raise BoxDataError(f"{list_path}: image list not found")
            lines = [line.strip() for line in list_path.read_text(encoding="utf-8").splitlines() if line.strip()]
            if not lines:
                raise BoxDataError(f"{list_path}: the image list names no image")
            ids = []
            for line in lines:
                match = _TRAILING_NUMBER.search(line)
                if match is None:
                    raise BoxDataError(f"{list_path}: {line!r} does not end in an image id and an extension")
                image_id = int(match.group(1))
                if image_id not in entries:
                    raise BoxDataError(f"{list_path}: {line!r} (id {image_id}) has no entry in "
                                       f"{self.annotations_path}")
                ids.append(image_id)
            chosen = sorted(set(ids))
        else:
            chosen = sorted(entries)
        if not chosen:
            raise BoxDataError(f"{self.annotations_path}: lists no image")
        self.image_ids = chosen
        self._entries = {i: entries[i] for i in chosen}
        self.names = [str(self._entries[i]["file_name"]) for i in chosen]
        for image_id in chosen:
            path = self.image_path(image_id)
            if not path.is_file():
                where = f" (named in {image_list})" if image_list is not None else ""
                raise BoxDataError(f"{path}: image id {image_id}{where} has no image file")

    @classmethod
    def from_spec(cls, spec: dict) -> CocoBoxes:
        """From its config entry's spec (`images`, `annotations`, optional `image_list`)."""
        return cls(spec["images"], spec["annotations"], spec.get("image_list"))

    def listing(self) -> dict:
        """The manifest's listing: image ids and names (`evaluate.datasets.manifest`)."""
        return {"image_ids": list(self.image_ids), "names": list(self.names)}

    def _load(self) -> dict:
        try:
            with open(self.annotations_path, "rb") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise BoxDataError(f"{self.annotations_path}: annotation file not found") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BoxDataError(f"{self.annotations_path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("images"), list):
            raise BoxDataError(f"{self.annotations_path}: not a COCO instances file (no 'images' list)")
        return data

    def image_path(self, image_id: int) -> Path:
        return self.images_dir / str(self._entries[int(image_id)]["file_name"])

    def open_image(self, image_id: int):
        return open_rgb(self.image_path(image_id))

    @property
    def annotations_sha256(self) -> str:
        return sha256_file(self.annotations_path)

    def boxes(self) -> dict[int, list[Box]]:
        """The non-crowd instances' boxes per image id; reading the annotations is opening the labels."""
        data = self._load()
        out: dict[int, list[Box]] = {i: [] for i in self.image_ids}
        for ann in data.get("annotations", []):
            image_id = int(ann.get("image_id", -1))
            if image_id not in out or ann.get("iscrowd", 0):
                continue
            try:
                x, y, w, h = (float(v) for v in ann["bbox"])
            except (KeyError, TypeError, ValueError):
                raise BoxDataError(f"{self.annotations_path}: annotation {ann.get('id')} has no bbox [x, y, w, h]") \
                    from None
            entry = self._entries[image_id]
            box = (round(x), round(y), round(x + w), round(y + h))
            out[image_id].append(_check_box(box, int(entry["width"]), int(entry["height"]),
                                            f"{self.annotations_path} (annotation {ann.get('id')})"))
        return out
