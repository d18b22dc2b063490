"""The decoder's scores on an eval data set, on the record: the score_decoder job's entry (docs/design.md §6, §7).

One checkpoint's merged masks (COCO results) on one eval data set: its labels opened once in the ledger
(`evaluate.ledger.scoring`), or the record of the same masks, labels, code and bootstrap reused; measured by
`evaluate.scores.measures.decoder_measures` (Jaccard, CorLoc, mask AP, AP50, AR@10), with each image's categories
for the per-category tables.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluate.ledger.scoring import Scoring

log = logging.getLogger("evaluate.decoding.scoring")


def score_decoder(scoring: Scoring, *, masks_file: str | os.PathLike, selected_file: str | os.PathLike,
                  manifest_file: str | os.PathLike, images: str, annotations: str, resamples: int, seed: int,
                  code: str, out_record: str | os.PathLike) -> list[dict]:
    """Score the masks of `scoring`'s checkpoint on its eval data set and write the decoder record; returns its
    measures. selected_file: `selected.yaml`, whose setting the masks were decoded with; code: the job's code hash.

    The setting enters the reuse key by name, never by selected.yaml's bytes: they also hold the selection's opening
    row, which a re-selection on other inputs renews even when it selects the same setting.
    """
    from decoders import load_selected
    from evaluate.datasets.coco import CocoDataset
    from evaluate.ledger.scoring import Scored, score_on_record
    from evaluate.plumbing.atomic import read_json
    from evaluate.scores.masks import image_categories
    from evaluate.scores.measures import decoder_measures

    def score(dataset: Any) -> Scored:
        measures = decoder_measures(dataset, read_json(masks_file), resamples=resamples, seed=seed)
        return Scored(measures=measures, fields={"image_categories": image_categories(dataset)})

    decoder, settings = load_selected(selected_file)
    record, _ = score_on_record(
        scoring, kind="decoder", role="eval", purpose="eval", setting=settings.name, reading=decoder.READS,
        decoder=decoder.NAME, n_images=len(read_json(manifest_file)["image_ids"]),  # the data set's images, as the manifest lists them
        out_record=out_record, decided_by=[masks_file, manifest_file, annotations],
        settings={"code": code, "resamples": resamples, "seed": seed},
        open_dataset=lambda: CocoDataset(images, annotations), score=score,
    )
    value = {m["measure"]: m["value"] for m in record["measures"]}
    log.info("%s on %s: Jaccard %.2f, AP %.2f, CorLoc %.2f", scoring.checkpoint, scoring.dataset, value["jaccard"],
             value["ap"], value["corloc"])
    return record["measures"]
