"""Shared fixtures: where the real data lives, and a skip with a reason where it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
COCO_MINI = SHARED / "data" / "coco2017-mini"


@pytest.fixture(scope="session")
def coco_mini() -> Path:
    """../shared/data/coco2017-mini beside the checkout: 79 val + 80 train real COCO photos with human masks."""
    if not (COCO_MINI / "annotations.json").is_file():
        pytest.skip(f"real data absent: {COCO_MINI} not found (it lies in ../shared beside the checkout)")
    return COCO_MINI
