"""The workflow's jobs, one function per rule, each taking Snakemake's `snakemake` object.

Each `*_job(smk)` only unpacks the rule's input, output, params and wildcards and calls the package's tested
functions; nothing here decides a number. The rule files in `workflow/rules/` say which job runs when.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("evaluate.pipeline")


# ----------------------------------------------------------------------------------------------- shared helpers


def resolve_device(device: str) -> str:
    """`auto` -> "cuda" when a CUDA device is present, else "cpu"; anything else as given (checked)."""
    import torch

    from evaluate.experiment import ConfigError

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"config.yaml: features.device is {device!r} but no CUDA device is available here")
    return device


def open_dataset(params: dict):
    """The `CocoDataset` named by a rule's `dataset` params (images folder + annotation JSON)."""
    from evaluate.datasets import CocoDataset

    return CocoDataset(params["images"], params["annotations"])


def read_json(path: str | Path) -> Any:
    with open(path) as handle:
        return json.load(handle)


def manifest_sizes(manifest: dict) -> dict[int, tuple[int, int]]:
    """image id -> (height, width) from a manifest."""
    return {int(i): (int(h), int(w)) for i, (h, w) in zip(manifest["image_ids"], manifest["sizes"])}


def open_labels(smk, record_path: str, dataset, dataset_name: str, *, role: str, purpose: str, checkpoint: str,
                setting: str, n_images: int):
    """`evaluate.ledger.opening` for a data set of this run: its ledger beside `record_path`, its seal and budget
    from the run's config (read at run time, so raising a budget is recorded, not a reason to re-run jobs)."""
    from evaluate.ledger import opening

    entry = smk.config["datasets"][dataset_name]
    return opening(
        ledger_dir_of(record_path), dataset=dataset_name, role=role, purpose=purpose, checkpoint=checkpoint,
        setting=setting, n_images=n_images, annotations_sha256=dataset.annotations_sha256,
        sealed=bool(entry.get("sealed", False)), budget=entry.get("budget"),
    )


def bootstrap_params(params: dict) -> dict:
    b = params or {}
    return {"resamples": int(b.get("resamples", 10000)), "seed": int(b.get("seed", 0))}


# -------------------------------------------------------------------------------------------------------- demo


def demo_dataset_job(smk) -> None:
    from evaluate.demo import make_demo_dataset

    demo = smk.params.demo
    out = Path(smk.output.annotations).parent
    make_demo_dataset(out, n_images=int(demo["n_images"]), seed=int(demo["seed"]),
                      first_image_id=int(demo.get("first_image_id", 1)))


def demo_checkpoint_job(smk) -> None:
    from evaluate.demo import DEFAULT_ARCHITECTURE, make_demo_checkpoint

    demo = smk.params.demo
    make_demo_checkpoint(smk.output[0], fmt=demo["format"], seed=int(demo["seed"]),
                         architecture=demo.get("architecture", DEFAULT_ARCHITECTURE))


# ---------------------------------------------------------------------------------------------------- features


def manifest_job(smk) -> None:
    """Validate a data set (annotations and image files) and write its manifest: sorted ids cut into shards."""
    from evaluate.atomic import write_json

    dataset = open_dataset(smk.params.dataset)
    roles = smk.config["datasets"][smk.params.dataset["name"]].get("roles") or []
    if roles and not dataset.has_labels:
        from evaluate.datasets import DatasetError

        raise DatasetError(
            f"{smk.params.dataset['annotations']}: holds no annotations, but data set "
            f"{smk.params.dataset['name']!r} has role(s) {', '.join(roles)}, which score against labels"
        )
    dataset.validate_files()
    manifest = dataset.manifest(int(smk.params.shard_size))
    manifest["dataset"] = smk.params.dataset["name"]
    write_json(smk.output.manifest, manifest)
    log.info("%s: %d images in %d shards", smk.params.dataset["name"], len(manifest["image_ids"]),
             len(manifest["shards"]))


def extract_job(smk) -> None:
    """keys480 and tokens224 of one shard (DESIGN §3)."""
    from evaluate.checkpoints import load_backbone
    from evaluate.features import extract_shard

    manifest = read_json(smk.input.manifest)
    shard = int(smk.wildcards.shard)
    if shard >= len(manifest["shards"]):
        from evaluate.features import FeatureError

        raise FeatureError(f"{smk.input.manifest}: shard {shard:03d} does not exist (the manifest has "
                           f"{len(manifest['shards'])} shards); re-run the workflow so the shard list is re-read")
    image_ids = manifest["shards"][shard]
    which = smk.params.which
    loaded = load_backbone(smk.input.checkpoint, which=which)
    dataset = open_dataset(smk.params.dataset)
    device = resolve_device(smk.params.device)
    meta = {
        "checkpoint": smk.wildcards.checkpoint,
        "checkpoint_path": str(smk.input.checkpoint),
        "checkpoint_sha256": loaded.sha256,
        "checkpoint_format": loaded.format,
        **loaded.architecture_meta(),  # architecture, architecture_variant, head_layout (DESIGN §9)
        "which": which,
        "dataset": smk.params.dataset["name"],
        "manifest_sha256": manifest["manifest_sha256"],
        "shard": smk.wildcards.shard,
        "device": device,
        "autocast": bool(smk.params.autocast) and device.startswith("cuda"),
    }
    extract_shard(
        loaded.model, dataset, image_ids, Path(smk.output.meta).parent,
        batch_size=int(smk.params.batch_size), dtype=smk.params.dtype, device=device, threads=int(smk.threads),
        meta=meta, autocast=meta["autocast"],
    )


# ------------------------------------------------------------------------------------------------------ ledger


def ledger_dir_of(record_path: str | Path) -> Path:
    """results/ledger from a record path results/ledger/records/{kind}/{checkpoint}/{dataset}.json."""
    return Path(record_path).parents[3]


def scores_job(smk) -> None:
    """scores.csv and scores.parquet rebuilt from every record (never edited by hand)."""
    from evaluate.ledger import rebuild_scores

    ledger = Path(smk.output.csv).parent
    rebuild_scores(ledger / "records", smk.output.csv, smk.output.parquet)


def tables_job(smk) -> None:
    from evaluate.tables import build_tables

    ledger = Path(smk.input.scores).parent
    sweep = smk.input.sweep if smk.input.get("sweep") else None
    files = build_tables(ledger, smk.output[0], smk.params.compare_to, sweep_csv=sweep,
                         bootstrap=bootstrap_params(smk.params.bootstrap))
    log.info("wrote %d table files", len(files))


def merge_masks_job(smk) -> None:
    """Concatenate shard COCO results files into one, in image-id order (shards are already in that order)."""
    from evaluate.atomic import write_json

    results = [r for path in smk.input for r in read_json(path)]
    write_json(smk.output[0], results)


# ----------------------------------------------------------------------------------------------- scoring jobs


def _record_common(smk, dataset_params: dict, role: str) -> dict:
    """The record fields every scoring job shares: checkpoint identity, data set, role, config hash."""
    from evaluate.provenance import config_hash, sha256_file

    ckpt = smk.params.checkpoint
    return {
        "checkpoint": ckpt["name"],
        "run": ckpt["run"],
        "epoch": ckpt["epoch"],
        "checkpoint_sha256": sha256_file(smk.input.checkpoint),
        "dataset": dataset_params["name"],
        "role": role,
        "config_hash": config_hash(smk.config),
    }


def score_decoder_job(smk) -> None:
    """Open an eval data set's labels once: Jaccard, CorLoc (with intervals), mask AP, AP50, AR@10."""
    import yaml

    from evaluate.ledger import make_measure, make_record, write_record
    from evaluate.provenance import sha256_json
    from evaluate.scores import coco_mask_ap, corloc_hits, jaccard_per_image

    started = time.time()
    params = smk.params.dataset
    selected = yaml.safe_load(Path(smk.input.selected).read_text())
    setting = selected["name"]
    results = read_json(smk.input.masks)
    boot = bootstrap_params(smk.params.bootstrap)
    common = _record_common(smk, params, "eval")
    dataset = open_dataset(params)
    with open_labels(smk, smk.output.record, dataset, params["name"], role="eval", purpose="eval",
                     checkpoint=common["checkpoint"], setting=setting, n_images=len(dataset.image_ids)) as labels:
        jac = jaccard_per_image(dataset, results)
        cor = corloc_hits(dataset, results)
        ap = coco_mask_ap(dataset.coco, results)
        measures = [
            make_measure("jaccard", image_ids=jac.image_ids, per_image=jac.values.tolist(), reducer="mean",
                         n_left_out=jac.n_left_out, **boot),
            make_measure("corloc", image_ids=cor.image_ids, per_image=cor.values.tolist(), reducer="mean",
                         n_left_out=cor.n_left_out, **boot),
        ]
        for name in ("ap", "ap50", "ar10"):
            measures.append(make_measure(name, image_ids=list(dataset.image_ids), per_image=[], reducer=None,
                                         value=ap[name]))
        labels.result_sha256 = sha256_json(measures)
    record = make_record(kind="decoder", setting=setting, opening_row_sha256=labels.row_sha256,
                         measures=measures, started=started, **common)
    write_record(smk.output.record, record, replace=True)
    log.info("%s on %s: Jaccard %.2f, AP %.2f, CorLoc %.2f", common["checkpoint"], params["name"],
             measures[0]["value"], ap["ap"], measures[1]["value"])


def probe_job(smk) -> None:
    """Train the probe on the probe-train data set's tokens, then score it on every eval data set."""
    from evaluate.features import FeatureReader
    from evaluate.ledger import make_record, write_record
    from evaluate.probe import (DEFAULT_MAX_ITER, DEFAULT_WEIGHT_DECAY, class_index, dataset_patch_labels,
                                eval_items, fit_probe, probe_measures, training_tokens)
    from evaluate.provenance import sha256_file, sha256_json

    started = time.time()
    hyper = smk.params.probe or {}
    boot = bootstrap_params(smk.params.bootstrap)
    train_params = smk.params.train
    common = _record_common(smk, train_params, "probe-train")
    train = open_dataset(train_params)
    classes = class_index(train.category_ids)
    setting = f"linear,wd={hyper.get('weight_decay', DEFAULT_WEIGHT_DECAY):g},it={hyper.get('max_iter', DEFAULT_MAX_ITER)}"
    reader = FeatureReader([Path(p).parent for p in smk.input.train])
    with open_labels(smk, smk.output.records[0], train, train_params["name"], role="probe-train",
                     purpose="probe-train", checkpoint=common["checkpoint"], setting=setting,
                     n_images=len(reader.image_ids)) as labels:
        patch_labels = dataset_patch_labels(train, reader.image_ids, classes)
        features, targets = training_tokens(reader, patch_labels, seed=boot["seed"])
        log.info("training on %d tokens of %d images, %d classes", len(targets), len(reader.image_ids),
                 len(classes) + 1)
        probe = fit_probe(features, targets, len(classes) + 1,
                          weight_decay=float(hyper.get("weight_decay", DEFAULT_WEIGHT_DECAY)),
                          max_iter=int(hyper.get("max_iter", DEFAULT_MAX_ITER)))
        probe.save(smk.output.weights)
        labels.result_sha256 = sha256_file(smk.output.weights)
    train_opening = labels.row_sha256
    for eval_params, record_path in zip(smk.params.evals, smk.output.records):
        name = eval_params["name"]
        evaluation = open_dataset(eval_params)
        eval_reader = FeatureReader([Path(p).parent for p in smk.input[f"eval_{name}"]])
        eval_started = time.time()
        with open_labels(smk, record_path, evaluation, name, role="eval", purpose="probe-eval",
                         checkpoint=common["checkpoint"], setting=setting,
                         n_images=len(eval_reader.image_ids)) as labels:
            measures = probe_measures(probe, eval_items(eval_reader, evaluation, classes), **boot)
            labels.result_sha256 = sha256_json(measures)
        record = make_record(
            kind="probe", setting=setting, opening_row_sha256=labels.row_sha256, measures=measures,
            started=eval_started, **{**common, "dataset": name, "role": "eval"},
        )
        record["train_opening_row_sha256"] = train_opening
        write_record(record_path, record, replace=True)
        log.info("%s on %s: probe mIoU %.2f, accuracy %.2f", common["checkpoint"], name,
                 measures[0]["value"], measures[1]["value"])


# ------------------------------------------------------------------------------------------------------ decoder


def sweep_settings(decoder_config: dict) -> list:
    """The sweep grid of config.yaml's `decoder` section (DEFAULT_GRID_SPEC when `sweep` is absent)."""
    from decoders.settings import DEFAULT_GRID_SPEC, settings_grid

    spec = dict(decoder_config.get("sweep") or DEFAULT_GRID_SPEC)
    spec["centre"] = [bool(decoder_config.get("centre", True))]
    spec["masks"] = [int(decoder_config.get("masks", 1))]
    return settings_grid(spec)


def read_selected(path: str | Path):
    """(decoder module, settings) from results/decoder/selected.yaml."""
    import yaml

    from decoders import get_decoder

    selected = yaml.safe_load(Path(path).read_text())
    decoder = get_decoder(selected["decoder"])
    return decoder, decoder.Settings.from_dict(selected["settings"])


def _shard_keys(keys_path: str, ids_path: str) -> tuple[list[int], np.ndarray]:
    """A shard's image ids and its keys480 as a read-only memory map (n, 900, 384)."""
    ids = [int(i) for i in read_json(ids_path)]
    keys = np.load(keys_path, mmap_mode="r")
    if keys.shape[0] != len(ids):
        from evaluate.features import FeatureError

        raise FeatureError(f"{keys_path}: {keys.shape[0]} rows but {len(ids)} ids in {ids_path}")
    return ids, keys


def sweep_decode_job(smk) -> None:
    """Every setting of the grid on one shard of the reference checkpoint's select keys: grid masks, no labels.

    Output npz: image_ids (n,), settings (S,) names, masks uint8 (n, S, M, ceil(N/8)) bit-packed grid masks,
    counts int8 (n, S) masks per setting, scores float32 (n, S, M).
    """
    from decoders import get_decoder
    from decoders.ncut import GRID, SolverStats

    decoder = get_decoder(smk.params.decoder.get("name", "ncut"))
    settings = sweep_settings(smk.params.decoder)
    ids, keys = _shard_keys(smk.input.keys480, smk.input.image_ids)
    n_masks = max(s.masks for s in settings)
    n_cells = GRID[0] * GRID[1]
    packed = np.zeros((len(ids), len(settings), n_masks, (n_cells + 7) // 8), dtype=np.uint8)
    counts = np.zeros((len(ids), len(settings)), dtype=np.int8)
    scores = np.zeros((len(ids), len(settings), n_masks), dtype=np.float32)
    stats = SolverStats()
    for row in range(len(ids)):
        per_setting = decoder.sweep(np.asarray(keys[row], dtype=np.float32), settings, GRID, stats=stats)
        for s, masks in enumerate(per_setting):
            counts[row, s] = len(masks)
            for m, gm in enumerate(masks):
                packed[row, s, m] = np.packbits(gm.mask.reshape(-1))
                scores[row, s, m] = gm.score
    log.info("%d images x %d settings; solver: %s", len(ids), len(settings), stats)
    from evaluate.atomic import atomic_path

    with atomic_path(smk.output[0]) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, image_ids=np.asarray(ids, dtype=np.int64), settings=np.asarray([s.name for s in settings]),
                     masks=packed, counts=counts, scores=scores)


def _sweep_jaccard(dataset, sweep_files: list[str], sizes: dict[int, tuple[int, int]]):
    """Per-image Jaccard (fraction) of every setting: (settings, scored ids, left-out ids, J float64 (n, S))."""
    from decoders.masks import grid_to_image
    from decoders.ncut import GRID
    from evaluate.scores import jaccard

    settings, ids, left_out, rows = None, [], [], []
    for path in sweep_files:
        with np.load(path) as shard:
            names = [str(s) for s in shard["settings"]]
            if settings is None:
                settings = names
            elif names != settings:
                from evaluate.scores import ScoreError

                raise ScoreError(f"{path}: its settings differ from the other sweep shards'; re-run the sweep")
            for row, image_id in enumerate(shard["image_ids"].tolist()):
                objects, crowd = dataset.ground_truth(image_id)
                h, w = sizes[image_id]
                unions: dict[bytes, float | None] = {}
                values = []
                for s in range(len(names)):
                    n = int(shard["counts"][row, s])
                    bits = np.unpackbits(shard["masks"][row, s, :n], axis=-1)[:, : GRID[0] * GRID[1]]
                    union = bits.any(axis=0).reshape(GRID) if n else np.zeros(GRID, dtype=bool)
                    key = union.tobytes()
                    if key not in unions:
                        unions[key] = jaccard(grid_to_image(union, h, w), objects, crowd)
                    values.append(unions[key])
                if values[0] is None:
                    left_out.append(image_id)
                else:
                    ids.append(image_id)
                    rows.append(values)
    return settings or [], ids, left_out, np.asarray(rows, dtype=np.float64).reshape(len(ids), len(settings or []))


def select_setting_job(smk) -> None:
    """Open the select data set's labels once, score every setting, keep the best by mean Jaccard."""
    import csv
    import io

    import yaml

    from decoders import get_decoder
    from decoders.settings import NcutSettings
    from evaluate.atomic import write_text
    from evaluate.ledger import make_measure, make_record, write_record
    from evaluate.provenance import sha256_json
    from evaluate.scores import bootstrap_ci

    started = time.time()
    params, ckpt = smk.params.dataset, smk.params.checkpoint
    boot = bootstrap_params(smk.params.bootstrap)
    decoder = get_decoder(smk.params.decoder.get("name", "ncut"))
    manifest = read_json(smk.input.manifest)
    dataset = open_dataset(params)
    common = _record_common(smk, params, "select")
    n_settings = len(sweep_settings(smk.params.decoder))
    with open_labels(smk, smk.output.record, dataset, params["name"], role="select", purpose="select",
                     checkpoint=ckpt["name"], setting=f"sweep of {n_settings} settings",
                     n_images=len(manifest["image_ids"])) as labels:
        names, ids, left_out, table = _sweep_jaccard(dataset, list(smk.input.sweep), manifest_sizes(manifest))
        if not ids:
            from evaluate.scores import ScoreError

            raise ScoreError(f"{params['annotations']}: no image of the select data set has non-crowd ground "
                             "truth, so no setting can be chosen")
        rows = []
        for s, name in enumerate(names):
            value, lo, hi = bootstrap_ci(table[:, s], "mean", **boot)
            rows.append({"setting": name, "value": 100 * value, "ci_low": 100 * lo, "ci_high": 100 * hi,
                         "n_images": len(ids), "n_left_out": len(left_out), "checkpoint": ckpt["name"],
                         "dataset": params["name"], **NcutSettings.from_name(name).to_dict()})
        best = int(np.argmax(table.mean(axis=0)))  # first of equal means: the grid's order decides
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        labels.result_sha256 = sha256_json(rows)
    write_text(smk.output.table, buffer.getvalue())
    settings = NcutSettings.from_name(names[best])
    selected = {
        "decoder": decoder.NAME, "name": settings.name, "settings": settings.to_dict(),
        "jaccard": rows[best]["value"], "ci_low": rows[best]["ci_low"], "ci_high": rows[best]["ci_high"],
        "dataset": params["name"], "checkpoint": ckpt["name"], "n_images": len(ids), "n_left_out": len(left_out),
        "n_settings": len(names), "opening_row_sha256": labels.row_sha256,
    }
    write_text(smk.output.selected, yaml.safe_dump(selected, sort_keys=False))
    measure = make_measure("jaccard", image_ids=ids, per_image=table[:, best].tolist(), reducer="mean",
                           n_left_out=len(left_out), **boot)
    record = make_record(kind="sweep", setting=settings.name, opening_row_sha256=labels.row_sha256,
                         measures=[measure], started=started, **common)
    write_record(smk.output.record, record, replace=True)
    log.info("selected %s: Jaccard %.2f [%.2f, %.2f] on %d images", settings.name, rows[best]["value"],
             rows[best]["ci_low"], rows[best]["ci_high"], len(ids))


def decode_job(smk) -> None:
    """The selected setting on one shard: COCO results (RLE at each image's own size), label-free."""
    from decoders.masks import coco_results
    from decoders.ncut import GRID, SolverStats
    from evaluate.atomic import write_json

    decoder, settings = read_selected(smk.input.selected)
    sizes = manifest_sizes(read_json(smk.input.manifest))
    ids, keys = _shard_keys(smk.input.keys480, smk.input.image_ids)
    stats = SolverStats()
    results = []
    for row, image_id in enumerate(ids):
        masks = decoder.decode(np.asarray(keys[row], dtype=np.float32), settings, GRID, stats=stats)
        results.extend(coco_results(image_id, masks, *sizes[image_id]))
    log.info("%d images, %d masks with %s; solver: %s", len(ids), len(results), settings.name, stats)
    write_json(smk.output[0], results)


# ------------------------------------------------------------------------------------------------------ figures


def figures_job(smk) -> None:
    """Measures against epoch (from the records), mask overlays per checkpoint, one image's eigenvector map."""
    from evaluate.figures import eigenvector_figure, mask_overlays, measure_figures

    out = Path(smk.output[0])
    out.mkdir(parents=True, exist_ok=True)
    ledger = Path(smk.input.scores).parent
    files = list(measure_figures(ledger, out) or [])
    figures = smk.params.figures or {}
    if smk.input.get("masks"):
        params = smk.params.dataset
        masks = dict(zip(smk.params.checkpoints, smk.input.masks))
        overlay = out / f"overlays_{params['name']}.png"
        mask_overlays(params["images"], params["annotations"], masks, overlay, k=int(figures.get("overlay_images", 4)))
        files.append(overlay)
        from decoders.ncut import GRID, eigenvector

        decoder, settings = read_selected(smk.input.selected)
        manifest = read_json(smk.input.manifest)
        wanted = figures.get("eigenvector_image") or manifest["image_ids"][0]
        if wanted not in manifest["image_ids"]:
            from evaluate.experiment import ConfigError

            raise ConfigError(f"config.yaml: figures.eigenvector_image: image id {wanted} is not in data set "
                              f"{params['name']}")
        shard = next(i for i, ids in enumerate(manifest["shards"]) if wanted in ids)
        keys = np.load(smk.input.keys480[shard], mmap_mode="r")[manifest["shards"][shard].index(wanted)]
        vector = eigenvector(np.asarray(keys, dtype=np.float32), settings, GRID)
        image_path = Path(params["images"]) / manifest["files"][manifest["image_ids"].index(wanted)]
        figure = out / f"eigenvector_{params['name']}_{wanted}.png"
        eigenvector_figure(image_path, vector, figure, title=f"{smk.params.reference}, image {wanted}")
        files.append(figure)
    log.info("wrote %d figures", len(files))
