"""The readings keys480 and tokens224 (docs/design.md §3), taken together (`KEYS_TOKENS`): both of a data set's
images, stored per shard, read back as one array.

Geometry: keys480 is the whole image resized to s x s, s = p * round(480 / p) (480 for p 8 and 16, 476 for p 14),
the (s / p)^2 keys of the last block; tokens224 the 224 x 224 centre crop, the last block's (224 / p)^2 output
tokens (`evaluate.pixels.geometry`). The form is the config's `features.form` (the reading fixes none).

A shard folder holds (N480, N224 patches and width D from the network's geometry,
`evaluate.pixels.geometry.Geometry`: (900, 196, 384) for the seed's ViT-S/16)

    keys480.npy     (n, N480, D)   the last block's keys on the s x s input (s = 480, or 476 for patch 14)
    tokens224.npy   (n, N224, D)   the last block's output on the 224 x 224 centre crop
    image_ids.json  [n ids]        row order of both arrays
    meta.json                      checkpoint sha256 and format, manifest sha256, transforms, code and library
                                   versions, dtype, precision, the network's form and geometry (patch, width,
                                   depth, registers, both grids); written LAST, so its presence marks a complete shard

in the config's `features.dtype` (float16, or float32 for precision checks). The network itself runs in `precision`
(`features.precision`: float32, the reference; bfloat16 or float16 under `torch.autocast`; `network_precision`).
Every file is written under a temporary name and renamed (`evaluate.plumbing.atomic`); the arrays are filled batch
by batch in a preallocated memory-mapped .npy, so memory does not grow with the shard.

`FeatureReader` presents a data set's shards as one array, opening each shard's files memory-mapped on demand.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from bisect import bisect_right
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
from numpy.lib.format import open_memmap, read_array_header_1_0, read_array_header_2_0, read_magic
from tqdm import tqdm

from evaluate.networks import REFERENCE_PRECISION, SEED_NETWORK
from evaluate.pixels.geometry import KINDS, Geometry
from evaluate.pixels.images import TRANSFORMS
from evaluate.plumbing.atomic import atomic_path, write_json
from evaluate.readings import ReadingError
from evaluate.readings.runner import Reading, network_identity, write_meta

if TYPE_CHECKING:  # torch is imported by the functions that run a network: a job that only reads shards or lists
    import torch  # a shard's images does not pay the seconds its import costs

KEYS_TOKENS = Reading("keys480+tokens224")
DTYPES = ("float16", "float32")
# the network's arithmetic (`features.precision`; the schema holds the default): float32 as it is, the others under
# torch.autocast with the torch dtype of that name
PRECISIONS = (REFERENCE_PRECISION, "bfloat16", "float16")
META = "meta.json"
IDS = "image_ids.json"
# meta keys that must agree between the shards of one data set's features
SHARED_META_KEYS = ("checkpoint_sha256", "checkpoint_format", "architecture", "manifest_sha256", "dtype", "precision",
                    "transforms", "patch", "width", "depth", "registers")  # the form: its own check, below

log = logging.getLogger("evaluate.readings.features")


class FeatureError(ReadingError):
    """A feature shard that is incomplete, inconsistent or does not match what it claims."""


def extract_shard(
    model: torch.nn.Module,
    dataset: Any,
    image_ids: Sequence[int],
    out_dir: str | os.PathLike,
    **options: Any,
) -> Path:
    """Run `model` on `image_ids` of `dataset`, decoding the image files here, and write one complete shard.

    dataset: a `CocoDataset` (anything with `open_image(id) -> RGB PIL image` and `annotations_sha256`).
    options: those of `extract_inputs`. The features equal, byte for byte, those `extract_inputs` gives on the
    shard's `evaluate.readings.inputs.StoredInputs` (decoded once, shared by every checkpoint).
    """
    from evaluate.readings.inputs import DecodedInputs, InputsError

    try:
        inputs = DecodedInputs(dataset, image_ids, where=out_dir)
    except InputsError as exc:
        raise FeatureError(str(exc)) from None
    return extract_inputs(model, inputs, out_dir, **options)


def extract_inputs(
    model: torch.nn.Module,
    inputs: Any,
    out_dir: str | os.PathLike,
    *,
    batch_size: int,
    dtype: str,
    device: str = "cpu",
    threads: int | None = None,
    precision: str,
    meta: dict | None = None,
) -> Path:
    """Run `model` on a shard's inputs and write one complete shard to `out_dir` (`write_features`, then its
    meta.json by the runner's `write_meta`: `meta`, the network's form and geometry, device and precision, what the
    arrays are, code and library versions); returns `out_dir`.

    meta: what the caller knows (e.g. checkpoint_sha256, checkpoint_format, checkpoint path, manifest_sha256,
    shard name). The workflow's extract job reads through `evaluate.readings.runner.run_reading` instead, which
    loads the network and says the same of it.
    """
    identity = {**(meta or {}), "reading": KEYS_TOKENS.name, **network_identity(model), "device": str(device),
                "precision": precision}
    write_meta(Path(out_dir) / META, lambda: write_features(model, inputs, out_dir, batch_size=batch_size, dtype=dtype,
                                                            device=device, threads=threads, precision=precision),
               identity=identity)
    return Path(out_dir)


def write_features(
    model: torch.nn.Module,
    inputs: Any,
    out_dir: str | os.PathLike,
    *,
    batch_size: int,
    dtype: str,
    device: str = "cpu",
    threads: int | None = None,
    precision: str,
) -> dict:
    """The arrays of one shard: run `model` on its inputs into keys480.npy, tokens224.npy and image_ids.json in
    `out_dir`, each atomically; returns what meta.json says of them (counts, dtype, shapes, transforms, the labels'
    identity the inputs were decoded under, threads, batch size).

    model: a network with `geometry` (`Geometry`), `form`, `last_keys(x)` and `tokens(x)` ((B, 3, H, W) float32 ->
      (B, N, D) float32, patch rows only).
    inputs: an `evaluate.readings.inputs.StoredInputs` (decoded once per data set) or `DecodedInputs` (decoded here):
      `.image_ids`, `.annotations_sha256` and `.batches(batch_size)` of uint8 pixels.
    precision: the network's arithmetic (`network_precision`): "float32" (the reference), "bfloat16" (autocast, CPU
      and CUDA) or "float16" (autocast, CUDA only). Independent of `dtype`, the stored one.
    Row i of both arrays is inputs.image_ids[i]. The next batch is read and normalised in a background thread
    while the network runs (on CUDA: pinned, copied without blocking); at most three batches are held at a time.
    """
    from evaluate.readings.inputs import model_batches, prefetch

    if dtype not in DTYPES:
        raise FeatureError(f"feature dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    amp = network_precision(precision, device)  # refuses float16 on the CPU before anything is written
    ids = list(inputs.image_ids)
    if batch_size < 1:
        raise FeatureError(f"batch_size must be at least 1, got {batch_size!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # An earlier attempt killed halfway (SIGKILL, power loss) cannot clean up its temporary files; only one job
    # writes a shard folder, so any `.tmp-*` here now is stale and would otherwise stay forever.
    for stale in out.glob(".tmp-*"):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    import torch  # noqa: PLC0415 (see the module's imports)

    if threads:
        torch.set_num_threads(int(threads))
    model = model.to(device).eval()
    kinds = model.geometry.kinds
    n = len(ids)
    np_dtype = np.dtype(dtype)
    on_cuda = str(device).startswith("cuda")
    with contextlib.ExitStack() as stack:
        arrays: dict[str, np.memmap] = {}
        for kind, shape in kinds.items():
            tmp = stack.enter_context(atomic_path(out / f"{kind}.npy"))
            arrays[kind] = open_memmap(tmp, mode="w+", dtype=np_dtype, shape=(n, *shape))
        progress = stack.enter_context(
            tqdm(total=n, unit="img", file=sys.stderr, desc=f"features {out.name}", mininterval=2.0, leave=True)
        )
        batches = stack.enter_context(contextlib.closing(
            prefetch(model_batches(inputs, batch_size, pin_memory=on_cuda))))
        start = 0
        with torch.inference_mode(), amp:
            for batch_ids, x480, x224 in batches:
                keys = model.last_keys(x480.to(device, non_blocking=True))
                tokens = model.tokens(x224.to(device, non_blocking=True))
                del x480, x224
                end = start + len(batch_ids)
                for kind, values in (("keys480", keys), ("tokens224", tokens)):
                    values = values.detach().to("cpu", torch.float32).numpy()
                    if values.shape != (len(batch_ids), *kinds[kind]):
                        raise FeatureError(
                            f"{out}: the model gave {kind} of shape {values.shape}, expected "
                            f"{(len(batch_ids), *kinds[kind])}"
                        )
                    with np.errstate(over="ignore"):  # an overflow to inf is caught just below, with advice
                        cast = values.astype(np_dtype)
                    if not np.isfinite(cast).all():
                        bad = [batch_ids[r] for r in np.flatnonzero(~np.isfinite(cast).all(axis=(1, 2)))]
                        raise FeatureError(
                            f"{out}: {kind} of image id(s) {bad} are not finite in {dtype} "
                            f"(largest magnitude {np.nanmax(np.abs(values)):.4g}); "
                            "set features.dtype to float32 in config.yaml, or check the checkpoint"
                        )
                    arrays[kind][start:end] = cast
                start = end
                progress.update(len(batch_ids))
        if start != n:
            raise FeatureError(f"{out}: the inputs gave {start} images, expected {n}")
        for kind in kinds:
            arrays[kind].flush()
        arrays.clear()  # unmap before the renames

    write_json(out / IDS, ids)
    return {
        "n_images": n,
        "dtype": dtype,
        "shapes": {kind: [n, *shape] for kind, shape in kinds.items()},
        "transforms": TRANSFORMS,
        "annotations_sha256": getattr(inputs, "annotations_sha256", None),
        "torch_threads": torch.get_num_threads(),
        "batch_size": batch_size,
    }


def network_precision(precision: str, device: str) -> contextlib.AbstractContextManager:
    """The context the network runs in for `features.precision` on `device` (docs/design.md §3).

    float32: no autocast, and on CUDA no TF32 (cuDNN's default for convolutions), so float32 means float32.
    bfloat16: `torch.autocast(device type, bfloat16)`, on the CPU and CUDA; where the CPU has no bfloat16 matrix
    instructions it runs, but slower than float32, and a warning says so. float16: `torch.autocast("cuda",
    float16)`; refused on the CPU (FeatureError). TF32 stays off under autocast too, so what stays float32 under
    autocast (the position tables, the keys' last projection: `evaluate.networks.vit.float32_island`; LayerNorm,
    which reads the float32 residual stream) is float32 on every device.
    """
    import torch  # noqa: PLC0415 (see the module's imports)

    if precision not in PRECISIONS:
        raise FeatureError(f"features.precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    device_type = torch.device(device).type
    if device_type == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    if precision == REFERENCE_PRECISION:
        return contextlib.nullcontext()
    if precision == "float16" and device_type != "cuda":
        raise FeatureError(f"features.precision: float16 runs on CUDA only, and this job's device is {device}; on "
                           "the CPU choose bfloat16 or float32 (the reference)")
    if device_type == "cpu" and not cpu_has_bfloat16_units():
        log.warning("features.precision bfloat16: this CPU has no bfloat16 matrix instructions (AVX512-BF16, AMX or "
                    "Arm BF16), so the network runs SLOWER than in float32 here, with the same bfloat16 rounding; "
                    "float32 is faster on this machine")
    return torch.autocast(device_type, dtype=getattr(torch, precision))


def cpu_has_bfloat16_units() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware: the Linux CPU flags avx512_bf16 or amx_bf16 (x86) or bf16
    (Arm). Elsewhere (no /proc/cpuinfo) oneDNN's own bfloat16 check decides."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            flags = {flag for line in handle if line.lower().startswith(("flags", "features"))
                     for flag in line.split(":", 1)[1].split()}
    except OSError:
        import torch  # noqa: PLC0415 (see the module's imports)

        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of an .npy file from its header alone."""
    try:
        with open(path, "rb") as handle:
            version = read_magic(handle)
            reader = read_array_header_1_0 if version == (1, 0) else read_array_header_2_0
            shape, fortran, dtype = reader(handle)
    except FileNotFoundError:
        raise FeatureError(f"{path}: feature array missing") from None
    except (ValueError, OSError) as exc:
        raise FeatureError(f"{path}: not a readable .npy file: {exc}") from None
    if fortran:
        raise FeatureError(f"{path}: array is stored in Fortran order; expected C order")
    return tuple(shape), np.dtype(dtype)


class FeatureReader:
    """A data set's feature shards as one lazy array, in the order the shard folders are given.

    `.image_ids` list[int] (row order); `len()`; `.files()`; `.geometry` (`Geometry`, the same for every shard);
    `.form`; `.keys480(i)` -> (N480, D) float32; `.tokens224(i)` -> (N224, D) float32; `.row(image_id)` -> i;
    `.iter_shards(kind)` yields (ids, memmap (n, N, D)) per shard.
    Construction reads only image_ids.json, meta.json and the .npy headers; arrays are memory-mapped on use.
    kinds: the arrays that must be there (default both; the probe reads only tokens224, and with `features.keep`
    false keys480 may already be deleted once decoded).
    """

    def __init__(self, shard_dirs: Sequence[str | os.PathLike], kinds: Sequence[str] = tuple(KINDS)):
        self.shard_dirs = [Path(d) for d in shard_dirs]
        if not self.shard_dirs:
            raise FeatureError("no feature shards given")
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise FeatureError(f"unknown feature kind(s) {unknown}; expected some of {', '.join(KINDS)}")
        self.kinds = tuple(kinds)
        self._ids: list[list[int]] = []
        self.metas: list[dict] = []
        self._mmaps: dict[tuple[int, str], np.ndarray] = {}
        for shard in self.shard_dirs:
            meta_path = shard / META
            if not meta_path.is_file():
                raise FeatureError(f"{meta_path}: missing; the shard {shard} is incomplete (extraction did not finish)")
            meta = self._read_json(meta_path)
            ids = self._read_json(shard / IDS)
            if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise FeatureError(f"{shard / IDS}: must be a JSON list of integer image ids")
            for kind in self.kinds:
                tail = Geometry.from_meta(meta).kinds[kind]
                path = shard / f"{kind}.npy"
                shape, dtype = _npy_header(path)
                if shape != (len(ids), *tail):
                    raise FeatureError(
                        f"{path}: shape {shape} does not match {(len(ids), *tail)} ({len(ids)} ids in {IDS})"
                    )
                if dtype.name not in DTYPES:
                    raise FeatureError(f"{path}: dtype {dtype} is not one of {', '.join(DTYPES)}")
                if meta.get("dtype") not in (None, dtype.name):
                    raise FeatureError(f"{path}: dtype {dtype} but {meta_path} says {meta.get('dtype')}")
            if self.metas:
                first = self.metas[0]
                # a shard older than the field ran the backbone form
                forms = (first.get("form", SEED_NETWORK["form"]), meta.get("form", SEED_NETWORK["form"]))
                if forms[0] != forms[1]:
                    raise FeatureError(
                        f"{meta_path}: the network ran in the {forms[1]} form, but in the {forms[0]} form for "
                        f"{self.shard_dirs[0] / META}: the shards of one data set are refused together unless they "
                        "share one form (docs/design.md §11); re-extract them with one features.form"
                    )
                for key in SHARED_META_KEYS:
                    if key in first and key in meta and first[key] != meta[key]:
                        raise FeatureError(
                            f"{meta_path}: '{key}' differs from {self.shard_dirs[0] / META}: "
                            f"{meta[key]!r} vs {first[key]!r} (shards of different runs mixed)"
                        )
            self._ids.append(ids)
            self.metas.append(meta)
        self.geometry = Geometry.from_meta(self.metas[0])
        self.form = self.metas[0].get("form", SEED_NETWORK["form"])  # a shard written before the form was recorded
        self.image_ids: list[int] = [i for ids in self._ids for i in ids]
        self._starts = np.cumsum([0] + [len(ids) for ids in self._ids]).tolist()
        self._row_of: dict[int, int] = {}
        for row, image_id in enumerate(self.image_ids):
            if image_id in self._row_of:
                shard = self.shard_dirs[self._shard_of(row)[0]]
                raise FeatureError(f"{shard / IDS}: image id {image_id} appears in more than one row or shard")
            self._row_of[image_id] = row

    def files(self) -> list[Path]:
        """The files the reader's values come from, shard by shard: image_ids.json, then the array of each kind."""
        return [path for shard in self.shard_dirs for path in (shard / IDS, *(shard / f"{k}.npy" for k in self.kinds))]

    @staticmethod
    def _read_json(path: Path) -> Any:
        try:
            with open(path, "rb") as handle:
                return json.load(handle)
        except FileNotFoundError:
            raise FeatureError(f"{path}: missing") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise FeatureError(f"{path}: not valid JSON: {exc}") from None

    def __len__(self) -> int:
        return len(self.image_ids)

    def _shard_of(self, i: int) -> tuple[int, int]:
        shard = bisect_right(self._starts, i) - 1
        return shard, i - self._starts[shard]

    def _open(self, shard: int, kind: str) -> np.ndarray:
        """Shard `shard`'s array of `kind`, memory-mapped read-only."""
        if kind not in self.kinds:
            raise FeatureError(f"feature kind {kind!r} was not opened; this reader holds {', '.join(self.kinds)}")
        return np.load(self.shard_dirs[shard] / f"{kind}.npy", mmap_mode="r", allow_pickle=False)

    def _array(self, shard: int, kind: str) -> np.ndarray:
        """`_open`, kept for the reader's row-by-row access."""
        key = (shard, kind)
        if key not in self._mmaps:
            self._mmaps[key] = self._open(shard, kind)
        return self._mmaps[key]

    def _get(self, kind: str, i: int) -> np.ndarray:
        i = int(i)
        if not 0 <= i < len(self):
            raise IndexError(f"feature row {i} out of range for {len(self)} images")
        shard, row = self._shard_of(i)
        return np.asarray(self._array(shard, kind)[row], dtype=np.float32)

    def row(self, image_id: int) -> int:
        """The row of `image_id` across all shards."""
        try:
            return self._row_of[int(image_id)]
        except KeyError:
            raise FeatureError(f"image id {image_id} is not in the feature shards") from None

    def keys480(self, i: int) -> np.ndarray:
        """Row i's last-block keys at s x s (`Geometry.keys480_side`): (N480, D) float32."""
        return self._get("keys480", i)

    def tokens224(self, i: int) -> np.ndarray:
        """Row i's last-block output at 224 x 224: (N224, D) float32."""
        return self._get("tokens224", i)

    def iter_shards(self, kind: str) -> Iterator[tuple[list[int], np.ndarray]]:
        """Yield (image_ids, memmap (n, N, D) in the stored dtype) per shard, in order.

        Each shard is mapped anew and not kept by the reader: once the caller lets go of it, its pages leave the
        process, so a pass over a data set holds one shard's pages, however many shards it has."""
        for shard, ids in enumerate(self._ids):
            yield list(ids), self._open(shard, kind)


def read_shard_keys(keys_path: str | os.PathLike, ids_path: str | os.PathLike) -> tuple[list[int], np.ndarray]:
    """A shard's image ids and its keys480 as a read-only memory map (n, N480, D) float16 or float32."""
    with open(ids_path, encoding="utf-8") as handle:
        ids = [int(i) for i in json.load(handle)]
    keys = np.load(keys_path, mmap_mode="r")
    if keys.shape[0] != len(ids):
        raise FeatureError(f"{keys_path}: {keys.shape[0]} rows but {len(ids)} ids in {ids_path}")
    return ids, keys
