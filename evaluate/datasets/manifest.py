"""A data set's manifest, every kind's, written by one writer (`results/datasets/{dataset}/manifest.json`).

    {"dataset": name, "kind": kind, "image_ids": [ids, sorted], "names": [file names, in that order],
     ...the kind's own listing (`listing()`: COCO's image sizes, a saliency set's two folders, ...),
     "shards": [[ids], ...] (consecutive runs of `shard_size` ids; the last may be shorter),
     "annotations_sha256": the labels' identity, "manifest_sha256": sha256 of the canonical JSON of all the rest}

A video kind lists sequences instead of images (its `listing()` holds `sequences`): it has no image ids and no
shards, each sequence being a job of its own. Listing a data set opens no label: the kinds list files and hash the
label files' bytes. A data set that declares a published benchmark (`benchmark:`) of another size than the
benchmark's is listed with a warning (`evaluate.datasets.benchmarks`): its published rows compare with other images.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Sequence

from evaluate.datasets import DataSetError, open_dataset

log = logging.getLogger("evaluate.datasets.manifest")


def manifest_of(dataset: Any, shard_size: int, name: str | None = None) -> dict:
    """The manifest of an opened data set (`evaluate.datasets` face) cut into shards of `shard_size` images."""
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
        raise DataSetError(f"shard_size must be a positive integer, got {shard_size!r}")
    listing = dataset.listing()
    content: dict[str, Any] = {"dataset": name, "kind": dataset.kind, **listing}
    if "image_ids" in listing:
        ids = list(listing["image_ids"])
        content["shards"] = [ids[start: start + shard_size] for start in range(0, len(ids), shard_size)]
    content["annotations_sha256"] = dataset.annotations_sha256
    from evaluate.plumbing.provenance import sha256_json

    return {**content, "manifest_sha256": sha256_json(content)}


def write_manifest(*, spec: dict, roles: Sequence[str], shard_size: int, out: str | os.PathLike) -> dict:
    """The manifest job: open the data set of `spec` (its kind's listing checks its files), refuse one whose roles
    score against labels it does not hold, warn where its declared benchmark has another size, write the manifest
    to `out` and return it."""
    from evaluate.plumbing.atomic import write_json

    dataset = open_dataset(spec)
    if roles and not dataset.has_labels:
        raise DataSetError(f"{dataset.labels_path}: holds no annotations, but data set {spec['name']!r} has role(s) "
                           f"{', '.join(roles)}, which score against labels")
    manifest = manifest_of(dataset, shard_size, spec["name"])
    if spec.get("benchmark"):
        from evaluate.datasets.benchmarks import benchmark_size

        expected, found = benchmark_size(spec["benchmark"]), len(manifest.get("image_ids", ()))
        if expected is not None and found != expected:
            log.warning("%s: declared benchmark %s has %d images, this data set %d: its published rows compare "
                        "with a different set of images", spec["name"], spec["benchmark"], expected, found)
    write_json(out, manifest)
    units = manifest.get("image_ids", manifest.get("sequences", ()))
    log.info("%s: %d %s in %d shard(s)", spec["name"], len(units), "images" if "image_ids" in manifest else
             "sequences", len(manifest.get("shards", units)))
    return manifest


def shard_image_ids(manifest: dict, shard: str, manifest_path: str | os.PathLike) -> list[int]:
    """The image ids of shard `shard` ("000", "001", ...) of a data set's manifest."""
    index = int(shard)
    if index >= len(manifest["shards"]):
        raise DataSetError(f"{manifest_path}: shard {index:03d} does not exist (the manifest has "
                           f"{len(manifest['shards'])} shards); re-run the workflow so the shard list is re-read")
    return [int(i) for i in manifest["shards"][index]]


def shard_names(manifest: dict) -> list[str]:
    """The names of a manifest's shards: "000", "001", ..."""
    return [f"{i:03d}" for i in range(len(manifest["shards"]))]


def check_listed(dataset: Any, manifest: dict, manifest_file: str | os.PathLike) -> Any:
    """`dataset`, once checked to be the one its manifest lists (the same names in the same order): a data set
    changed on disk since it was listed is refused, naming the manifest."""
    if "names" in manifest and list(dataset.names) != list(manifest["names"]):
        raise DataSetError(f"{manifest_file}: the data set's files no longer hold the images it lists; delete this "
                           "manifest and re-run so the data set is listed again")
    return dataset
