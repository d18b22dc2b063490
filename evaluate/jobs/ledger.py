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
    """Result tables (CSV, Markdown, LaTeX) from the records and the sweep table."""
    ledger_dir = Path(smk.input.scores).parent
    sweep_csv = Path(smk.input.sweep) if smk.input.get("sweep") else None
    compare_to: str | None = smk.params.compare_to
    resamples, seed = int(smk.params.bootstrap["resamples"]), int(smk.params.bootstrap["seed"])
    out_dir = Path(smk.output[0])

    from evaluate.tables import build_tables

    files = build_tables(ledger_dir, out_dir, compare_to, resamples=resamples, seed=seed, sweep_csv=sweep_csv)
    log.info("wrote %d table files", len(files))


def figures(smk: Any) -> None:
    """Measures against epoch (from the records), mask overlays per checkpoint, one image's eigenvector map."""
    ledger_dir = Path(smk.input.scores).parent
    masks = [str(p) for p in smk.input.get("masks", [])]
    keys480 = [str(p) for p in smk.input.get("keys480", [])]
    manifest_file = smk.input.get("manifest")
    selected = smk.input.get("selected")
    figure_config: dict = smk.params.figures
    dataset: dict | None = smk.params.dataset
    checkpoints: list[str] = list(smk.params.checkpoints)
    reference: str = smk.params.reference
    out = Path(smk.output[0])

    from evaluate.figures import eigenvector_figure, eigenvector_of_image, mask_overlays, measure_figures

    out.mkdir(parents=True, exist_ok=True)
    files = list(measure_figures(ledger_dir, out) or [])
    if masks:
        from decoders import load_selected
        from evaluate.atomic import read_json

        overlay = out / f"overlays_{dataset['name']}.png"
        mask_overlays(dataset["images"], dataset["annotations"], dict(zip(checkpoints, masks)), overlay,
                      k=int(figure_config["overlay_images"]))
        files.append(overlay)
        _, settings = load_selected(selected)
        manifest = read_json(manifest_file)
        image_id, vector = eigenvector_of_image(manifest, keys480, settings, figure_config["eigenvector_image"],
                                                dataset["name"])
        image_path = Path(dataset["images"]) / manifest["files"][manifest["image_ids"].index(image_id)]
        figure = out / f"eigenvector_{dataset['name']}_{image_id}.png"
        eigenvector_figure(image_path, vector, figure, title=f"{reference}, image {image_id}")
        files.append(figure)
    log.info("wrote %d figures", len(files))
