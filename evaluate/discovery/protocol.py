"""The object-discovery stage's entries (docs/design.md §15): extraction, boxes, scoring.

Files: keys-native shards under `results/features/{checkpoint}/{dataset}/{shard}/` (`evaluate.readings.native`,
read through the one runner); the boxes of a shard `results/discovery/{checkpoint}/{dataset}/{shard}.json`:
    {"image_ids": [n], "sizes": [[H, W]], "patch": p, "decoders": {name: {"setting": str, "boxes": [[x0, y0, x1, y1]
     or null per image], "stats": {...}}}}
and one ledger record per checkpoint, data set and box decoder (kind = the decoder's name, measure `corloc_box`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Sequence

log = logging.getLogger("evaluate.discovery.protocol")


def extract(*, checkpoint: dict, checkpoint_file: str | os.PathLike, spec: dict, manifest_file: str | os.PathLike,
            shard: str, out_dir: str | os.PathLike, features: dict) -> dict:
    """keys-native of one checkpoint on one shard (the network in its released form, as the reading says), through
    the one runner; returns the shard's meta."""
    from evaluate.readings.native import KEYS_NATIVE, META, write_native
    from evaluate.readings.runner import run_reading

    def body(run) -> dict:
        return write_native(run.model, run.dataset.open_image, run.units, out_dir, dtype=str(features["dtype"]),
                            device=run.device, precision=run.precision)

    return run_reading(KEYS_NATIVE, body, checkpoint=checkpoint, checkpoint_file=checkpoint_file, spec=spec,
                       manifest_file=manifest_file, shard=shard, meta_out=Path(out_dir) / META, features=features)


def decode_boxes(*, shard_dir: str | os.PathLike, out: str | os.PathLike) -> dict:
    """Every box decoder of the registry (reads keys-native, gives boxes) on one keys-native shard -> `out`."""
    from decoders import decoders_that, get_decoder
    from decoders.boxes import box_of
    from evaluate.plumbing.atomic import write_json
    from evaluate.readings.native import NativeKeys

    shard = NativeKeys(shard_dir)
    result: dict[str, Any] = {"image_ids": shard.image_ids, "sizes": [list(s) for s in shard.sizes],
                              "patch": shard.patch, "decoders": {}}
    for name in decoders_that(reads="keys-native", gives="boxes"):
        decoder = get_decoder(name)
        (settings,) = decoder.settings_grid({})
        stats = decoder.Stats()
        boxes = []
        for i, (grid, (height, width)) in enumerate(zip(shard.grids, shard.sizes)):
            masks = decoder.decode(shard.keys(i), settings, grid, stats=stats)
            box = box_of(masks[0].mask, shard.patch, height, width) if masks else None
            boxes.append(None if box is None else list(box))
        result["decoders"][name] = {"setting": settings.name, "boxes": boxes, "stats": stats.as_dict()}
        log.info("%s on %s: %d images, %s", name, shard_dir, len(boxes), stats.as_dict())
    write_json(out, result)
    return result


def score_discovery(scoring: Any, *, spec: dict, decoder: str, manifest_file: str | os.PathLike,
                    boxes_files: Sequence[str | os.PathLike], resamples: int, seed: int, code: str,
                    out_record: str | os.PathLike) -> dict:
    """CorLoc on boxes of one box decoder for one checkpoint on one data set: opens the data set's labels once
    (or reuses the record of the same inputs), writes the record (kind = the decoder's name) and returns it."""
    from evaluate.datasets import open_dataset
    from evaluate.ledger.scoring import Scored, score_on_record
    from evaluate.plumbing.atomic import read_json
    from evaluate.readings.native import KEYS_NATIVE
    from evaluate.scores.boxes import MEASURE, box_hit
    from evaluate.scores.measures import make_measure

    shards = [read_json(path) for path in boxes_files]
    ids = [int(i) for s in shards for i in s["image_ids"]]
    preds = [b for s in shards for b in s["decoders"][decoder]["boxes"]]
    setting = shards[0]["decoders"][decoder]["setting"]

    def score(dataset) -> Scored:
        truths = dataset.boxes()
        hits = [float(box_hit(p, truths.get(i, []))) for i, p in zip(ids, preds)]
        measure = make_measure(MEASURE, image_ids=ids, per_image=hits, reducer="mean", resamples=resamples,
                               seed=seed)
        fields = {"decoder": decoder, "benchmark": spec.get("benchmark"),
                  "boxes": {str(i): p for i, p in zip(ids, preds)},
                  "image_files": {str(i): str(dataset.image_path(i)) for i in ids},
                  "images_without_box": sum(1 for i in ids if not truths.get(i))}
        if not scoring.sealed:  # the figures draw the truth of an unsealed set only
            fields["truths"] = {str(i): [list(b) for b in truths.get(i, [])] for i in ids}
        return Scored(measures=[measure], fields=fields)

    record, _ = score_on_record(
        scoring, kind=decoder, role="eval", purpose="eval", setting=setting, reading=KEYS_NATIVE.name,
        decoder=decoder, n_images=len(ids),
        out_record=out_record, decided_by=[manifest_file, *boxes_files],
        settings={"code": code, "resamples": resamples, "seed": seed, "decoder": decoder, "setting": setting},
        open_dataset=lambda: open_dataset(spec), score=score,
    )
    value = record["measures"][0]["value"]
    log.info("%s on %s, %s: CorLoc %.2f (%d images)", scoring.checkpoint, scoring.dataset, decoder, value, len(ids))
    return record
