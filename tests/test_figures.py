"""Figures: PNGs of the documented pixel size, byte-identical on a re-run, with hand-checked overlay pixels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image
from pycocotools import mask as mask_utils

import evaluate.outputs.overlays as overlays_module
from evaluate.outputs.figures import FigureError, agreement_scatter, eigenvector_figure, measure_figures, sweep_heatmap
from evaluate.outputs.overlays import (
    ALPHA,
    PREDICTION_COLOUR,
    SEALED_LEGEND,
    TRUTH_COLOUR,
    gallery_figure,
    mask_overlays,
    overlay_masks,
)
from evaluate.ledger.records import record_path, write_record


def png_size_and_text(path: Path) -> tuple[tuple[int, int], dict]:
    with Image.open(path) as im:
        assert im.format == "PNG"
        return im.size, dict(im.text)


def rle(mask: np.ndarray) -> dict:
    enc = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": enc["size"], "counts": enc["counts"].decode("ascii")}


def write_records(ledger: Path) -> None:
    for run, offset in (("dino", 0.0), ("selfpatch", 5.0)):
        for epoch in (10, 20, 30):
            value = 30.0 + offset + epoch / 10
            rec = {
                "kind": "decoder", "checkpoint": f"{run}-ep{epoch:04d}", "run": run, "epoch": epoch,
                "checkpoint_sha256": "c" * 64, "dataset": "val", "role": "eval", "setting": "s",
                "code_version": "x", "config_hash": "f" * 16, "torch_version": "2.13.0",
                "started": "2026-01-01T00:00:00.000000Z", "finished": "2026-01-01T00:00:01.000000Z",
                "wall_s": 1.0, "max_rss_mb": 1.0, "opening_row_sha256": "0" * 64,
                "measures": [
                    {"measure": "jaccard", "value": value, "ci_low": value - 1, "ci_high": value + 1,
                     "n_images": 1, "n_left_out": 0, "reducer": "mean", "image_ids": [1], "per_image": [value]},
                    {"measure": "ap", "value": value / 3, "ci_low": None, "ci_high": None, "n_images": 1,
                     "n_left_out": 0, "reducer": None, "image_ids": [1], "per_image": []},
                ],
            }
            write_record(record_path(ledger, "decoder", rec["checkpoint"], "val"), rec)


def test_measure_figures_have_fixed_size_and_identical_bytes(tmp_path):
    write_records(tmp_path / "ledger")
    first = measure_figures(tmp_path / "ledger", tmp_path / "a")
    second = measure_figures(tmp_path / "ledger", tmp_path / "b")
    assert [p.name for p in first] == ["val_ap.png", "val_jaccard.png"]
    for p, q in zip(first, second):
        size, text = png_size_and_text(p)
        assert size == (640, 400)
        assert "Software" not in text
        assert p.read_bytes() == q.read_bytes()


def make_coco(root: Path, sizes: list[tuple[int, int]]) -> Path:
    """Images of the given (h, w) with ids 10, 20, ...; a flat colour each; annotations JSON with no instances."""
    (root / "images").mkdir(parents=True)
    images = []
    for k, (h, w) in enumerate(sizes):
        image_id = 10 * (len(sizes) - k)  # written in descending id order: the figure must sort them
        Image.fromarray(np.full((h, w, 3), 100, np.uint8)).save(root / "images" / f"{image_id}.png")
        images.append({"id": image_id, "file_name": f"{image_id}.png", "height": h, "width": w})
    ann = root / "annotations.json"
    ann.write_text(json.dumps({"images": images, "annotations": [], "categories": [{"id": 1, "name": "x"}]}))
    return ann


def test_mask_overlays_grid_size_and_determinism(tmp_path):
    sizes = [(48, 64), (64, 48), (40, 40), (30, 50), (50, 30)]
    ann = make_coco(tmp_path, sizes)
    results = {}
    for name, fill in (("ck-a", 0.25), ("ck-b", 0.5)):
        entries = []
        for im in json.loads(ann.read_text())["images"]:
            m = np.zeros((im["height"], im["width"]), bool)
            m[: int(im["height"] * fill), :] = True
            entries.append({"image_id": im["id"], "category_id": 1, "segmentation": rle(m), "score": 0.9})
        results[name] = tmp_path / f"{name}.json"
        results[name].write_text(json.dumps(entries))
    out1 = mask_overlays(tmp_path / "images", ann, results, tmp_path / "o1.png", k=3)
    out2 = mask_overlays(tmp_path / "images", ann, results, tmp_path / "o2.png", k=3)
    size, text = png_size_and_text(out1)
    assert size == (600, 460)  # 3 columns x 2 rows of 2-inch tiles at 100 dpi, and 0.6 inch of legend
    assert "Software" not in text
    assert out1.read_bytes() == out2.read_bytes()
    pdf1, pdf2 = out1.with_suffix(".pdf").read_bytes(), out2.with_suffix(".pdf").read_bytes()
    assert pdf1.startswith(b"%PDF") and pdf1 == pdf2 and b"CreationDate" not in pdf1
    (tmp_path / "bad.json").write_text(json.dumps([{"image_id": 10, "segmentation": {"size": [1]}}]))
    with pytest.raises(FigureError, match="bad.json: image 10"):
        mask_overlays(tmp_path / "images", ann, {"bad": tmp_path / "bad.json"}, tmp_path / "o3.png", k=3)


def test_overlay_blends_half_way_to_the_palette_colour():
    image = np.full((2, 2, 3), 100, np.uint8)
    first = np.array([[True, False], [False, False]])
    second = np.array([[False, True], [False, False]])
    out = overlay_masks(image, [first, second])
    # 0.5 * 100 + 0.5 * (230, 25, 75) = (165, 62.5, 87.5), rounded half to even: (165, 62, 88)
    assert out[0, 0].tolist() == [165, 62, 88]
    # second colour (60, 180, 75): (80, 140, 87.5) -> (80, 140, 88)
    assert out[0, 1].tolist() == [80, 140, 88]
    assert out[1].tolist() == [[100, 100, 100], [100, 100, 100]]


def test_eigenvector_figure_size_and_determinism(tmp_path):
    Image.fromarray(np.arange(60 * 80 * 3, dtype=np.uint32).reshape(60, 80, 3).astype(np.uint8)).save(
        tmp_path / "img.png")
    yy, xx = np.mgrid[0:30, 0:30]
    vec = np.cos(xx / 5.0) * np.sin(yy / 7.0)
    a = eigenvector_figure(tmp_path / "img.png", vec, tmp_path / "a.png", title="image 1")
    b = eigenvector_figure(tmp_path / "img.png", vec, tmp_path / "b.png", title="image 1")
    size, text = png_size_and_text(a)
    assert size == (800, 400) and "Software" not in text
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(FigureError, match="must be 2-D"):
        eigenvector_figure(tmp_path / "img.png", vec.ravel(), tmp_path / "c.png")


def colours(path: Path) -> set[tuple[int, int, int]]:
    with Image.open(path) as im:
        return {tuple(c) for c in np.asarray(im.convert("RGB")).reshape(-1, 3).tolist()}


def test_overlay_shows_the_truth_as_an_outline_the_prediction_filled_and_no_truth_when_sealed(tmp_path):
    (tmp_path / "images").mkdir()
    Image.fromarray(np.full((40, 40, 3), 100, np.uint8)).save(tmp_path / "images" / "1.png")
    truth = np.zeros((40, 40), bool)
    truth[10:30, 10:30] = True
    ann = {"images": [{"id": 1, "file_name": "1.png", "height": 40, "width": 40}],
           "categories": [{"id": 1, "name": "x"}],
           "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "segmentation": rle(truth), "iscrowd": 0,
                            "area": 400.0, "bbox": [10.0, 10.0, 20.0, 20.0]}]}
    (tmp_path / "ann.json").write_text(json.dumps(ann))
    pred = np.zeros((40, 40), bool)
    pred[:, :20] = True
    (tmp_path / "r.json").write_text(json.dumps([{"image_id": 1, "category_id": 1, "score": 1.0,
                                                   "segmentation": rle(pred)}]))
    out = mask_overlays(tmp_path / "images", tmp_path / "ann.json", {"ck": tmp_path / "r.json"},
                        tmp_path / "o.png", k=1, jaccard={"ck": {1: 33.3}})
    seen = colours(out)
    filled = tuple(int(v) for v in np.rint((1 - ALPHA) * 100 + ALPHA * 255 * np.asarray(PREDICTION_COLOUR)))
    assert filled in seen  # the prediction, blended over the grey image
    assert (100, 100, 100) in seen  # the image outside the prediction
    assert tuple(int(round(255 * c)) for c in TRUTH_COLOUR) in seen  # the truth's outline
    worst_best = gallery_figure(tmp_path / "images", tmp_path / "ann.json", tmp_path / "r.json", [1], [1],
                                {1: 33.3}, tmp_path / "g.png", "ck")
    assert png_size_and_text(worst_best)[0] == (200, 460) and worst_best.with_suffix(".pdf").is_file()

    # a sealed data set: the same tiles without any ground truth, the legend saying why
    sealed = mask_overlays(tmp_path / "images", tmp_path / "ann.json", {"ck": tmp_path / "r.json"},
                           tmp_path / "sealed.png", k=1, jaccard={"ck": {1: 33.3}}, truth=False)
    sealed_gallery = gallery_figure(tmp_path / "images", tmp_path / "ann.json", tmp_path / "r.json", [1], [1],
                                    {1: 33.3}, tmp_path / "sg.png", "ck", truth=False)
    for figure in (sealed, sealed_gallery):
        shown = colours(figure)
        assert filled in shown and (100, 100, 100) in shown
        assert tuple(int(round(255 * c)) for c in TRUTH_COLOUR) not in shown
    legends = {}
    for truth in (True, False):
        fig = Figure()
        overlays_module._legend(fig, truth)
        legends[truth] = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legends[True] == ["prediction (filled)", "ground truth (outline)", "crowd, ignored"]
    assert legends[False] == ["prediction (filled)", SEALED_LEGEND]


SWEEP = (
    "setting,value,ci_low,ci_high,n_images,dataset,tau,eps,foreground,split,component\n"
    "a,10.0,9,11,5,sel,0.1,1e-05,seed,mean,seed\n"
    "b,30.0,29,31,5,sel,0.2,1e-05,seed,mean,seed\n"
    "c,20.0,19,21,5,sel,0.1,1e-05,seed,mean,all\n"
    "d,25.0,24,26,5,sel,0.2,1e-05,seed,mean,all\n"
)


def test_sweep_heatmap_is_deterministic_and_needs_the_selected_setting(tmp_path):
    (tmp_path / "sweep.csv").write_text(SWEEP)
    a = sweep_heatmap(tmp_path / "sweep.csv", "b", tmp_path / "a.png")
    b = sweep_heatmap(tmp_path / "sweep.csv", "b", tmp_path / "b.png")
    assert a.read_bytes() == b.read_bytes()
    assert a.with_suffix(".pdf").read_bytes() == b.with_suffix(".pdf").read_bytes()
    assert colours(a) != colours(sweep_heatmap(tmp_path / "sweep.csv", "c", tmp_path / "c.png"))  # the mark moved
    with pytest.raises(FigureError, match="sweep.csv: the selected setting 'zz'"):
        sweep_heatmap(tmp_path / "sweep.csv", "zz", tmp_path / "z.png")


def test_agreement_scatter_is_deterministic(tmp_path):
    def m(v):
        return {"value": v, "ci_low": v - 1, "ci_high": v + 1}

    a, b = {"x": m(10.0), "y": m(20.0)}, {"x": m(50.0), "y": m(40.0)}
    entry = {"checkpoints": ["x", "y"], "tau": -1.0, "ci_low": -1.0, "ci_high": 1.0}
    one = agreement_scatter(a, b, entry, ("Jaccard", "probe mIoU"), "val", tmp_path / "s1.png")
    two = agreement_scatter(a, b, entry, ("Jaccard", "probe mIoU"), "val", tmp_path / "s2.png")
    assert png_size_and_text(one)[0] == (640, 400) and one.read_bytes() == two.read_bytes()


def test_eigenvector_of_a_patch14_network_is_drawn_on_its_34_grid_beside_a_476_px_image(tmp_path, monkeypatch):
    """The eigenvector job reads the keys' grid (34 x 34) from keys (1156, D) and the image side from the shard's
    meta.json (DINOv2 /14: 476); the figure shows the image at 476 x 476 beside the 34 x 34 map."""
    from types import SimpleNamespace

    import matplotlib.axes
    import yaml

    from decoders.ncut.settings import TOKENCUT
    from evaluate.jobs.ledger import eigenvector
    from evaluate.pixels.geometry import Geometry

    geometry = Geometry(patch=14, width=64)
    shard = tmp_path / "000"
    shard.mkdir()
    rng = np.random.default_rng(3)
    keys = rng.normal(size=(2, 34, 34, 64)).astype(np.float32)
    keys[:, 8:20, 10:25] += 2.5 * rng.normal(size=64).astype(np.float32)
    np.save(shard / "keys480.npy", keys.reshape(2, 34 * 34, 64))
    (shard / "meta.json").write_text(json.dumps(geometry.as_meta()))
    (tmp_path / "manifest.json").write_text(json.dumps({"image_ids": [4, 9], "shards": [[4, 9]]}))
    (tmp_path / "selected.yaml").write_text(yaml.safe_dump({"decoder": "ncut", "settings": TOKENCUT.to_dict()}))
    out = tmp_path / "eig.npz"
    smk = SimpleNamespace(
        input=SimpleNamespace(keys480=[str(shard / "keys480.npy")], meta=str(shard / "meta.json"),
                              manifest=str(tmp_path / "manifest.json"), selected=str(tmp_path / "selected.yaml")),
        params=SimpleNamespace(image=9), wildcards=SimpleNamespace(dataset="val"), output=[str(out)])
    eigenvector(smk)
    with np.load(out) as saved:
        assert int(saved["image_id"]) == 9 and saved["vector"].shape == (34, 34)
        assert int(saved["keys480_side"]) == geometry.keys480_side == 476
        vector, side = saved["vector"], int(saved["keys480_side"])

    shown = []
    real = matplotlib.axes.Axes.imshow
    monkeypatch.setattr(matplotlib.axes.Axes, "imshow",
                        lambda ax, x, **kw: shown.append(np.shape(x)) or real(ax, x, **kw))
    Image.fromarray(np.zeros((50, 70, 3), np.uint8)).save(tmp_path / "img.png")
    eigenvector_figure(tmp_path / "img.png", vector, tmp_path / "fig.png", side=side)
    assert shown == [(476, 476, 3), (34, 34)]
