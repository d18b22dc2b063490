"""Text list files, one name a line: a VOC split (`ImageSets/Main/<split>.txt`), an image list (LOST's
`coco_20k_filenames.txt`), a DAVIS sequence list (`ImageSets/2017/val.txt`). Read one way by every kind that has
them.

- UTF-8, with or without a byte-order mark (Windows editors write one; it is not part of the first name), any line
  ending; blank lines and the spaces around a line are not part of a name.
- A file that is not UTF-8 is refused in one line naming the file and the byte offset of the first byte that does
  not decode (a UTF-16 file, as PowerShell's `>` writes, is named as such).
- `unique` refuses a name (or what a kind reads from it, an image id) listed twice, naming both lines: the second
  would otherwise replace the first silently.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import TypeVar

Line = tuple[int, str]  # (1-based line number, the line's text without the spaces around it)
Key = TypeVar("Key", bound=Hashable)


def read_lines(path: str | os.PathLike, what: str, error: type[Exception]) -> list[Line]:
    """The non-blank lines of a list file (`what` names it in messages: "split file", "image list", ...) with their
    line numbers, as `Line`s. Raises `error` naming the file where it is not UTF-8 text."""
    path = Path(path)
    data = path.read_bytes()
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise error(f"{path}: the {what} is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8")
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = start + exc.start
        raise error(f"{path}: the {what} is not UTF-8 text: byte 0x{data[offset]:02x} at byte offset {offset} "
                    f"({exc.reason}); save it as UTF-8") from None
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if line.strip()]


def unique(lines: Iterable[Line], path: str | os.PathLike, error: type[Exception], *,
           key: Callable[[str], Key] = lambda name: name, noun: str = "") -> dict[Key, Line]:
    """`lines` by their key (the name itself by default), in the file's order; a key met twice is refused as
    `error` naming both lines (`noun` says what the key is, e.g. "image id": "line 4 ('b.jpg') names image id 9, as
    line 1 ('a.jpg') does")."""
    seen: dict[Key, Line] = {}
    for number, text in lines:
        found = key(text)
        if found in seen:
            first, first_text = seen[found]
            if noun:
                raise error(f"{path}: line {number} ({text!r}) names {noun} {found}, as line {first} "
                            f"({first_text!r}) does")
            raise error(f"{path}: line {number} repeats {found!r} of line {first}")
        seen[found] = (number, text)
    return seen
