"""The attention reading in the workflow (docs/design.md §13): the entries of its three jobs.

- `read_attention_shard` (job `attention_shard`): one checkpoint on one shard through the one runner
  (`evaluate.readings.attention_spread.write_spread`): an .npz of `image_ids` (n,) int64, `entropy` and `spread`
  (n, blocks, heads) float32, and beside it the runner's meta (`<shard>.json`: the checkpoint's sha256 and
  architecture fields, and `patch_attention`). For a network without patch attention (XCiT) the .npz holds the ids
  only and the meta says so: the reading is absent, not an error.
- `write_attention_record` (job `attention_record`): the shards of a checkpoint on a data set -> one label-free
  ledger record of kind `attention` (no opening: `opening_row_sha256` null), measures `attention_spread` and
  `attention_entropy` (`summary.spread_summary`), the (blocks x heads) tables in `attention_tables`; for XCiT no
  measures, `attention_tables` null and `absent`: the reason and the measures it lacks.
- `write_attention_rows` (job `attention_rows`): one image's attention rows of one query patch in the last block,
  per head, for the per-patch figure, through the runner too.

A job of its own, not inside extract: adding the reading to a finished run re-runs no extraction, and the reading
runs the network at 224 px only.
"""

from __future__ import annotations

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


def meta_of(shard_file: str | os.PathLike) -> Path:
    """The runner's meta beside a shard's .npz (or the rows' .npz): the same name with .json."""
    return Path(shard_file).with_suffix(".json")


def read_attention_shard(*, checkpoint: dict, checkpoint_file: str | os.PathLike, spec: dict,
                         manifest_file: str | os.PathLike, shard: str, inputs_record: str | os.PathLike,
                         out: str | os.PathLike, features: dict, workers: int) -> dict:
    """The per-image reading of one checkpoint on one shard into `out` and its meta (module docstring); returns the
    meta. features: the config's `features` (batch_size, device); the network runs in float32, in the backbone form
    (`ATTENTION`); workers: processes decoding the images where the shard's decoded inputs are gone."""
    from evaluate.readings.attention_spread import ATTENTION, write_spread
    from evaluate.readings.runner import run_reading

    folder = Path(inputs_record).with_suffix("")
    return run_reading(ATTENTION, lambda run: write_spread(run, out, inputs_folder=folder, workers=workers),
                       checkpoint=checkpoint, checkpoint_file=checkpoint_file, spec=spec, manifest_file=manifest_file,
                       shard=shard, meta_out=meta_of(out), features=features)


def read_shards(shard_files: Sequence[str | os.PathLike]) -> tuple[dict, list[int], np.ndarray | None,
                                                                   np.ndarray | None]:
    """(identity, image ids, entropy, spread) of a checkpoint's shards, in shard order: identity, the checkpoint's
    sha256, its architecture fields and `patch_attention`, from the metas beside them (`meta_of`); entropy and spread
    are (n, blocks, heads) float32, or None where the network has no patch attention. AttentionError naming the file
    when a shard is unreadable or the shards disagree on the checkpoint."""
    from evaluate.plumbing.atomic import read_json

    identity: dict | None = None
    ids: list[int] = []
    entropy: list[np.ndarray] = []
    spread: list[np.ndarray] = []
    for path in shard_files:
        try:
            meta = read_json(meta_of(path))
            shard_identity = {key: meta.get(key) for key in ("checkpoint_sha256", *IDENTITY_FIELDS,
                                                             "patch_attention")}
            with np.load(path, allow_pickle=False) as f:
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
    from evaluate.readings.attention_spread import ATTENTION

    started = time.time()
    identity, image_ids, entropy, spread = read_shards(shard_files)
    if entropy is None:
        from evaluate.attention.summary import ENTROPY, SPREAD
        from evaluate.readings.attention_spread import ABSENT

        measures, tables, fields = [], None, {"absent": {"reason": ABSENT, "measures": [SPREAD, ENTROPY]}}
    else:
        measures, tables = spread_summary(image_ids, entropy, spread, resamples=resamples, seed=seed,
                                          where=f"{checkpoint} on {dataset}")
        fields = {}
    record = make_record(
        kind=KIND, checkpoint=checkpoint, run=run, epoch=epoch, checkpoint_sha256=identity["checkpoint_sha256"],
        **{key: identity.get(key) for key in IDENTITY_FIELDS}, precision=REFERENCE_PRECISION, dataset=dataset,
        role="eval", setting=SETTING, reading=ATTENTION.name, decoder=None, config_hash=config_hash,
        opening_row_sha256=None, measures=measures,
        started=started)
    record = {**record, "attention_tables": tables, **fields}
    write_record(out_record, record, replace=True)
    if measures:
        log.info("%s on %s: attention spread %.2f%% of the patches, entropy %.3f nats (block %d, mean of %d heads)",
                 checkpoint, dataset, measures[0]["value"], measures[1]["value"], tables["blocks"], tables["heads"])
    return record


def write_attention_rows(*, checkpoint: dict, checkpoint_file: str | os.PathLike, spec: dict,
                         manifest_file: str | os.PathLike, image_id: int | None, patch: int | None,
                         out: str | os.PathLike, features: dict) -> Path:
    """One image's last-block attention rows of one query patch, per head, into `out` through the one runner
    (`evaluate.readings.attention_spread.write_rows`), its meta beside it.

    image_id: None takes the data set's first image; patch: the query's index in the network's g x g grid at 224 px
    (g = 224 / p), row by row (config `figures.attention_patch`); None, its default, the centre patch of that grid
    (105 for p 16, 406 for p 8, 136 for p 14). An index outside the network's grid is a ConfigError.
    """
    from evaluate import ConfigError
    from evaluate.plumbing.atomic import read_json
    from evaluate.readings.attention_spread import ATTENTION, QueryPatchError, write_rows
    from evaluate.readings.runner import run_reading

    manifest = read_json(manifest_file)
    wanted = manifest["image_ids"][0] if image_id is None else int(image_id)
    if wanted not in manifest["image_ids"]:
        raise ConfigError(f"figures.attention_image: image id {wanted} is not in data set {manifest_file}")
    try:
        run_reading(ATTENTION, lambda run: write_rows(run, out, patch=patch), checkpoint=checkpoint,
                    checkpoint_file=checkpoint_file, spec=spec, manifest_file=manifest_file, shard="rows",
                    meta_out=meta_of(out), features=features, units=[wanted])
    except QueryPatchError as exc:
        raise ConfigError(f"figures.attention_patch: {exc} for {checkpoint_file}; leave it unset "
                          "(null) for each network's centre patch") from None
    return Path(out)
