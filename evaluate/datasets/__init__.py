"""Labelled data sets: one module per kind, all with one face, and the one table of kinds
(`evaluate.datasets.kinds.KINDS`).

    kind          config section   module       what it is                                    readings it feeds
    coco          datasets:        coco         COCO instances: images folder + JSON          keys480, tokens224
    davis         videos:          davis        DAVIS's layout: sequences of frames + masks   frames480
    voc           discovery:       boxes        a VOC year folder's boxes                     keys-native
    coco-boxes    discovery:       boxes        a COCO instances file's boxes (+ image list)  keys-native
    saliency      saliency:        saliency     images + masks folders (ECSSD, DUTS, ...)     saliency
    voc           segmentation:    voc_segmentation  VOC's object and class maps (VOC12 val)   cls-attention
    cocostuff     semseg:          cocostuff    COCO-Stuff-27 (STEGO's layout, curated list)  tokens320
    cityscapes    semseg:          cityscapes   Cityscapes leftImg8bit + gtFine labelIds      tokens320
    potsdam       semseg:          potsdam      Potsdam-3 (IIC's .mat files)                  tokens320
    folder        semseg:          label_folder images + single-channel label PNGs + classes  tokens320
    (what the semantic kinds share: `semantic`)

The face (every image kind; a video kind's units are its sequences instead of images):
- opened from its config entry: `open_dataset(spec)`, where `spec` is what the workflow hands its jobs
  (`evaluate.plumbing.config.DataSet.spec`: the entry's name, section and kind, and its own fields);
- `kind`; `image_ids` (sorted ints) and `names` (the files' names, in that order); `image_path(id)` and
  `open_image(id)`, an RGB PIL image by the kind's opening rule (`evaluate.pixels.images`);
- `annotations_sha256`: the labels' identity, from their files' bytes (hashing is not opening them); `has_labels`;
- `listing()`: what its manifest holds beside ids, names and shards (`evaluate.datasets.manifest`, the one writer);
- its labels, read by methods of its own, called only inside a scoring job (`evaluate.ledger.scoring`).

A kind's entry (`evaluate.datasets.kinds.Kind`) says where its config entries live, which fields say where it is,
which readings it feeds, which callable opens it and how the demo draws one. Adding a kind: its module here, one
line in `KINDS` (kinds.py), its fields in the config schema. A data set's spec names its opener, so a job imports
the one module it opens and no job imports the table: a new kind re-runs no job of the others, and a kind's module
enters the code hash of exactly its data sets' jobs (`workflow/rules/common.smk`: `code_of`). Nothing here imports
numpy, PIL or pycocotools: the workflow's own process reads the table to check a config.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from evaluate import EvaluationError


class DataSetError(EvaluationError):
    """A data set's file is missing or malformed; the message names the file and what is wrong."""


def files_by_stem(folder: Path, suffixes: tuple[str, ...], what: str,
                  error: type[DataSetError] = DataSetError) -> dict[str, Path]:
    """stem -> file of `folder`'s files with one of `suffixes` (case-insensitive), in sorted file-name order; dot files
    and other suffixes are not part of a set. A missing folder, or two files of one stem, is refused (`error`, one
    line naming the file): the pairing of images with their labels by name, which the folder kinds share."""
    if not folder.is_dir():
        raise error(f"{folder}: {what} folder not found")
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.suffix.lower() not in suffixes or not path.is_file():
            continue
        if path.stem in found:
            raise error(f"{path}: a second {what} named {path.stem!r} (beside {found[path.stem].name})")
        found[path.stem] = path
    return found


def resolved(target: str) -> Any:
    """The callable a "module:attribute.attribute" string names, its module imported now."""
    module, _, attributes = target.partition(":")
    found: Any = importlib.import_module(module)
    for attribute in attributes.split("."):
        found = getattr(found, attribute)
    return found


def open_dataset(spec: dict[str, Any]) -> Any:
    """The data set a spec names (`evaluate.plumbing.config.DataSet.spec`: its kind's `opener` and the entry's
    fields), opened by its kind's module: listings and the labels' identity only, no label read."""
    return resolved(spec["opener"])(spec)
