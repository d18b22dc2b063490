"""Jobs of workflow/rules/decoder.smk: sweep and select on the select data set, decode, merge and score."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("evaluate.jobs.decoder")


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
    features_meta = Path(smk.input.meta)
    dataset_name: str = smk.params.dataset["name"]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    checkpoint: dict = smk.params.checkpoint
    decoder_config: dict = smk.params.decoder
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    config: dict = smk.config
    out_selected, out_table, out_record = Path(smk.output.selected), Path(smk.output.table), Path(smk.output.record)

    import yaml

    from decoders import get_decoder, sweep_settings
    from evaluate.plumbing.atomic import read_json, write_text
    from evaluate.datasets.coco import CocoDataset, manifest_sizes
    from evaluate.ledger.scoring import open_labels, record_identity
    from evaluate.ledger.records import make_record, write_record
    from evaluate.scores.measures import make_measure
    from evaluate.plumbing.provenance import sha256_json
    from evaluate.scores.selection import best_setting, rows_csv, sweep_jaccard, sweep_rows

    started = time.time()
    decoder = get_decoder(decoder_config["name"])
    manifest = read_json(manifest_file)
    dataset = CocoDataset(images, annotations)
    identity = record_identity(config, checkpoint, features_meta, dataset_name, "select")
    n_settings = len(sweep_settings(decoder_config))
    with open_labels(config, dataset, dataset_name, role="select", purpose="select", checkpoint=checkpoint["name"],
                     setting=f"sweep of {n_settings} settings", n_images=len(manifest["image_ids"])) as labels:
        sweep = sweep_jaccard(dataset, sweep_files, manifest_sizes(manifest))
        best = best_setting(sweep, annotations)
        rows = sweep_rows(sweep, decoder=decoder, checkpoint=checkpoint["name"], dataset=dataset_name,
                          resamples=resamples, seed=seed)
        labels.result_sha256 = sha256_json(rows)
    write_text(out_table, rows_csv(rows))
    settings = decoder.Settings.from_name(sweep.settings[best])
    selected = {
        "decoder": decoder.NAME, "name": settings.name, "settings": settings.to_dict(),
        "jaccard": rows[best]["value"], "ci_low": rows[best]["ci_low"], "ci_high": rows[best]["ci_high"],
        "dataset": dataset_name, "checkpoint": checkpoint["name"], "n_images": len(sweep.image_ids),
        "n_left_out": len(sweep.left_out), "n_settings": len(sweep.settings), "opening_row_sha256": labels.row_sha256,
    }
    write_text(out_selected, yaml.safe_dump(selected, sort_keys=False))
    measure = make_measure("jaccard", image_ids=sweep.image_ids, per_image=sweep.table[:, best].tolist(),
                           reducer="mean", n_left_out=len(sweep.left_out), resamples=resamples, seed=seed)
    record = make_record(kind="sweep", setting=settings.name, opening_row_sha256=labels.row_sha256,
                         measures=[measure], started=started, **identity)
    write_record(out_record, record, replace=True)
    log.info("selected %s: Jaccard %.2f [%.2f, %.2f] on %d images", settings.name, rows[best]["value"],
             rows[best]["ci_low"], rows[best]["ci_high"], len(sweep.image_ids))


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
    masks, selected_file = Path(smk.input.masks), Path(smk.input.selected)
    features_meta, manifest = Path(smk.input.meta), Path(smk.input.manifest)
    annotations_file = Path(smk.input.annotations)
    code: str = smk.params.code
    dataset_name: str = smk.params.dataset["name"]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    checkpoint: dict = smk.params.checkpoint
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    config: dict = smk.config
    out_record = Path(smk.output.record)

    import yaml

    from evaluate.plumbing.atomic import read_json
    from evaluate.datasets.coco import CocoDataset
    from evaluate.ledger.scoring import score_eval_set
    from evaluate.scores.measures import decoder_measures
    from evaluate.scores.masks import image_categories

    setting = yaml.safe_load(selected_file.read_text())["name"]
    measures = score_eval_set(
        config, open_dataset=lambda: CocoDataset(images, annotations), dataset_name=dataset_name,
        checkpoint=checkpoint, features_meta=features_meta, kind="decoder", purpose="eval", setting=setting,
        n_images=len(read_json(manifest)["image_ids"]),  # the data set's images, as the manifest lists them
        # the setting enters the reuse key by name: selected.yaml's bytes also hold the selection's opening row,
        # which a re-selection renews even when it selects the same setting
        out_record=out_record, decided_by=[masks, manifest, annotations_file],
        settings={"code": code, "resamples": resamples, "seed": seed},
        score=lambda dataset: (decoder_measures(dataset, read_json(masks), resamples=resamples, seed=seed),
                               {"image_categories": image_categories(dataset)}),
    )
    log.info("%s on %s: Jaccard %.2f, AP %.2f, CorLoc %.2f", checkpoint["name"], dataset_name,
             measures[0]["value"], measures[2]["value"], measures[1]["value"])
