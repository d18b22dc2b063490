"""Jobs of workflow/rules/ledger.smk: scores.csv, tables and figures, rebuilt from the ledger's records."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("evaluate.jobs.ledger")


def scores(smk: Any) -> None:
    """scores.csv and scores.parquet rebuilt from every record (never edited by hand)."""
    out_csv, out_parquet = Path(smk.output.csv), Path(smk.output.parquet)

    from evaluate.ledger.scores_table import rebuild_scores
    from evaluate.plumbing.paths import RECORDS_IN_LEDGER

    records_dir = out_csv.parent / RECORDS_IN_LEDGER  # scores.csv lies in the ledger, beside its records
    n = rebuild_scores(records_dir, out_csv, out_parquet)
    log.info("scores.csv: %d rows", n)


def tables(smk: Any) -> None:
    """Result tables (CSV, Markdown, LaTeX, HTML fragments) from the records and the sweep table."""
    ledger_dir = Path(smk.input.scores).parent
    sweep_csv = Path(smk.input.sweep) if smk.input.get("sweep") else None
    compare_to: str | None = smk.params.compare_to
    gallery_images = int(smk.params.gallery_images)
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    out_dir = Path(smk.output[0])

    from evaluate.outputs.tables import build_tables

    files = build_tables(ledger_dir, out_dir, compare_to, resamples=resamples, seed=seed, sweep_csv=sweep_csv,
                         gallery_images=gallery_images)
    log.info("wrote %d table files", len(files))


def figures(smk: Any) -> None:
    """Figures from the records (measures, overlays, galleries, sweep heatmap, agreement), one eigenvector map, and
    each video data set's propagated masks per checkpoint."""
    ledger_dir = Path(smk.input.scores).parent
    masks = [str(p) for p in smk.input.get("masks", [])]
    manifest_file = smk.input.get("manifest")
    eigenvector_file = smk.input.get("eigenvector")
    attention_rows = [str(p) for p in smk.input.get("attention_rows", [])]
    sweep_csv = smk.input.get("sweep")
    figure_config: dict = smk.params.figures
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    dataset: dict | None = smk.params.dataset
    truth = bool(smk.params.truth)  # False: the figures' data set is sealed, its ground truth is not drawn
    checkpoints: list[str] = list(smk.params.checkpoints)
    reference: str = smk.params.reference
    video: dict = smk.params.video
    out = Path(smk.output[0])

    from evaluate.outputs.figures import eigenvector_figure, ledger_figures

    out.mkdir(parents=True, exist_ok=True)
    files = ledger_figures(ledger_dir, out, dataset=dataset, masks=dict(zip(checkpoints, masks)) if masks else None,
                           sweep_csv=sweep_csv, overlay_images=int(figure_config["overlay_images"]),
                           gallery_images=int(figure_config["gallery_images"]), resamples=resamples, seed=seed,
                           truth=truth, attention_rows=dict(zip(checkpoints, attention_rows)), video=video)
    from evaluate.ledger.records import read_records
    from evaluate.outputs.record_figures import record_figures
    from evaluate.plumbing.paths import RECORDS_IN_LEDGER

    files += record_figures(read_records(ledger_dir / RECORDS_IN_LEDGER), out, figure_config)
    if masks:
        import numpy as np

        from evaluate.plumbing.atomic import read_json

        manifest = read_json(manifest_file)
        with np.load(eigenvector_file) as saved:
            image_id, vector = int(saved["image_id"]), saved["vector"]
            # keys480's input side; a map written before the side was recorded is the seed's (ViT-S/16: 480)
            side = int(saved["keys480_side"]) if "keys480_side" in saved.files else None
        image_path = Path(dataset["images"]) / manifest["names"][manifest["image_ids"].index(image_id)]
        figure = out / f"eigenvector_{dataset['name']}_{image_id}.png"
        eigenvector_figure(image_path, vector, figure, title=f"{reference}, image {image_id}",
                           **({} if side is None else {"side": side}))
        files.append(figure)
    log.info("wrote %d figures", len(files))


def eigenvector(smk: Any) -> None:
    """The eigenvector figure's data: the reference checkpoint's first cut on one image of a data set.

    Its own job, so the figures never read keys480 (which `features.keep: false` deletes once decoded) and adding a
    checkpoint never re-extracts the reference. Output npz: image_id () int64, vector (g, g) float32 on the keys'
    grid (30 for p 16, 60 for p 8, 34 for p 14), keys480_side () int64 the side the keys' images were resized to
    (the features' geometry, from the first shard's meta.json: 480, or 476 for p 14).
    """
    keys480 = [str(p) for p in smk.input.keys480]
    meta_file = Path(smk.input.meta)
    manifest_file, selected = Path(smk.input.manifest), str(smk.input.selected)
    image: int | None = smk.params.image
    dataset_name: str = smk.wildcards.dataset
    out = Path(smk.output[0])

    import numpy as np

    from decoders import load_selected
    from evaluate.plumbing.atomic import atomic_path, read_json
    from decoders.shards import eigenvector_of_image
    from evaluate.pixels.geometry import Geometry

    _, settings = load_selected(selected)
    side = Geometry.from_meta(read_json(meta_file)).keys480_side
    image_id, vector = eigenvector_of_image(read_json(manifest_file), keys480, settings, image, dataset_name)
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, image_id=np.int64(image_id), vector=np.asarray(vector, dtype=np.float32),
                     keys480_side=np.int64(side))


def html_report(smk: Any) -> None:
    """results/report.html: every table and figure on one static page (evaluate.outputs.report)."""
    tables_dir, figures_dir = Path(smk.input.tables), Path(smk.input.figures)
    out = Path(smk.output[0])

    from evaluate.outputs.report import build_report

    build_report(tables_dir, figures_dir, out)
