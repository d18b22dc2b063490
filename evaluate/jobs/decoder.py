"""Jobs of workflow/rules/decoder.smk: sweep and select on the select data set, decode, merge and score."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def sweep_decode(smk: Any) -> None:
    """Every setting of the grid on one shard of the reference checkpoint's select keys (label-free)."""
    keys480, image_ids = Path(smk.input.keys480), Path(smk.input.image_ids)
    decoder_config: dict = smk.params.decoder
    out = Path(smk.output[0])

    from decoders import get_decoder, sweep_settings
    from decoders.shards import sweep_keys, write_sweep
    from evaluate.readings.features import read_shard_keys

    ids, keys = read_shard_keys(keys480, image_ids)
    shard = sweep_keys(get_decoder(decoder_config["name"]), sweep_settings(decoder_config), ids, keys)
    write_sweep(out, shard)


def select_setting(smk: Any) -> None:
    """Open the select data set's labels once, score every setting, keep the best by mean Jaccard."""
    sweep_files = [str(p) for p in smk.input.sweep]
    manifest_file = Path(smk.input.manifest)
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    decoder_config: dict = smk.params.decoder
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    code: str = smk.params.code
    out_selected, out_table, out_record = Path(smk.output.selected), Path(smk.output.table), Path(smk.output.record)

    from evaluate.ledger.scoring import Scoring
    from evaluate.decoding.selection import select_setting as select

    scoring = Scoring.of(smk.params.checkpoint, smk.params.dataset["name"], smk.input.meta, smk.params.run_time)
    select(scoring, decoder=decoder_config, sweep_files=sweep_files, manifest_file=manifest_file, images=images,
           annotations=annotations, resamples=resamples, seed=seed, code=code, out_selected=out_selected,
           out_table=out_table, out_record=out_record)


def decode(smk: Any) -> None:
    """The selected setting on one shard: COCO results (RLE at each image's own size), label-free."""
    keys480, image_ids = Path(smk.input.keys480), Path(smk.input.image_ids)
    manifest_file, selected = Path(smk.input.manifest), str(smk.input.selected)
    out = Path(smk.output[0])

    from decoders import load_selected
    from decoders.shards import decode_keys
    from evaluate.plumbing.atomic import read_json, write_json
    from evaluate.datasets.coco import manifest_sizes
    from evaluate.readings.features import read_shard_keys

    decoder, settings = load_selected(selected)
    ids, keys = read_shard_keys(keys480, image_ids)
    write_json(out, decode_keys(decoder, settings, ids, keys, manifest_sizes(read_json(manifest_file))))


def merge_masks(smk: Any) -> None:
    """One COCO results file per checkpoint and data set, in image-id order (the shards are in that order)."""
    shards = [Path(p) for p in smk.input]
    out = Path(smk.output[0])

    from evaluate.plumbing.atomic import read_json, write_json

    write_json(out, [result for path in shards for result in read_json(path)])


def score_decoder(smk: Any) -> None:
    """Open an eval data set's labels once: Jaccard, CorLoc (with intervals), mask AP, AP50, AR@10."""
    masks, selected_file, manifest_file = Path(smk.input.masks), Path(smk.input.selected), Path(smk.input.manifest)
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    code: str = smk.params.code
    out_record = Path(smk.output.record)

    from evaluate.ledger.scoring import Scoring
    from evaluate.decoding.scoring import score_decoder as score

    scoring = Scoring.of(smk.params.checkpoint, smk.params.dataset["name"], smk.input.meta, smk.params.run_time)
    score(scoring, masks_file=masks, selected_file=selected_file, manifest_file=manifest_file, images=images,
          annotations=annotations, resamples=resamples, seed=seed, code=code, out_record=out_record)
