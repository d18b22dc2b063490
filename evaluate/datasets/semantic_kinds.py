"""The semantic-segmentation data kinds by their config name (docs/design.md §17, DESIGN 16): `open_semantic_set`
builds a config entry's set by its `kind`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluate.datasets.cityscapes import CityscapesSet
from evaluate.datasets.cocostuff import CocoStuffSet
from evaluate.datasets.label_folder import LabelFolderSet
from evaluate.datasets.potsdam import PotsdamSet
from evaluate.datasets.semantic import SemanticDataError, SemanticSet

KINDS = {kind.kind: kind for kind in (CocoStuffSet, CityscapesSet, PotsdamSet, LabelFolderSet)}


def open_semantic_set(spec: Mapping[str, Any]) -> SemanticSet:
    """The data set of a config entry, by its `kind` (one of KINDS: cocostuff, cityscapes, potsdam, folder)."""
    kind = spec.get("kind")
    if kind not in KINDS:
        raise SemanticDataError(f"unknown semantic-segmentation data kind {kind!r}; one of {', '.join(KINDS)}")
    return KINDS[kind].from_spec(spec)
