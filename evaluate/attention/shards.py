"""The attention reading in the workflow (docs/design.md §13): the entries of its two jobs, and the per-patch rows.

- `read_attention_shard` (job `attention_shard`): one checkpoint on one shard, from the shard's decoded 224-px
  inputs (the preprocess job's folder; decoded here, to the same bytes, where `features.keep: false` dropped it),
  into one .npz: `image_ids` (n,) int64, `entropy` and `spread` (n, blocks, heads) float32, and `identity`, the
  checkpoint's sha256 and architecture fields as JSON. For a network without patch attention (XCiT) the .npz holds
  the identity and the ids only, and says so (`patch_attention` False): the reading is absent, not an error.
- `write_attention_record` (job `attention_record`): the shards of a checkpoint on a data set -> one label-free
  ledger record of kind `attention` (no opening: `opening_row_sha256` null), measures `attention_spread` and
  `attention_entropy` (`summary.spread_summary`), the (blocks x heads) tables in `attention_tables`; for XCiT no
  measures, `attention_tables` null and `attention_absent`, the reason.
- `write_attention_rows` (job `attention_rows`): one image's attention rows of one query patch in the last block,
  per head, for the per-patch figure.

A job of its own, not inside extract: adding the reading to a finished run re-runs no extraction, and the reading
runs the network at 224 px only.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from evaluate.attention import AttentionError
from evaluate.networks import IDENTITY_FIELDS

log = logging.getLogger("evaluate.attention.shards")

KIND = "attention"  # the ledger kind of the reading's records
SETTING = "224 px, softmax(q k^T / sqrt(d)) over the patches"  # the records' setting: what the rows are
ABSENT = ("the network's attention runs across channels, not patches (XCiT): there are no attention rows over "
          "patches to measure")


def read_attention_shard(*, checkpoint_file: str | os.PathLike, which: str, position_rule: str | None = None,
                         images: str, annotations: str,
                         manifest_file: str | os.PathLike, shard: str, inputs_record: str | os.PathLike,
                         out: str | os.PathLike, batch_size: int, device: str, workers: int) -> Path:
    """The per-image reading of one checkpoint on one shard into `out` (returned); see the module docstring.

    checkpoint_file, which: the checkpoint and its network (`teacher`/`student`); images, annotations: the data set;
    batch_size, device (`auto`: CUDA where present): the config's `features`. The network runs in float32 (the
    reading is float32 whatever `features.precision` says: docs/design.md §13). The job's torch threads
    (`features.threads`) are set by the job runner.
    """
    import torch

    from evaluate.readings.attention_spread import gives_attention_spread, tokens_and_spread
    from evaluate.datasets.coco import CocoDataset
    from evaluate.networks.checkpoints import load_backbone
    from evaluate.plumbing.atomic import atomic_path, read_json
    from evaluate.readings.features import resolve_device, shard_image_ids
    from evaluate.pixels.images import normalise_pixels
    from evaluate.readings.inputs import open_shard_inputs

    manifest = read_json(manifest_file)
    image_ids = shard_image_ids(manifest, shard, manifest_file)
    loaded = load_backbone(checkpoint_file, which=which, position_rule=position_rule)
    identity = {key: value for key, value in loaded.file_meta().items()
                if key == "checkpoint_sha256" or key in IDENTITY_FIELDS}
    arrays: dict[str, np.ndarray] = {"image_ids": np.asarray(image_ids, np.int64)}
    if gives_attention_spread(loaded.model):
        device = resolve_device(device)
        model = loaded.model.to(device).eval()
        inputs = open_shard_inputs(Path(inputs_record).with_suffix(""), image_ids,
                                   annotations_sha256=manifest["annotations_sha256"],
                                   open_dataset=lambda: CocoDataset(images, annotations), workers=workers)
        entropy, spread, done = [], [], 0
        with torch.inference_mode():
            for ids, _, pixels224 in inputs.batches(batch_size):
                _, reading = tokens_and_spread(model, normalise_pixels(pixels224).to(device))
                entropy.append(reading.entropy.cpu().numpy())
                spread.append(reading.spread.cpu().numpy())
                done += len(ids)
                log.info("attention of %d / %d images", done, len(image_ids))
        arrays["entropy"] = np.concatenate(entropy).astype(np.float32)
        arrays["spread"] = np.concatenate(spread).astype(np.float32)
    else:
        log.info("%s: %s", checkpoint_file, ABSENT)
    identity["patch_attention"] = "entropy" in arrays
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, identity=np.asarray(json.dumps(identity, sort_keys=True)), **arrays)
    return Path(out)


def read_shards(shard_files: Sequence[str | os.PathLike]) -> tuple[dict, list[int], np.ndarray | None,
                                                                   np.ndarray | None]:
    """(identity, image ids, entropy, spread) of a checkpoint's shards, in shard order; entropy and spread are
    (n, blocks, heads) float32, or None where the network has no patch attention. AttentionError naming the file
    when a shard is unreadable or the shards disagree on the checkpoint."""
    identity: dict | None = None
    ids: list[int] = []
    entropy: list[np.ndarray] = []
    spread: list[np.ndarray] = []
    for path in shard_files:
        try:
            with np.load(path, allow_pickle=False) as f:
                shard_identity = json.loads(str(f["identity"]))
                ids += [int(i) for i in f["image_ids"]]
                if shard_identity["patch_attention"]:
                    entropy.append(f["entropy"])
                    spread.append(f["spread"])
        except (OSError, KeyError, ValueError) as exc:
            raise AttentionError(f"{path}: not a readable attention shard ({exc}); delete it and re-run") from None
        if identity is not None and shard_identity != identity:
            raise AttentionError(f"{path}: read from another checkpoint file than {shard_files[0]} "
                                 f"({shard_identity} vs {identity}); delete the shards and re-run")
        identity = shard_identity
    if identity is None:
        raise AttentionError("attention record: no shard given")
    if not identity["patch_attention"]:
        return identity, ids, None, None
    return identity, ids, np.concatenate(entropy), np.concatenate(spread)


def write_attention_record(*, checkpoint: str, run: str | None, epoch: int | None, dataset: str,
                           shard_files: Sequence[str | os.PathLike], resamples: int, seed: int, config_hash: str,
                           out_record: str | os.PathLike) -> dict:
    """The label-free `attention` record of a checkpoint on a data set, from its shards (module docstring); returns
    it. resamples, seed: the config's `bootstrap`; config_hash: the run's (`RunTime`)."""
    from evaluate.attention.summary import spread_summary
    from evaluate.ledger.records import make_record, write_record
    from evaluate.networks import REFERENCE_PRECISION

    started = time.time()
    identity, image_ids, entropy, spread = read_shards(shard_files)
    if entropy is None:
        measures, tables, fields = [], None, {"attention_absent": ABSENT}
    else:
        measures, tables = spread_summary(image_ids, entropy, spread, resamples=resamples, seed=seed,
                                          where=f"{checkpoint} on {dataset}")
        fields = {}
    record = make_record(
        kind=KIND, checkpoint=checkpoint, run=run, epoch=epoch, checkpoint_sha256=identity["checkpoint_sha256"],
        **{key: identity.get(key) for key in IDENTITY_FIELDS}, precision=REFERENCE_PRECISION, dataset=dataset,
        role="eval", setting=SETTING, config_hash=config_hash, opening_row_sha256=None, measures=measures,
        started=started)
    record = {**record, "attention_tables": tables, **fields}
    write_record(out_record, record, replace=True)
    if measures:
        log.info("%s on %s: attention spread %.2f%% of the patches, entropy %.3f nats (block %d, mean of %d heads)",
                 checkpoint, dataset, measures[0]["value"], measures[1]["value"], tables["blocks"], tables["heads"])
    return record


def write_attention_rows(*, checkpoint_file: str | os.PathLike, which: str, position_rule: str | None = None,
                         images: str, annotations: str,
                         manifest_file: str | os.PathLike, image_id: int | None, patch: int | None,
                         out: str | os.PathLike) -> Path:
    """One image's last-block attention rows of one query patch, per head, into `out` (.npz: `image_id`, `patch`
    (the index used), `rows` (heads, N) float32 summing to 1 per head, `pixels224` (224, 224, 3) uint8; no `rows`
    for XCiT).

    image_id: None takes the data set's first image; patch: the query's index in the network's g x g grid at 224 px
    (g = 224 / p), row by row (config `figures.attention_patch`); None, its default, the centre patch of that grid
    (105 for p 16, 406 for p 8, 136 for p 14). An index outside the network's grid is a ConfigError.
    """
    from evaluate import ConfigError
    from evaluate.readings.attention_spread import attention_rows, gives_attention_spread, query_patch
    from evaluate.datasets.coco import CocoDataset
    from evaluate.networks.checkpoints import load_backbone
    from evaluate.plumbing.atomic import atomic_path, read_json
    from evaluate.pixels.images import normalise_pixels
    from evaluate.readings.inputs import decode_pixels

    manifest = read_json(manifest_file)
    wanted = manifest["image_ids"][0] if image_id is None else int(image_id)
    if wanted not in manifest["image_ids"]:
        raise ConfigError(f"config.yaml: image id {wanted} is not in data set {manifest_file}")
    _, pixels224 = decode_pixels(CocoDataset(images, annotations), wanted)
    loaded = load_backbone(checkpoint_file, which=which, position_rule=position_rule)
    arrays = {"image_id": np.int64(wanted), "patch": np.int64(-1 if patch is None else patch), "pixels224": pixels224}
    if gives_attention_spread(loaded.model):
        try:
            rows = attention_rows(loaded.model.eval(), normalise_pixels(pixels224[None]), patch)
        except AttentionError as exc:
            raise ConfigError(f"config.yaml: figures.attention_patch: {exc} for {checkpoint_file}; leave it unset "
                              "(null) for each network's centre patch") from None
        arrays["rows"] = rows[0].numpy().astype(np.float32)
        arrays["patch"] = np.int64(query_patch(patch, rows.shape[-1], pixels224.shape[:2]))
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)
    return Path(out)

