"""The probe's protocol on the record (docs/design.md §6): trained once per checkpoint on the probe-train data set,
scored once per eval data set, every opening of labels in the ledger (`evaluate.ledger.scoring`). The entries of
the train_probe and score_probe jobs.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from evaluate.ledger.scoring import Scoring

log = logging.getLogger("evaluate.probe.protocol")
READS = "tokens224"  # the reading the probe learns on and is scored on
DECODER = "linear-probe"  # what its records name as the decoder of that reading


def train_probe(scoring: Scoring, *, shard_dirs: Sequence[str | os.PathLike], images: str, annotations: str,
                weight_decay: float, max_iter: int, tol: float, max_tokens: int, seed: int,
                out_weights: str | os.PathLike, out_training: str | os.PathLike) -> dict:
    """Open the probe-train data set's labels once and train the probe on its tokens224 shards (`shard_dirs`, in
    shard order); write the weights and `training.json` (returned: the checkpoint's identity, the setting, the
    classes, the weights' sha256 and the opening row they came from).

    weight_decay, max_iter, tol, max_tokens: the config's `probe` section; seed: the subsample's seed
    (`bootstrap.seed`).
    """
    from evaluate.datasets.coco import CocoDataset
    from evaluate.ledger.scoring import open_labels, record_identity
    from evaluate.plumbing.atomic import write_json
    from evaluate.plumbing.provenance import sha256_file
    from evaluate.probe.labels import class_index, class_names, dataset_patch_labels, probe_classes
    from evaluate.probe.linear import fit_probe, probe_setting, training_tokens
    from evaluate.readings.features import FeatureReader

    train = CocoDataset(images, annotations)
    classes = probe_classes(train.categories, annotations)
    setting = probe_setting(weight_decay, max_iter)
    identity = record_identity(scoring, "probe-train")
    reader = FeatureReader(shard_dirs, kinds=("tokens224",))
    with open_labels(scoring, train.annotations_sha256, role="probe-train", purpose="probe-train", setting=setting,
                     n_images=len(reader.image_ids)) as labels:
        # on the grid of this checkpoint's tokens (its shards' patch): labels per patch size, never shared
        class_of_category = class_index(classes, train.categories, annotations)
        patch_labels = dataset_patch_labels(train, reader.image_ids, class_of_category, reader.geometry.patch)
        features, targets = training_tokens(reader, patch_labels, max_tokens=max_tokens, seed=seed)
        log.info("training on %d tokens of %d images, %d classes", len(targets), len(reader.image_ids),
                 len(classes) + 1)
        probe = fit_probe(features, targets, len(classes) + 1, weight_decay=weight_decay, max_iter=max_iter, tol=tol)
        probe.meta["classes"] = class_names(classes)
        probe.save(out_weights)
        labels.result_sha256 = sha256_file(out_weights)
    training = {
        **identity, "setting": setting, "classes": classes, "n_images": len(reader.image_ids),
        "weights_sha256": labels.result_sha256, "opening_row_sha256": labels.row_sha256,
    }
    write_json(out_training, training)
    return training


def score_probe(scoring: Scoring, *, shard_dirs: Sequence[str | os.PathLike], weights: str | os.PathLike,
                training_file: str | os.PathLike, manifest_file: str | os.PathLike, images: str, annotations: str,
                resamples: int, seed: int, code: str, out_record: str | os.PathLike) -> list[dict]:
    """Open one eval data set's labels once (or reuse the record of the same tokens, probe, labels, code and
    bootstrap) and score the checkpoint's probe on its tokens224 shards: mIoU and patch accuracy; write the probe
    record and return its measures. The eval set's categories are matched to the probe's classes by name
    (`training.json`); code: the job's code hash.
    """
    from evaluate.datasets.coco import CocoDataset
    from evaluate.ledger.scoring import Scored, score_on_record
    from evaluate.plumbing.atomic import read_json
    from evaluate.probe.labels import class_index, class_names
    from evaluate.probe.linear import LinearProbe
    from evaluate.probe.scores import eval_items, probe_measures
    from evaluate.readings.features import FeatureReader

    training = read_json(training_file)
    reader = FeatureReader(shard_dirs, kinds=("tokens224",))

    def score(evaluation: Any) -> Scored:
        class_of_category = class_index(training["classes"], evaluation.categories, annotations)
        items = eval_items(reader, evaluation, class_of_category)
        return Scored(measures=probe_measures(LinearProbe.load(weights), items, resamples=resamples, seed=seed),
                      fields={"train_opening_row_sha256": training["opening_row_sha256"],
                              "class_names": class_names(training["classes"])})

    record, _ = score_on_record(
        scoring, kind="probe", role="eval", purpose="probe-eval", setting=training["setting"], reading=READS,
        decoder=DECODER,
        n_images=len(reader.image_ids), out_record=out_record,
        decided_by=[*reader.files(), weights, training_file, manifest_file, annotations],
        settings={"code": code, "resamples": resamples, "seed": seed},
        open_dataset=lambda: CocoDataset(images, annotations), score=score,
    )
    value = {m["measure"]: m["value"] for m in record["measures"]}
    log.info("%s on %s: probe mIoU %.2f, accuracy %.2f", scoring.checkpoint, scoring.dataset, value["probe_miou"],
             value["probe_accuracy"])
    return record["measures"]
