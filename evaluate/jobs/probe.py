"""Jobs of workflow/rules/probe.smk: the probe trained once per checkpoint, scored once per eval data set."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("evaluate.jobs.probe")


def train_probe(smk: Any) -> None:
    """Open the probe-train set's labels once and train the probe on its tokens224 (docs/design.md §6)."""
    shard_dirs = [Path(p).parent for p in smk.input.train]
    features_meta = Path(smk.input.meta)
    dataset_name: str = smk.params.dataset["name"]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    checkpoint: dict = smk.params.checkpoint
    hyper: dict = smk.params.probe
    seed = int(smk.params.bootstrap["seed"])
    config: dict = smk.config
    out_weights, out_training = Path(smk.output.weights), Path(smk.output.training)

    from evaluate.plumbing.atomic import write_json
    from evaluate.datasets.coco import CocoDataset
    from evaluate.readings.features import FeatureReader
    from evaluate.ledger.scoring import open_labels, record_identity
    from evaluate.probe.labels import class_index, class_names, dataset_patch_labels, probe_classes
    from evaluate.probe.linear import fit_probe, probe_setting, training_tokens
    from evaluate.plumbing.provenance import sha256_file

    train = CocoDataset(images, annotations)
    classes = probe_classes(train.categories, annotations)
    setting = probe_setting(float(hyper["weight_decay"]), int(hyper["max_iter"]))
    identity = record_identity(config, checkpoint, features_meta, dataset_name, "probe-train")
    reader = FeatureReader(shard_dirs, kinds=("tokens224",))
    with open_labels(config, train, dataset_name, role="probe-train", purpose="probe-train",
                     checkpoint=checkpoint["name"], setting=setting, n_images=len(reader.image_ids)) as labels:
        patch_labels = dataset_patch_labels(train, reader.image_ids, class_index(classes, train.categories,
                                                                                 annotations))
        features, targets = training_tokens(reader, patch_labels, max_tokens=int(hyper["max_tokens"]), seed=seed)
        log.info("training on %d tokens of %d images, %d classes", len(targets), len(reader.image_ids),
                 len(classes) + 1)
        probe = fit_probe(features, targets, len(classes) + 1, weight_decay=float(hyper["weight_decay"]),
                          max_iter=int(hyper["max_iter"]), tol=float(hyper["tol"]))
        probe.meta["classes"] = class_names(classes)
        probe.save(out_weights)
        labels.result_sha256 = sha256_file(out_weights)
    write_json(out_training, {
        **identity, "setting": setting, "classes": classes, "n_images": len(reader.image_ids),
        "weights_sha256": labels.result_sha256, "opening_row_sha256": labels.row_sha256,
    })


def score_probe(smk: Any) -> None:
    """Open one eval data set's labels once and score the checkpoint's probe on it: mIoU and patch accuracy."""
    shard_dirs = [Path(p).parent for p in smk.input.features]
    weights, training_file = Path(smk.input.weights), Path(smk.input.training)
    features_meta, manifest = Path(smk.input.meta), Path(smk.input.manifest)
    annotations_file = Path(smk.input.annotations)
    dataset_name: str = smk.params.dataset["name"]
    images, annotations = str(smk.params.dataset["images"]), str(smk.params.dataset["annotations"])
    checkpoint: dict = smk.params.checkpoint
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    code: str = smk.params.code
    config: dict = smk.config
    out_record = Path(smk.output.record)

    from evaluate.plumbing.atomic import read_json
    from evaluate.datasets.coco import CocoDataset
    from evaluate.readings.features import FeatureReader
    from evaluate.ledger.scoring import score_eval_set
    from evaluate.probe.labels import class_index, class_names
    from evaluate.probe.linear import LinearProbe
    from evaluate.probe.scores import eval_items, probe_measures

    training = read_json(training_file)
    reader = FeatureReader(shard_dirs, kinds=("tokens224",))

    def score(evaluation: CocoDataset) -> tuple[list[dict], dict]:
        class_of_category = class_index(training["classes"], evaluation.categories, annotations)
        items = eval_items(reader, evaluation, class_of_category)
        return (probe_measures(LinearProbe.load(weights), items, resamples=resamples, seed=seed),
                {"train_opening_row_sha256": training["opening_row_sha256"],
                 "class_names": class_names(training["classes"])})

    measures = score_eval_set(
        config, open_dataset=lambda: CocoDataset(images, annotations), dataset_name=dataset_name,
        checkpoint=checkpoint, features_meta=features_meta, kind="probe", purpose="probe-eval",
        setting=training["setting"], n_images=len(reader.image_ids), out_record=out_record,
        decided_by=[*reader.files(), weights, training_file, manifest, annotations_file],
        settings={"code": code, "resamples": resamples, "seed": seed}, score=score,
    )
    log.info("%s on %s: probe mIoU %.2f, accuracy %.2f", checkpoint["name"], dataset_name, measures[0]["value"],
             measures[1]["value"])
