"""The C allocator of a job that streams through images: large per-image temporaries go back to the system.

glibc's malloc serves blocks of at least M_MMAP_THRESHOLD bytes (128 KiB at start) with their own memory map,
returned to the system when freed, and smaller ones from its heap. Each time a mapped block is freed it raises the
threshold to that block's size (up to 32 MiB), so after the first image's largest temporary (a label map, the
upsampled logits) every later temporary below that size comes from the heap; the small blocks a job keeps per image
(its statistics) land between them, and since the heap only shrinks from its top, the freed temporaries under them
stay resident: the job's memory grows with the number of images it scores (docs/design.md §10).
`keep_large_blocks_mapped` fixes the threshold at its initial value, which stops that adjustment.
"""

from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
MMAP_THRESHOLD = 128 * 1024  # glibc's initial threshold, bytes


def keep_large_blocks_mapped() -> bool:
    """Fix glibc's mmap threshold at 128 KiB for this process (mallopt), so blocks of that size or more are mapped on
    their own and returned when freed, whatever was freed before. True where it was set; False where the C library
    is not glibc (macOS, musl), which this leaves as it is."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
