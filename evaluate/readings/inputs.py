"""A shard's decoded inputs (docs/design.md §3): decoded and resized once per data set, shared by every checkpoint.

The JPEG decode and the two resizes are the same for every checkpoint; only the network differs. So a shard's
images are decoded once, by `preprocess_shard`, into the uint8 pixels both readings start from, and every
checkpoint's extraction of that shard normalises those same bytes (`evaluate.pixels.images.normalise_pixels`), which gives
features bit for bit equal to decoding the JPEGs in the extraction job itself (`DecodedInputs`, today's path).

An inputs folder (`results/inputs/{dataset}/{shard}/`, temporary in the workflow) holds

    images480.npy   (n, 480, 480, 3) uint8   the keys480 reading: whole image, 480 x 480 LANCZOS, RGB
    images224.npy   (n, 224, 224, 3) uint8   the tokens224 reading: short side 224 BICUBIC, centre crop, RGB
    image_ids.json  [n ids]                  row order of both arrays; written LAST, so it marks a complete folder

841,728 bytes per image, the size of one checkpoint's float16 features of that image (900 x 384 x 2 = 480 x 480 x 3).

Decoding runs in `workers` processes: this one and `workers - 1` forked ones (so the data set's annotation index is
shared, not re-read), each claiming the next row from a shared counter and writing it into the memory-mapped arrays;
extraction reads and normalises the next batch in a background thread (`prefetch`) while the network
runs on the current one, and on CUDA hands the network pinned host tensors copied without blocking.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np
from numpy.lib.format import open_memmap

from evaluate import EvaluationError
from evaluate.plumbing.atomic import atomic_path, write_json
from evaluate.pixels.images import keys480_pixels, normalise_pixels, tokens224_pixels
from evaluate.pixels.geometry import KEYS480_SIZE, TOKENS224_SIZE

if TYPE_CHECKING:  # tensors are made by `normalise_pixels`; the decoding jobs and workers never import torch
    import torch

log = logging.getLogger("evaluate.readings.inputs")

READINGS = {
    "images480": (KEYS480_SIZE, KEYS480_SIZE, 3),
    "images224": (TOKENS224_SIZE, TOKENS224_SIZE, 3),
}
IDS = "image_ids.json"
BYTES_PER_IMAGE = sum(int(np.prod(shape)) for shape in READINGS.values())
PREFETCH_BATCHES = 2  # batches normalised ahead of the network: one in the queue, one being made


class InputsError(EvaluationError):
    """A decoded-inputs folder that is incomplete or does not match the shard it is read for."""


# ------------------------------------------------------------------------------------------------------- decoding


def decode_pixels(dataset: Any, image_id: int, keys480_side: int = KEYS480_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """One image's two readings before normalisation: ((s, s, 3) uint8, (224, 224, 3) uint8), s = `keys480_side`.

    dataset: anything with `open_image(id) -> RGB PIL image` (a `CocoDataset`: EXIF orientation, RGB, size check).
    """
    img = dataset.open_image(image_id)
    try:
        return keys480_pixels(img, keys480_side), tokens224_pixels(img)
    finally:
        img.close()


_worker_dataset: Any = None
_worker_side: int = KEYS480_SIZE


def _start_worker(dataset: Any, keys480_side: int = KEYS480_SIZE) -> None:
    global _worker_dataset, _worker_side
    _worker_dataset = dataset
    _worker_side = keys480_side


def _decode_in_worker(image_id: int) -> tuple[np.ndarray, np.ndarray]:
    return decode_pixels(_worker_dataset, image_id, _worker_side)


def _decode_rows(dataset: Any, ids: Sequence[int], path480: Path, path224: Path, next_row: Any) -> None:
    """Claim rows from the shared counter `next_row` until every row is claimed; decode each claimed row's image and
    write its two readings into that row of the two (memory-mapped) .npy files, opened once per process."""
    arrays = np.load(path480, mmap_mode="r+"), np.load(path224, mmap_mode="r+")
    try:
        while True:
            with next_row.get_lock():
                row = next_row.value
                if row >= len(ids):
                    return
                next_row.value = row + 1
            for array, pixels in zip(arrays, decode_pixels(dataset, ids[row])):
                array[row] = pixels  # a shared mapping: the page cache holds it for every process, no msync needed
    except BaseException:
        with next_row.get_lock():
            next_row.value = len(ids)  # every other process stops after its current image
        raise


def _decode_rows_in_worker(dataset: Any, ids: Sequence[int], path480: Path, path224: Path, next_row: Any,
                           errors: Any) -> None:
    """A forked worker's body: `_decode_rows`, with its error handed to the parent through `errors` (exit code 1)."""
    try:
        _decode_rows(dataset, ids, path480, path224, next_row)
    except BaseException as exc:
        try:
            errors.put(exc)
        except Exception:  # an exception that does not pickle travels as its text
            errors.put(InputsError(f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None


def _decode_rows_in_parallel(dataset: Any, ids: Sequence[int], path480: Path, path224: Path, workers: int,
                             where: Path) -> None:
    """`_decode_rows` in this process and `workers - 1` forked ones, sharing one row counter (rows go to whichever
    process is free, so an expensive image delays no one). The first worker error is raised here, unchanged; a
    worker killed without one (a signal, e.g. out of memory) raises InputsError naming `where`."""
    context = _pool_context()
    next_row, errors = context.Value("l", 0), context.SimpleQueue()
    forked = [context.Process(target=_decode_rows_in_worker, name=f"preprocess-{i}", daemon=True,
                              args=(dataset, ids, path480, path224, next_row, errors)) for i in range(1, workers)]
    for process in forked:
        process.start()
    try:
        _decode_rows(dataset, ids, path480, path224, next_row)
    finally:
        with next_row.get_lock():
            next_row.value = len(ids)
        for process in forked:
            process.join()
    if not errors.empty():
        raise errors.get()
    for process in forked:
        if process.exitcode != 0:
            raise InputsError(f"{where}: a preprocessing worker ({process.name}) ended with exit code "
                              f"{process.exitcode} (a negative code is the signal that killed it, e.g. 9 when out "
                              "of memory); its images are missing, so no inputs were written")


def _pool_context() -> multiprocessing.context.BaseContext:
    """fork where the platform has it: the workers inherit the data set (no pickling, no re-reading of a large
    annotation file) and start in milliseconds; they use only PIL and numpy, never torch's thread pools."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else methods[0])


def decoded_pixels(dataset: Any, image_ids: Sequence[int], workers: int = 1, keys480_side: int = KEYS480_SIZE
                   ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Yield (image id, pixels480 (s, s, 3) uint8, pixels224 (224, 224, 3) uint8) in the order of `image_ids`,
    s = `keys480_side`.

    workers 1: decoded here, one image at a time. workers > 1: that many processes decode ahead of the consumer
    (results come back in order); an error in a worker (corrupt image, wrong size) is raised here, unchanged.
    """
    ids = [int(i) for i in image_ids]
    workers = max(1, min(int(workers), len(ids)))
    if workers == 1:
        for image_id in ids:
            yield (image_id, *decode_pixels(dataset, image_id, keys480_side))
        return
    with _pool_context().Pool(workers, initializer=_start_worker, initargs=(dataset, keys480_side)) as pool:
        for image_id, pixels in zip(ids, pool.imap(_decode_in_worker, ids, chunksize=1)):
            yield (image_id, *pixels)


def check_image_ids(image_ids: Sequence[int], where: str | os.PathLike) -> list[int]:
    """The ids as ints, refused (InputsError naming `where`) when empty or duplicated."""
    ids = [int(i) for i in image_ids]
    if not ids:
        raise InputsError(f"{where}: a shard needs at least one image id")
    if len(set(ids)) != len(ids):
        raise InputsError(f"{where}: duplicate image ids in the shard")
    return ids


def preprocess_shard(dataset: Any, image_ids: Sequence[int], out_dir: str | os.PathLike, *, workers: int = 1
                     ) -> Path:
    """Decode and resize the shard's images once and write its inputs folder (module docstring); returns it.

    Row i of both arrays is image_ids[i]. `workers` processes (this one included) decode the rows, each writing
    them straight into the preallocated memory-mapped .npy files (temporary names, renamed when complete), so no
    pixels pass through a pipe and memory holds one image per process.
    """
    out = Path(out_dir)
    ids = check_image_ids(image_ids, out)
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (out / IDS).unlink()  # an old ids file would vouch for the arrays about to be replaced
    for stale in out.glob(".tmp-*"):  # left by an attempt that was killed; only one job writes this folder
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    with contextlib.ExitStack() as stack:
        paths = {}
        for name, shape in READINGS.items():
            paths[name] = stack.enter_context(atomic_path(out / f"{name}.npy"))
            created = open_memmap(paths[name], mode="w+", dtype=np.uint8, shape=(len(ids), *shape))
            del created  # the file holds the .npy header and its full size; the rows are written by _decode_rows
        workers = max(1, min(int(workers), len(ids)))
        _decode_rows_in_parallel(dataset, ids, paths["images480"], paths["images224"], workers, where=out)
    write_json(out / IDS, ids)  # last: its presence marks a complete folder
    return out


# ------------------------------------------------------------------------------------------------- batch sources


class DecodedInputs:
    """A shard's images decoded from their files, batch by batch (the decode-per-checkpoint path).

    `.image_ids`; `.keys480_side` (s); `.batches(batch_size)` yields (ids, pixels480 (b, s, s, 3) uint8, pixels224
    (b, 224, 224, 3) uint8); `.annotations_sha256` of the data set. workers: as `decoded_pixels` (1: decoded in
    this process). keys480_side: 480, or the network's own (`Geometry.keys480_side`, 476 for patch 14).
    """

    def __init__(self, dataset: Any, image_ids: Sequence[int], where: str | os.PathLike = "shard", workers: int = 1,
                 keys480_side: int = KEYS480_SIZE):
        self.dataset = dataset
        self.image_ids = check_image_ids(image_ids, where)
        self.annotations_sha256 = getattr(dataset, "annotations_sha256", None)
        self.workers = int(workers)
        self.keys480_side = int(keys480_side)

    def batches(self, batch_size: int) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        batch: list[tuple[int, np.ndarray, np.ndarray]] = []
        for decoded in decoded_pixels(self.dataset, self.image_ids, self.workers, self.keys480_side):
            batch.append(decoded)
            if len(batch) == batch_size:
                yield _stack(batch)
                batch = []
        if batch:
            yield _stack(batch)


def _stack(batch: list[tuple[int, np.ndarray, np.ndarray]]) -> tuple[list[int], np.ndarray, np.ndarray]:
    return [b[0] for b in batch], np.stack([b[1] for b in batch]), np.stack([b[2] for b in batch])


def open_shard_inputs(folder: str | os.PathLike, expected_ids: Sequence[int], *, annotations_sha256: str | None,
                      open_dataset: Callable[[], Any], workers: int = 1) -> StoredInputs | DecodedInputs:
    """The shard's decoded inputs when its folder is complete, else the images decoded here from the data set
    (`open_dataset()`, in `workers` processes): the features are the same bytes either way. A folder dropped while
    it is opened (the shard's last extract job drops it under `features.keep: false`) counts as gone."""
    folder = Path(folder)
    if (folder / IDS).is_file():
        try:
            return StoredInputs(folder, expected_ids=expected_ids, annotations_sha256=annotations_sha256)
        except InputsError:
            if (folder / IDS).is_file():
                raise
            log.info("%s was dropped while it was opened: decoding the images here", folder)
    return DecodedInputs(open_dataset(), expected_ids, where=folder, workers=workers)


def drop_inputs(folder: str | os.PathLike) -> int:
    """Delete an inputs folder (its ids file first, so a concurrent reader sees it incomplete); returns the bytes
    freed. A reader that already opened the arrays keeps reading them (memory-mapped; POSIX unlink)."""
    folder = Path(folder)
    freed = 0
    for name in (IDS, *(f"{reading}.npy" for reading in READINGS)):
        path = folder / name
        with contextlib.suppress(FileNotFoundError):
            freed += path.stat().st_size
            path.unlink()
    with contextlib.suppress(FileNotFoundError, OSError):
        folder.rmdir()
    return freed


class StoredInputs:
    """A shard's inputs folder written by `preprocess_shard`, read batch by batch from memory-mapped arrays.

    expected_ids: the shard's ids from the manifest; a folder holding other ids (a stale folder of an older
      manifest) is refused, naming the folder. Same interface as `DecodedInputs`; the folder holds keys480's pixels
      at 480 px (`keys480_side`): a network of another side (patch 14: 476) decodes its own (`DecodedInputs`).
    """

    keys480_side = KEYS480_SIZE

    def __init__(self, folder: str | os.PathLike, expected_ids: Sequence[int] | None = None,
                 annotations_sha256: str | None = None):
        self.folder = Path(folder)
        self.annotations_sha256 = annotations_sha256
        ids_path = self.folder / IDS
        try:
            ids = json.loads(ids_path.read_text())
        except FileNotFoundError:
            raise InputsError(f"{ids_path}: missing; the inputs folder {self.folder} is incomplete "
                              "(its preprocess job did not finish)") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputsError(f"{ids_path}: not valid JSON: {exc}") from None
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise InputsError(f"{ids_path}: must be a JSON list of integer image ids")
        self.image_ids = check_image_ids(ids, ids_path)
        if expected_ids is not None and [int(i) for i in expected_ids] != self.image_ids:
            raise InputsError(f"{ids_path}: holds image ids {_short(self.image_ids)} but the shard is "
                              f"{_short(expected_ids)}; delete {self.folder} so it is decoded again")
        self.arrays: dict[str, np.ndarray] = {}
        for name, shape in READINGS.items():
            path = self.folder / f"{name}.npy"
            try:
                array = np.load(path, mmap_mode="r", allow_pickle=False)
            except FileNotFoundError:
                raise InputsError(f"{path}: missing; the inputs folder {self.folder} is incomplete") from None
            except (ValueError, OSError) as exc:
                raise InputsError(f"{path}: not a readable .npy file: {exc}") from None
            if array.dtype != np.uint8 or array.shape != (len(self.image_ids), *shape):
                raise InputsError(f"{path}: {array.dtype} {array.shape}, expected uint8 "
                                  f"{(len(self.image_ids), *shape)} ({len(self.image_ids)} ids in {IDS})")
            self.arrays[name] = array

    def batches(self, batch_size: int) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        ids = self.image_ids
        for start in range(0, len(ids), batch_size):
            end = min(start + batch_size, len(ids))
            yield (ids[start:end], np.array(self.arrays["images480"][start:end]),
                   np.array(self.arrays["images224"][start:end]))


def _short(ids: Sequence[int]) -> str:
    ids = list(ids)
    return str(ids) if len(ids) <= 6 else f"[{', '.join(map(str, ids[:3]))}, ... {ids[-1]}] ({len(ids)} ids)"


# ------------------------------------------------------------------------------------------------- model batches


def model_batches(inputs: Any, batch_size: int, *, pin_memory: bool = False
                  ) -> Iterator[tuple[list[int], torch.Tensor, torch.Tensor]]:
    """(ids, x480 (b, 3, 480, 480) float32, x224 (b, 3, 224, 224) float32) per batch of `inputs`, normalised;
    pinned (page-locked) when `pin_memory`, so the copy to a CUDA device can run asynchronously."""
    for ids, pixels480, pixels224 in inputs.batches(batch_size):
        x480, x224 = normalise_pixels(pixels480), normalise_pixels(pixels224)
        if pin_memory:
            x480, x224 = x480.pin_memory(), x224.pin_memory()
        yield ids, x480, x224


_DONE = object()


def prefetch(items: Iterable, depth: int = PREFETCH_BATCHES) -> Iterator:
    """Yield `items` in order while a background thread produces the next ones (at most `depth` waiting).

    An exception in the producer is raised here, at the item it would have produced; leaving the loop early stops
    the producer. Decoding, memory-mapped reads and numpy's arithmetic release the GIL, so the producer's work
    overlaps the network's.
    """
    waiting: queue.Queue = queue.Queue(maxsize=max(1, depth - 1))
    stop = threading.Event()

    def put(entry: tuple) -> bool:
        while not stop.is_set():
            try:
                waiting.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((_DONE, None))
        except BaseException as exc:  # handed to the consumer, raised there
            put((_DONE, exc))

    thread = threading.Thread(target=produce, name="prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, error = waiting.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()  # a producer waiting on a full queue gives up within 0.1 s
        thread.join()


def drop_if_all_extracted(folder: str | os.PathLike, shard_metas: Iterable[str | os.PathLike]) -> int | None:
    """Drop the inputs folder (`drop_inputs`) once every checkpoint has the shard's features, i.e. every path of
    `shard_metas` (each configured checkpoint's meta.json of this shard) exists; returns the bytes freed, or None
    while some checkpoint still lacks the shard."""
    if all(Path(p).is_file() for p in shard_metas):
        return drop_inputs(folder)
    return None
