"""What a checkpoint file's bytes are, decided from its first bytes before any reader is handed it (docs/design.md
§2): a reader's own error on a file of another kind says nothing a user can act on (torch's unpickler reports
"Unsupported operand 60" for an HTML page).

`container_of(path, error)` -> one of CONTAINERS:
- "torch-zip": a zip archive holding `<folder>/data.pkl` (what `torch.save` writes since torch 1.6); its members'
  CRC-32s are then checked (`verify_torch_zip`) before torch reads it, so a file damaged in a copy or on disk is
  refused instead of loading its corrupted weights (torch's reader does not check them);
- "pickle": a pickle stream of protocol 2 to 5 (`torch.save`'s legacy format, or a bare `pickle.dump`);
- "safetensors": an 8-byte little-endian header length followed by `{`, the header within the file.
Anything else is refused as `error`, naming what the file is: another zip (a NumPy .npz, an archive holding the
checkpoint), an image, a compressed file, a Git LFS pointer, an HTML page (a failed download), JSON or other text,
or unknown bytes, shown.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zipfile
from pathlib import Path

CONTAINERS = ("torch-zip", "pickle", "safetensors")
HEAD = 1024  # bytes read to recognise a file (a tar archive's magic lies at 257)
CHECKPOINT_SUFFIXES = (".pth", ".pt", ".ckpt", ".bin", ".safetensors", ".pkl", ".tar")
SIGNATURES = (  # (first bytes, what the file is)
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"GIF8", "a GIF image"),
    (b"\x1f\x8b", "a gzip-compressed file (decompress it and give the file inside)"),
    (b"BZh", "a bzip2-compressed file (decompress it and give the file inside)"),
    (b"\xfd7zXZ\x00", "an xz-compressed file (decompress it and give the file inside)"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive (unpack it and give the checkpoint inside)"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (Keras or TensorFlow weights, not PyTorch's)"),
    (b"\x93NUMPY", "a NumPy .npy array"),
    (b"%PDF", "a PDF document"),
    (b"version https://git-lfs.github.com/spec/", "a Git LFS pointer, not the weights (fetch them: git lfs pull)"),
)
_TITLE = re.compile(rb"<title[^>]*>([^<]{1,80})", re.IGNORECASE)


def _zip_kind(path: Path, error: type[Exception]) -> str:
    """"torch-zip" for torch's archive; else refused naming what the zip holds."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise error(f"{path}: not a readable checkpoint, truncated or corrupt (a zip archive that cannot be read: "
                    f"{exc})") from None
    if any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
        return "torch-zip"
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "") or "nothing"
    if names and all(name.endswith(".npy") for name in names):
        arrays = ", ".join(name[:-4] for name in names[:5]) + (", ..." if len(names) > 5 else "")
        what = f"a NumPy .npz archive (arrays: {arrays})"
    elif any(name.lower().endswith(CHECKPOINT_SUFFIXES) for name in names):
        what = f"a zip archive holding {shown}, not a torch checkpoint itself: unpack it and give the file inside"
    else:
        what = (f"a zip archive, but not a torch checkpoint (torch.save's archive holds <folder>/data.pkl; this one "
                f"holds {shown})")
    raise error(f"{path}: not a readable checkpoint: it is {what}")


def _text_kind(path: Path, head: bytes, size: int) -> str | None:
    """What a text file is (an HTML page, XML, JSON, text), or None where `head` is not UTF-8 text."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not merely a character cut by the end of the head
            return None
        text = head[: exc.start].decode("utf-8")
    if "\x00" in text:
        return None
    start = text.lstrip("\ufeff \t\r\n").lower()
    if start.startswith(("<!doctype html", "<html")) or "<html" in start[:200]:
        title = _TITLE.search(head)
        shown = f" titled {title.group(1).decode('utf-8', 'replace').strip()!r}" if title else ""
        return f"an HTML page{shown} (a failed download saves the server's page instead of the file)"
    if start.startswith("<?xml"):
        return "an XML document"
    if start.startswith(("{", "[")) and size <= 1 << 20:
        try:
            json.loads(path.read_bytes())
            return "a JSON document"
        except ValueError:
            pass
    first = start.splitlines()[0][:60] if start else ""
    return f"a text file (it begins {first!r})" if first else "a text file of white space"


def container_of(path: str | os.PathLike, error: type[Exception]) -> str:
    """The container of a checkpoint file (one of CONTAINERS, module docstring); any other file refused as `error`
    naming what it is. The file exists and is not empty (the caller said so first)."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(HEAD)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip_kind(path, error)
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"
    if len(head) >= 9 and head[8:9] == b"{":
        (length,) = struct.unpack("<Q", head[:8])
        if length > size - 8:
            raise error(f"{path}: not a readable checkpoint: it is a safetensors file whose header (of {length:,} "
                        f"bytes, by its first 8) runs past the end of the file ({size:,} bytes): truncated or corrupt")
        return "safetensors"
    for signature, what in SIGNATURES:
        if head.startswith(signature):
            break
    else:
        if head[257:262] == b"ustar":
            what = "a tar archive (unpack it and give the checkpoint inside)"
        else:
            what = _text_kind(path, head, size) or (
                "neither a torch archive (zip), a pickle nor a safetensors file (it begins with the bytes "
                f"{head[:8].hex(' ')})")
    raise error(f"{path}: not a readable checkpoint: it is {what}")


def verify_torch_zip(path: str | os.PathLike, error: type[Exception]) -> None:
    """Read every member of a torch zip archive and check its CRC-32 (and local header) against the archive's
    directory; refuse the first that fails as `error`, before any of its weights is used."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except Exception as exc:  # noqa: BLE001 - a damaged member fails in zlib, struct or zipfile's own ways
        raise error(f"{path}: corrupt checkpoint: its zip archive cannot be read through ({type(exc).__name__}: "
                    f"{exc}); the file was damaged in a copy or on disk, and none of its weights were used") from None
    if bad is not None:
        raise error(f"{path}: corrupt checkpoint: the archive's member {bad} fails its CRC-32 check (the file was "
                    "damaged in a copy or on disk); none of its weights were used")
