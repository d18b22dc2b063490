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

Boxes are checked against the real image, its size read from the file's header (after EXIF orientation, as the
reading opens it): an annotation that declares another size than its image's, a box outside the image, an
inverted box (x1 < x0 or y1 < y0) are refused naming both files.

Bad input is refused in one line naming the file (`BoxDataError`): malformed XML, a missing JPEG, a declared size
that is not the image's, a box outside its image or inverted, an image-list name without an image or without an
entry in the JSON, an empty split file; split files and image lists as every list file is read
(`evaluate.datasets.lists`: a byte-order mark accepted, not UTF-8 or a name listed twice refused); the COCO file's
structure when the data set is listed (`evaluate.datasets.cocofile`, and each annotation an object with `id`,
`image_id` among the images, `bbox` four numbers, `iscrowd` 0 or 1 where given), not first in a scoring job.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from evaluate.datasets import DataSetError
from evaluate.datasets.cocofile import checked_entry, image_entries, is_number, read_coco_json
from evaluate.datasets.lists import read_lines, unique
from evaluate.pixels.images import header_size, open_rgb
from evaluate.plumbing.provenance import sha256_file, sha256_json

Box = tuple[int, int, int, int]
ANNOTATION_KEYS = ("id", "image_id", "bbox")  # what a box needs of a COCO annotation (`iscrowd`: 0 where absent)
_TRAILING_NUMBER = re.compile(r"(\d+)\.[A-Za-z]+$")


class BoxDataError(DataSetError):
    """A box data set's file is missing or malformed; the message names the file and what is wrong."""


def _check_box(box: Box, width: int, height: int, where: str) -> Box:
    """`box` once checked to be neither inverted nor outside a `width` x `height` image."""
    x0, y0, x1, y1 = box
    if x1 < x0 or y1 < y0:
        raise BoxDataError(f"{where}: box {list(box)} (x0, y0, x1, y1) is inverted: "
                           f"{'x1 < x0' if x1 < x0 else 'y1 < y0'}")
    if not (0 <= x0 and x1 <= width and 0 <= y0 and y1 <= height):
        raise BoxDataError(f"{where}: box {list(box)} (x0, y0, x1, y1) lies outside its {width} x {height} image")
    return box


def _image_size(path: Path) -> tuple[int, int]:
    """(width, height) of an image as the reading opens it (after EXIF orientation), from its header alone."""
    return header_size(path, "image", BoxDataError)


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
        listed = unique(read_lines(split_file, "split file", BoxDataError), split_file, BoxDataError,
                        key=lambda line: line.split()[0])
        names = sorted(listed)
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
        """The XML's boxes, once its declared size was found to be its JPEG's (read from the JPEG's header)."""
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
        jpeg = self.image_path(image_id)
        real = _image_size(jpeg)
        if real != (width, height):
            raise BoxDataError(f"{path}: declares a {width} x {height} image, but {jpeg} is {real[0]} x {real[1]} px")
        return [_check_box(b, width, height, str(path)) for b in boxes]


class CocoBoxes:
    """A COCO instances file's boxes, optionally restricted to an image list (see the module docstring)."""

    kind = "coco-boxes"
    has_labels = True

    def __init__(self, images: str | os.PathLike, annotations: str | os.PathLike,
                 image_list: str | os.PathLike | None = None):
        self.images_dir = Path(images)
        self.annotations_path = self.labels_path = Path(annotations)
        entries, annotations = self._load()
        if image_list is not None:
            list_path = Path(image_list)
            if not list_path.is_file():
                raise BoxDataError(f"{list_path}: image list not found")
            lines = read_lines(list_path, "image list", BoxDataError)
            if not lines:
                raise BoxDataError(f"{list_path}: the image list names no image")

            def image_id(line: str) -> int:
                match = _TRAILING_NUMBER.search(line)
                if match is None:
                    raise BoxDataError(f"{list_path}: {line!r} does not end in an image id and an extension")
                return int(match.group(1))

            listed = unique(lines, list_path, BoxDataError, key=image_id, noun="image id")
            for found, (_, line) in listed.items():
                if found not in entries:
                    raise BoxDataError(f"{list_path}: {line!r} (id {found}) has no entry in {self.annotations_path}")
            chosen = sorted(listed)
        else:
            chosen = sorted(entries)
        self.image_ids = chosen
        self._entries = {i: entries[i] for i in chosen}
        self._annotations = [ann for ann in annotations if ann["image_id"] in self._entries]  # the chosen images'
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

    def _load(self) -> tuple[dict[int, dict], list[dict]]:
        """(image id -> image entry, annotations) of the annotation file, its structure checked (module docstring):
        read once, as the data set is opened (COCO20k's is train2017's 450 MB file)."""
        path = self.annotations_path
        data = read_coco_json(path, BoxDataError)
        images = image_entries(data, path, BoxDataError)
        seen: dict[int, int] = {}
        for index, ann in enumerate(data["annotations"]):
            where = checked_entry(path, BoxDataError, "annotations", index, ann, ANNOTATION_KEYS, seen, "annotation")
            if ann["image_id"] not in images:
                raise BoxDataError(f"{path}: {where}: image_id {ann['image_id']!r} is not among the images")
            bbox = ann["bbox"]
            if not (isinstance(bbox, list) and len(bbox) == 4 and all(is_number(v) for v in bbox)):
                raise BoxDataError(f"{path}: {where}: 'bbox' must be [x, y, width, height], got {bbox!r}")
            if ann.get("iscrowd", 0) not in (0, 1) or isinstance(ann.get("iscrowd"), bool):
                raise BoxDataError(f"{path}: {where}: 'iscrowd' must be 0 or 1, got {ann['iscrowd']!r}")
        return images, data["annotations"]

    def _checked_size(self, image_id: int, entry: dict) -> tuple[int, int]:
        """(width, height) the file's `entry` declares for an image, once found to be its image file's (read from
        its header)."""
        path = self.image_path(image_id)
        declared, real = (entry["width"], entry["height"]), _image_size(path)
        if real != declared:
            raise BoxDataError(f"{self.annotations_path}: image id {image_id} is declared {declared[0]} x "
                               f"{declared[1]} (width x height), but {path} is {real[0]} x {real[1]} px")
        return real

    def image_path(self, image_id: int) -> Path:
        return self.images_dir / str(self._entries[int(image_id)]["file_name"])

    def open_image(self, image_id: int):
        """The image in RGB (`open_rgb`), once its size was found to be the one the file declares."""
        self._checked_size(int(image_id), self._entries[int(image_id)])
        return open_rgb(self.image_path(image_id))

    @property
    def annotations_sha256(self) -> str:
        return sha256_file(self.annotations_path)

    def boxes(self) -> dict[int, list[Box]]:
        """The non-crowd instances' boxes per image id, each checked against its image's real size (its declared
        size must be it); reading the annotations is opening the labels."""
        out: dict[int, list[Box]] = {i: [] for i in self.image_ids}
        sizes: dict[int, tuple[int, int]] = {}
        for ann in self._annotations:
            image_id = ann["image_id"]
            if ann.get("iscrowd", 0):
                continue
            x, y, w, h = (float(v) for v in ann["bbox"])
            box = (round(x), round(y), round(x + w), round(y + h))
            if image_id not in sizes:
                sizes[image_id] = self._checked_size(image_id, self._entries[image_id])
            width, height = sizes[image_id]
            out[image_id].append(_check_box(box, width, height, f"{self.annotations_path} (annotation {ann['id']})"))
        return out
