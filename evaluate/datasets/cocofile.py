"""A COCO instances file's structure, checked one way for both kinds that read one (`coco`: masks, `coco-boxes`:
boxes) before anything else reads it, so a bad file is one line naming it and the entry rather than a KeyError in
a later job:

- the file: present, JSON, an object; `images` a non-empty list; `annotations` and `categories` lists where present;
- each entry: an object holding its kind's keys, an integer `id` not used by an earlier entry of its list (a
  duplicate names both entries: the second would replace the first);
- each image: a non-empty string `file_name`, positive integer `height` and `width`.

What each kind asks of an annotation beyond its keys (polygons and RLEs for masks, `bbox` for boxes) stays with the
kind. Nothing here imports pycocotools, numpy or PIL.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

IMAGE_KEYS = ("id", "file_name", "height", "width")
LISTS = ("images", "annotations", "categories")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_coco_json(path: str | os.PathLike, error: type[Exception]) -> dict:
    """The file's JSON object, its three lists checked (`images` present and not empty; the others lists where
    present, set to [] where absent). Raises `error` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: annotation file not found")
    try:
        with open(path, "rb") as handle:
            data = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a JSON object with 'images', 'annotations', 'categories', got "
                    f"{type(data).__name__}")
    if "images" not in data:
        raise error(f"{path}: missing key 'images'")
    for key in LISTS:
        if key in data and not isinstance(data[key], list):
            raise error(f"{path}: '{key}' must be a list, got {type(data[key]).__name__}")
    if not data["images"]:
        raise error(f"{path}: no images: 'images' is empty")
    data.setdefault("annotations", [])
    data.setdefault("categories", [])
    return data


def checked_entry(path: str | os.PathLike, error: type[Exception], section: str, index: int, entry: Any,
                  required: tuple[str, ...], seen: dict[int, int], noun: str, name_id: bool = True) -> str:
    """Checks every images/categories/annotations entry shares: an object with the `required` keys and an integer
    id not in `seen` (id -> index of the entry that has it; this one is added). Returns its name for further
    messages, e.g. "annotations[3] (id 17)"."""
    named = name_id and isinstance(entry, dict) and "id" in entry
    where = f"{section}[{index}]" + (f" (id {entry['id']})" if named else "")
    if not isinstance(entry, dict):
        raise error(f"{path}: {where} is not an object")
    missing = [k for k in required if k not in entry]
    if missing:
        raise error(f"{path}: {where} lacks key(s) {', '.join(missing)}")
    if not is_int(entry["id"]):
        raise error(f"{path}: {where}: 'id' must be an integer, got {entry['id']!r}")
    if entry["id"] in seen:
        raise error(f"{path}: {where}: duplicate {noun} id {entry['id']} ({section}[{seen[entry['id']]}] has it too)")
    seen[entry["id"]] = index
    return where


def image_entries(data: dict, path: str | os.PathLike, error: type[Exception]) -> dict[int, dict]:
    """image id -> its entry, in the file's order, each checked (module docstring). Raises `error` naming the file
    and the entry."""
    entries: dict[int, dict] = {}
    seen: dict[int, int] = {}
    for index, image in enumerate(data["images"]):
        where = checked_entry(path, error, "images", index, image, IMAGE_KEYS, seen, "image")
        if not (is_int(image["height"]) and is_int(image["width"]) and image["height"] > 0 and image["width"] > 0):
            raise error(f"{path}: {where}: 'height' and 'width' must be positive integers")
        if not isinstance(image["file_name"], str) or not image["file_name"]:
            raise error(f"{path}: {where}: 'file_name' must be a non-empty string")
        entries[image["id"]] = image
    return entries
