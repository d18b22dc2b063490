"""The unsupervised-segmentation stage end to end through its entries (docs/design.md §18): the same clusters, the
same bytes and the same scores from two runs whose shards were extracted in opposite orders, and a record that says
what made its numbers."""

from __future__ import annotations

import json

import pytest

from evaluate.datasets.kinds import spec_of
from evaluate.datasets.manifest import write_manifest

CHECKPOINT = {"name": "dino", "run": "dino", "epoch": 1, "which": "teacher", "position_rule": None}
CLUSTERING = {"extra_clusters": 1, "seed": 0, "n_init": 2, "max_iter": 100}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """The demo's folder set of 4 scenes in shards of 2, listed by the one manifest writer, and a seeded DINO
    ViT-S/16."""
    from evaluate.demo.checkpoints import make_demo_checkpoint
    from evaluate.demo.semseg import make_demo_semseg

    work = tmp_path_factory.mktemp("semseg")
    root = make_demo_semseg(work / "shapes", n_images=4, seed=8)
    spec = spec_of("semseg", "shapes", "folder", images=str(root / "images"), labels=str(root / "labels"),
                   classes=str(root / "classes.txt"))
    write_manifest(spec=spec, roles=("eval",), shard_size=2, out=work / "manifest.json")
    checkpoint = make_demo_checkpoint(work / "dino.pth", fmt="dino-backbone", seed=0, architecture="vit-s16")
    return work, spec, checkpoint


def run(shapes, out, order, monkeypatch) -> tuple[bytes, dict, list[bytes]]:
    """A whole run of the stage into `out`, its shards extracted in `order`: (fit.json's bytes, the record, the
    maps' bytes)."""
    from evaluate.ledger.scoring import Scoring
    from evaluate.semseg.protocol import fit, predict, read_shard, score

    work, spec, checkpoint = shapes
    monkeypatch.chdir(out)  # the run's ledger: results/ledger under it
    for shard in order:
        read_shard(checkpoint=CHECKPOINT, checkpoint_file=checkpoint, spec=spec, manifest_file=work / "manifest.json",
                   shard=shard, out_dir=out / "features" / shard, features={"device": "cpu"})
    shards = [out / "features" / s for s in ("000", "001")]
    fit(spec=spec, clustering=CLUSTERING, shard_dirs=shards, threads=2, out=out / "fit.json")
    maps = [path for s in ("000", "001") for path in predict(fit_file=out / "fit.json", shard_dir=out / "features" / s,
                                                               out_dir=out / "maps" / s)]
    scoring = Scoring(checkpoint="dino", run="dino", epoch=1, features_meta=shards[0] / "meta.json",
                      dataset="shapes", sealed=False, budget=None, config_hash="test")
    record = score(scoring, spec=spec, manifest_file=work / "manifest.json", fit_file=out / "fit.json",
                   map_dirs=[out / "maps" / s for s in ("000", "001")], resamples=100, seed=0, code="test",
                   out_record=out / "record.json")
    return (out / "fit.json").read_bytes(), record, [p.read_bytes() for p in maps]


def test_two_runs_whose_shards_were_extracted_in_opposite_orders_give_the_same_clusters_bytes_and_scores(
        shapes, tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = run(shapes, tmp_path / "a", ["000", "001"], monkeypatch)
    second = run(shapes, tmp_path / "b", ["001", "000"], monkeypatch)
    assert first[0] == second[0]  # the fit, centres to the bit
    assert first[2] == second[2] and len(first[2]) == 4  # every map
    assert first[1]["measures"] == second[1]["measures"]
    record = first[1]
    fitted = json.loads(first[0])
    assert (fitted["k"], fitted["n_tokens"], record["fit"]["centres_sha256"]) == (5, 4 * 20 * 20,
                                                                                 fitted["centres_sha256"])
    assert (record["kind"], record["reading"], record["decoder"], record["setting"]) == (
        "semseg", "tokens320", "spherical-kmeans", "k=5,seed=0,n_init=2,iter=100")
    assert record["form"] == "released"  # tokens320 fixes the form, whatever features.form would say
    assert [m["measure"] for m in record["measures"]] == ["unsup_miou", "unsup_acc"]
    assert set(record["cluster_to_class"]) == {0, 1, 2, 3} and sum(record["hungarian"]) == 4  # the fifth: by majority
    assert len(record["figure_images"]) == 4 and all("truth" in e for e in record["figure_images"])


def test_more_clusters_than_an_8_bit_map_holds_are_refused_before_the_fit(shapes):
    """The folder set's 4 classes + 252 extra make 256 clusters, the most a cluster map holds; 253 extra, 257, are
    refused naming the key, before any token is read."""
    from evaluate import ConfigError
    from evaluate.semseg.protocol import cluster_settings

    _, spec, _ = shapes
    assert cluster_settings(spec, {**CLUSTERING, "extra_clusters": 252}).k == 256
    with pytest.raises(ConfigError) as refused:
        cluster_settings(spec, {**CLUSTERING, "extra_clusters": 253})
    assert str(refused.value) == ("semseg.shapes.extra_clusters: 4 classes + 253 make 257 clusters, more than an "
                                  "8-bit cluster map holds (256)")

