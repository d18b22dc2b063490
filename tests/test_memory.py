"""The probe's scoring holds the same memory whatever the number of images it scores (docs/design.md §10): glibc's
mmap threshold is fixed (`evaluate.plumbing.memory`), so each image's temporaries go back to the system instead of
staying in a heap pinned by the statistics kept per image.

Measured on real coco2017-mini annotations (label maps are the temporaries that matter), in a fresh process: the
unique set size (USS: the process's private pages, where a heap's growth shows) before scoring and after 30 and 100
scored images, with the product's setting and, as a control, with glibc's own adjustment of the threshold. Not the
proportional set size: a shared library's pages count in it divided among the processes that map them, so it moves
as other processes (the suite's other worker, its Snakemake jobs) start and end.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sources import COCO_MINI

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, /proc (Linux)"),
              pytest.mark.coco, pytest.mark.slow]

# argv: annotations file, 'product' or 'glibc'. Scores a random probe on random tokens of every image of the file
# through the product's own label maps and probe_measures; prints {images scored: USS in MiB}.
PROGRAM = """
import json, sys
import numpy as np
import evaluate.plumbing.memory as memory
from evaluate.datasets.coco import CocoDataset
from evaluate.probe import labels, linear, scores
if sys.argv[2] == "glibc":
    memory.keep_large_blocks_mapped = lambda: False
dataset = CocoDataset(sys.argv[3], sys.argv[1])
classes = labels.probe_classes(dataset.categories, sys.argv[1])
rng = np.random.default_rng(0)
probe = linear.LinearProbe((0.05 * rng.standard_normal((len(classes) + 1, 384))).astype(np.float32),
                           np.zeros(len(classes) + 1, np.float32))
def uss():
    fields = ("Private_Clean:", "Private_Dirty:", "Private_Hugetlb:")
    return sum(int(line.split()[1]) for line in open("/proc/self/smaps_rollup") if line.startswith(fields)) / 1024
seen = {0: uss()}
def items():
    index = labels.class_index(classes, dataset.categories, sys.argv[1])
    for n, image_id in enumerate(dataset.image_ids, 1):
        tokens = rng.standard_normal((196, 384)).astype(np.float32)
        yield image_id, tokens, labels.label_map224(labels.label_map(dataset, image_id, index))
        if n in (30, 100):
            seen[n] = uss()
scores.probe_measures(probe, items(), resamples=10, seed=0)
print(json.dumps(seen))
"""


def uss_after(mode: str, annotations) -> dict[int, float]:
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(annotations), mode, str(COCO_MINI / "images")],
                         capture_output=True, text=True, check=True)
    return {int(k): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


@pytest.fixture(scope="module")
def pooled_annotations(coco_mini, tmp_path_factory):
    """The 100 first of the 159 coco2017-mini images (val and train pooled) in one annotation file."""
    pooled = json.loads((coco_mini / "annotations.json").read_text())
    train = json.loads((coco_mini / "annotations_train.json").read_text())
    ids = set(sorted(im["id"] for im in pooled["images"] + train["images"])[:100])
    pooled["images"] = [im for im in pooled["images"] + train["images"] if im["id"] in ids]
    pooled["annotations"] = [a for a in pooled["annotations"] + train["annotations"] if a["image_id"] in ids]
    path = tmp_path_factory.mktemp("pooled") / "annotations.json"
    path.write_text(json.dumps(pooled))
    return path


def test_scoring_100_images_holds_what_scoring_30_held(pooled_annotations):
    product = uss_after("product", pooled_annotations)
    # MiB; the statistics kept per image are a few hundred KiB in all, a label map and its temporaries a few MiB
    assert product[100] - product[30] < 5 and product[100] - product[0] < 15, product
    # control: under glibc's own threshold the temporaries stay in the heap (in the workflow's job, where the
    # feature shards' reads and hashes interleave, that heap grew with the images: 1.5x from 30 to 150)
    glibc = uss_after("glibc", pooled_annotations)
    assert glibc[100] - glibc[0] > 30, glibc
