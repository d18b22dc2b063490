"""Jobs of workflow/rules/ledger.smk: scores.csv, tables and figures, rebuilt from the ledger's records."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("evaluate.jobs.ledger")


def scores(smk: Any) -> None:
    """scores.csv and scores.parquet rebuilt from every record (never edited by hand)."""
    out_csv, out_parquet = Path(smk.output.csv), Path(smk.output.parquet)
    records_dir = out_csv.parent / "records"

    from evaluate.ledger.scores_table import rebuild_scores

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

    from evaluate.tables import build_tables

    files = build_tables(ledger_dir, out_dir, compare_to, resamples=resamples, seed=seed, sweep_csv=sweep_csv,
                         gallery_images=gallery_images)
    log.info("wrote %d table files", len(files))


def figures(smk: Any) -> None:
    """Figures from the records (measures, overlays, galleries, sweep heatmap, agreement), one eigenvector map."""
    ledger_dir = Path(smk.input.scores).parent
    masks = [str(p) for p in smk.input.get("masks", [])]
    keys480 = [str(p) for p in smk.input.get("keys480", [])]
    manifest_file = smk.input.get("manifest")
    selected = smk.input.get("selected")
    sweep_csv = smk.input.get("sweep")
    figure_config: dict = smk.params.figures
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    dataset: dict | None = smk.params.dataset
    checkpoints: list[str] = list(smk.params.checkpoints)
    reference: str = smk.params.reference
    out = Path(smk.output[0])

    from evaluate.figures import eigenvector_figure, eigenvector_of_image, ledger_figures

    out.mkdir(parents=True, exist_ok=True)
    files = ledger_figures(ledger_dir, out, dataset=dataset, masks=dict(zip(checkpoints, masks)) if masks else None,
                           sweep_csv=sweep_csv, overlay_images=int(figure_config["overlay_images"]),
                           gallery_images=int(figure_config["gallery_images"]), resamples=resamples, seed=seed)
    if masks:
        from decoders import load_selected
        from evaluate.atomic import read_json

        _, settings = load_selected(selected)
        manifest = read_json(manifest_file)
        image_id, vector = eigenvector_of_image(manifest, keys480, settings, figure_config["eigenvector_image"],
                                                dataset["name"])
        image_path = Path(dataset["images"]) / manifest["files"][manifest["image_ids"].index(image_id)]
        figure = out / f"eigenvector_{dataset['name']}_{image_id}.png"
        eigenvector_figure(image_path, vector, figure, title=f"{reference}, image {image_id}")
        files.append(figure)
    log.info("wrote %d figures", len(files))


def html_report(smk: Any) -> None:
    """results/report.html: every table and figure on one static page (evaluate.report)."""
    tables_dir, figures_dir = Path(smk.input.tables), Path(smk.input.figures)
    out = Path(smk.output[0])

    from evaluate.report import build_report

    build_report(tables_dir, figures_dir, out)
