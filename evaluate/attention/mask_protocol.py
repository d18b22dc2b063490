"""DINO's class-token attention masks in the workflow (docs/design.md §17; DESIGN 15): the entries of the two jobs of
workflow/rules/segmentation.smk.

- `read_shard` (job `read_cls_attention`): one checkpoint on one shard of a segmentation set through the one runner
  (`evaluate.readings.cls_attention.write_cls_attention`: the released form, float32): an .npz of each image's
  (heads, gh, gw) class-token attention and the runner's meta beside it, whose `absent` names why a network has no
  such reading (a SelfPatch backbone, XCiT), never an error.
- `score_masks` (job `score_attention_masks`): the shards of a checkpoint on a set -> one ledger record (kind
  `attention_masks`, setting `mass=0.6`): the labels opened once, on the record (`evaluate.ledger.scoring`), scored
  by `evaluate.attention.masks.score_set`; for a network without the reading a record without measures, whose
  `absent` gives the reason and the measures it lacks (the tables show a dash), and no opening at all.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Sequence

log = logging.getLogger("evaluate.attention.mask_protocol")
DECODER = "attention-mass"  # what its records name as the decoder of cls-attention: visualize_attention's 60% rule


def read_shard(*, checkpoint: dict, checkpoint_file: str | os.PathLike, spec: dict, manifest_file: str | os.PathLike,
               shard: str, out: str | os.PathLike, out_meta: str | os.PathLike, features: dict) -> dict:
    """The class-token attention of one checkpoint on one shard (module docstring); returns the meta."""
    from evaluate.readings.cls_attention import CLS_ATTENTION, write_cls_attention
    from evaluate.readings.runner import run_reading

    return run_reading(CLS_ATTENTION, lambda run: write_cls_attention(run, out), checkpoint=checkpoint,
                       checkpoint_file=checkpoint_file, spec=spec, manifest_file=manifest_file, shard=shard,
                       meta_out=out_meta, features=features)


def score_masks(scoring: Any, *, spec: dict, manifest_file: str | os.PathLike,
                reading_files: Sequence[str | os.PathLike], meta_files: Sequence[str | os.PathLike], resamples: int,
                seed: int, code: str, out_record: str | os.PathLike) -> dict:
    """The attention-mask measures of one checkpoint on one segmentation set: opens the labels once (or reuses the
    record of the same readings, labels, code and bootstrap), writes the record and returns it; without the reading
    (`absent` in the shards' meta) a record of no measures that opens nothing."""
    from evaluate.attention.masks import HEADS_MEASURE, KIND, MEASURE, SETTING, score_set
    from evaluate.datasets import open_dataset
    from evaluate.datasets.manifest import check_listed
    from evaluate.ledger.scoring import Scored, score_on_record
    from evaluate.plumbing.atomic import read_json
    from evaluate.readings.cls_attention import CLS_ATTENTION, ShardAttention

    manifest = read_json(manifest_file)
    meta = read_json(meta_files[0])  # the shards of one checkpoint's reading say the same of the network
    absent = meta.get("absent")
    if absent:
        return _absent_record(scoring, reason=absent, measures=[MEASURE, HEADS_MEASURE], out_record=out_record)
    shards = [ShardAttention(path) for path in reading_files]
    patch = int(meta["patch"])
    ids = [i for s in shards for i in s.image_ids]

    def readings():
        for shard in shards:
            for k, image_id in enumerate(shard.image_ids):
                yield image_id, patch, shard.attention(k)

    def score(dataset: Any) -> Scored:
        measures, fields = score_set(check_listed(dataset, manifest, manifest_file), readings(),
                                     sealed=scoring.sealed, resamples=resamples, seed=seed)
        return Scored(measures=measures, fields={"benchmark": spec.get("benchmark"), **fields})

    record, _ = score_on_record(
        scoring, kind=KIND, role="eval", purpose="eval", setting=SETTING, reading=CLS_ATTENTION.name,
        decoder=DECODER, n_images=len(ids), out_record=out_record, decided_by=[manifest_file, *reading_files],
        settings={"code": code, "resamples": resamples, "seed": seed}, open_dataset=lambda: open_dataset(spec),
        score=score,
    )
    values = {m["measure"]: m["value"] for m in record["measures"]}
    log.info("%s on %s: attention-mask Jaccard %.2f (best head), %.2f (mean of heads), %d images", scoring.checkpoint,
             scoring.dataset, values[MEASURE], values[HEADS_MEASURE], len(ids))
    return record


def _absent_record(scoring: Any, *, reason: str, measures: list[str], out_record: str | os.PathLike) -> dict:
    """The record of a network without the reading: no measure, no opening, the reason and what it lacks."""
    from evaluate.attention.masks import KIND, SETTING
    from evaluate.ledger.records import make_record, write_record
    from evaluate.ledger.scoring import record_identity
    from evaluate.readings.cls_attention import CLS_ATTENTION

    started = time.time()
    record = make_record(kind=KIND, setting=SETTING, reading=CLS_ATTENTION.name, decoder=DECODER,
                         opening_row_sha256=None, measures=[], started=started,
                         **record_identity(scoring, "eval"))
    record = {**record, "absent": {"reason": reason, "measures": measures}}
    write_record(out_record, record, replace=True)
    log.info("%s on %s: %s; no attention masks, no label opened", scoring.checkpoint, scoring.dataset, reason)
    return record

