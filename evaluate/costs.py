"""What an experiment costs before it runs: the openings of each data set's labels against a sealed data set's budget,
the jobs of each rule, the features it writes to disk. Pure: the caller lists the data sets, reads the openings ledger
and says which outputs exist (`evaluate.check` for `make check`; `workflow/rules/common.smk` for the refusal before
any job).

One opening is one job reading a data set's labels: one row of `results/ledger/openings.csv` (docs/ledger.md). What
each reading spends, decided here (`OPENINGS`) and nowhere else:

    selection     1 per run: the decoder's settings scored on the select set with the reference checkpoint
    decoder       1 per checkpoint and eval set (only when a select set chose the decoder's setting)
    probe-train   1 per checkpoint, on the probe-train set
    probe         1 per checkpoint and eval set the probe scores (not `probe: false`)
    video         1 per checkpoint and video set; propagation reads the first frames' masks, the protocol's given
                  input, which is recorded but never counted (`evaluate.ledger.openings.UNCOUNTED`)
    discovery     1 per checkpoint, box decoder and discovery set
    saliency      1 per checkpoint and saliency set
    attention-masks  1 per checkpoint and segmentation set (none for a network without a class token: an upper
                  bound, since the network is known only once its file is read)
    semseg        1 per checkpoint and semseg set (fitting the clusters reads no label)
    attention     0: the attention spread reads no label

A scoring whose output already exists (its record, or the probe's weights) opens nothing: Snakemake does not re-run
it, and a re-run on the same inputs reuses its record (`evaluate.ledger.reuse`). So a run needs one opening per
scoring whose output is missing, and a sealed data set refuses the run when the openings already spent (every
counted row of openings.csv, failed and interrupted ones too) and those it needs exceed its budget. That is a lower
bound: a scoring re-run because its inputs changed opens again, and the job's own check (`evaluate.ledger.openings`)
still refuses the opening past the budget.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evaluate import ConfigError
from evaluate.ledger.openings import UNCOUNTED
from evaluate.plumbing import paths

if TYPE_CHECKING:
    from evaluate.experiment import Experiment
    from evaluate.pixels.geometry import Geometry

OPENINGS = {  # openings of a data set's labels per scoring, by reading (module docstring)
    "selection": 1,
    "decoder": 1,
    "probe-train": 1,
    "probe": 1,
    "video": 1,
    "propagation": 0,
    "discovery": 1,
    "saliency": 1,
    "attention-masks": 1,
    "semseg": 1,
    "attention": 0,
}
DTYPE_BYTES = {"float16": 2, "float32": 4}
INPUT_BYTES = 480 * 480 * 3 + 224 * 224 * 3  # a shard's decoded inputs per image (uint8; evaluate.readings.inputs)


@dataclass(frozen=True)
class LabelUse:
    """One scoring that reads a data set's labels: the reading it scores (a key of `OPENINGS`), the checkpoint, and
    the file it writes (a scoring whose file exists opens nothing)."""

    dataset: str
    reading: str
    checkpoint: str
    output: str

    @property
    def openings(self) -> int:
        return OPENINGS[self.reading]


def label_uses(exp: Experiment) -> list[LabelUse]:
    """Every scoring of the experiment that reads labels (the readings of `OPENINGS` that spend none left out)."""
    uses = []
    checkpoints = list(exp.checkpoints)
    select, train = exp.select_dataset, exp.probe_train_dataset
    if select:
        reference = exp.reference_checkpoint
        uses.append(LabelUse(select, "selection", reference,
                             paths.SWEEP_RECORD.format(checkpoint=reference, dataset=select)))
        uses += [LabelUse(d, "decoder", c, paths.DECODER_RECORD.format(checkpoint=c, dataset=d))
                 for c in checkpoints for d in exp.by_role("eval")]
    if train:
        uses += [LabelUse(train, "probe-train", c, paths.PROBE_WEIGHTS.format(checkpoint=c)) for c in checkpoints]
        uses += [LabelUse(d, "probe", c, paths.PROBE_RECORD.format(checkpoint=c, dataset=d))
                 for c in checkpoints for d in exp.probe_eval_datasets]
    uses += [LabelUse(d, "video", c, paths.VIDEO_RECORD.format(checkpoint=c, dataset=d))
             for c in checkpoints for d in exp.section("videos")]
    uses += [LabelUse(d, "discovery", c, paths.DISCOVERY_RECORD.format(decoder=b, checkpoint=c, dataset=d))
             for b in exp.box_decoders for c in checkpoints for d in exp.section("discovery")]
    uses += [LabelUse(d, "saliency", c, paths.SALIENCY_RECORD.format(checkpoint=c, dataset=d))
             for c in checkpoints for d in exp.section("saliency")]
    uses += [LabelUse(d, "attention-masks", c, paths.ATTENTION_MASKS_RECORD.format(checkpoint=c, dataset=d))
             for c in checkpoints for d in exp.section("segmentation")]
    uses += [LabelUse(d, "semseg", c, paths.SEMSEG_RECORD.format(checkpoint=c, dataset=d))
             for c in checkpoints for d in exp.section("semseg")]
    return [use for use in uses if use.openings]


def spent_openings(rows: Iterable[Mapping[str, str]]) -> Counter:
    """Openings already spent per data set: the rows of openings.csv a budget counts."""
    return Counter(row["dataset"] for row in rows if row["purpose"] not in UNCOUNTED)


@dataclass(frozen=True)
class Budget:
    """A data set's labels against its budget: where it is configured (`section.name` of the experiment file
    `source`), its seal and budget (None: unlimited), the openings already spent, and those the run needs by
    reading."""

    dataset: str
    where: str
    source: str
    sealed: bool
    budget: int | None
    spent: int
    needed_by_reading: dict[str, int] = field(default_factory=dict)

    @property
    def needed(self) -> int:
        return sum(self.needed_by_reading.values())

    @property
    def over(self) -> bool:
        """A sealed data set whose spent and needed openings exceed its budget."""
        return self.sealed and self.budget is not None and self.spent + self.needed > self.budget

    @property
    def left(self) -> int | None:
        """The budget left once the run is done (negative: over); None when unlimited."""
        return None if not self.sealed or self.budget is None else self.budget - self.spent - self.needed

    def refusal(self) -> str:
        """One line: the data set, the openings needed, the budget, and how to raise it."""
        readings = ", ".join(f"{reading} {n}" for reading, n in self.needed_by_reading.items() if n)
        return (f"{self.source}: {self.where} is sealed with budget {self.budget}, but this run needs {self.needed} "
                f"opening(s) of its labels ({readings}) and {self.spent} were spent before: raise {self.where}.budget "
                f"to at least {self.spent + self.needed} (the raise is recorded in {paths.OPENINGS}; docs/ledger.md "
                "says what each reading spends), or score fewer checkpoints")


def budgets(exp: Experiment, spent: Mapping[str, int], done: Container[str]) -> list[Budget]:
    """Every data set whose labels the experiment reads, in the config's order: spent (`spent_openings`), the
    openings needed by the scorings whose output is not in `done`."""
    needed: dict[str, Counter] = {name: Counter() for name in exp.datasets}
    for use in label_uses(exp):
        needed[use.dataset][use.reading] += 0 if use.output in done else use.openings
    return [Budget(dataset=name, where=f"{d.section}.{name}", source=exp.source, sealed=d.sealed, budget=d.budget,
                   spent=int(spent.get(name, 0)), needed_by_reading=dict(needed[name]))
            for name, d in exp.datasets.items() if needed[name] or spent.get(name)]


def refuse_over_budget(found: Iterable[Budget]) -> None:
    """ConfigError naming the first sealed data set whose budget the run would exceed (`Budget.refusal`)."""
    for budget in found:
        if budget.over:
            raise ConfigError(budget.refusal())


def jobs_per_rule(exp: Experiment, units: Mapping[str, int]) -> dict[str, int]:
    """The jobs of every rule in a fresh run of the experiment, by rule name (rules without a job left out).

    units: per data set, its shards (images cut by `features.shard_size`), or its sequences for a video set.
    """
    config, checkpoints = exp.config, len(exp.checkpoints)
    coco, evals = list(exp.section("datasets")), exp.by_role("eval")
    select, train = exp.select_dataset, exp.probe_train_dataset
    videos, boxes, saliency = exp.section("videos"), exp.section("discovery"), exp.section("saliency")
    segmentation, semseg = exp.section("segmentation"), exp.section("semseg")
    fitted = {exp.fit_set(name) for name in semseg}  # each set whose clusters are fitted

    def shards(names: Iterable[str]) -> int:
        return sum(units[name] for name in names)

    attention = bool(config.get("attention", True)) and bool(evals)
    jobs = {
        "demo_dataset": sum(1 for d in exp.datasets.values() if d.demo is not None),
        "demo_checkpoint": sum(1 for c in exp.checkpoints.values() if c.demo is not None),
        "manifest": len(exp.datasets),
        "preprocess": shards(coco),
        "extract": checkpoints * shards(coco),
        "sweep_decode": units[select] if select else 0,
        "select_setting": 1 if select else 0,
        "decode": checkpoints * shards(evals) if select else 0,
        "merge_masks": checkpoints * len(evals) if select else 0,
        "score_decoder": checkpoints * len(evals) if select else 0,
        "train_probe": checkpoints if train else 0,
        "score_probe": checkpoints * len(exp.probe_eval_datasets),
        "attention_shard": checkpoints * shards(evals) if attention else 0,
        "attention_record": checkpoints * len(evals) if attention else 0,
        "attention_rows": checkpoints if attention else 0,
        "propagate": checkpoints * shards(videos),
        "score_video": checkpoints * len(videos),
        "extract_native": checkpoints * shards(boxes),
        "discover_boxes": checkpoints * shards(boxes),
        "score_discovery": checkpoints * len(exp.box_decoders) * len(boxes),
        "read_saliency": checkpoints * shards(saliency),
        "score_saliency": checkpoints * len(saliency),
        "read_cls_attention": checkpoints * shards(segmentation),
        "score_attention_masks": checkpoints * len(segmentation),
        "extract_tokens320": checkpoints * shards(semseg),
        "fit_clusters": checkpoints * len(fitted),
        "predict_clusters": checkpoints * shards(semseg),
        "score_semseg": checkpoints * len(semseg),
        "eigenvector": 1 if select and evals else 0,
    }
    if any(label_uses(exp)) or attention:
        jobs.update(scores=1, tables=1, figures=1, html_report=1)
    jobs["all"] = 1
    return {rule: n for rule, n in jobs.items() if n}


@dataclass(frozen=True)
class Disk:
    """Bytes the run writes to disk, by what they are: keys480 + tokens224 of every checkpoint on every `datasets:`
    image, keys-native on every discovery image, tokens320 (float32) on every semseg image, and each `datasets:`
    image's decoded inputs (shared by the checkpoints); `kept`: whether keys480 and tokens224 stay once used
    (`features.keep`)."""

    features: int
    native: int
    inputs: int
    kept: bool
    tokens320: int = 0

    @property
    def total(self) -> int:
        return self.features + self.native + self.inputs + self.tokens320


def disk(exp: Experiment, images: Mapping[str, int], geometries: Mapping[str, Geometry],
         native_patches: Mapping[tuple[str, int], int]) -> Disk:
    """The features' bytes on disk, from their shapes and `features.dtype`.

    images: per data set of `datasets:` and `semseg:`, its image count; geometries: per checkpoint, its network's
    geometry;
    native_patches: per (discovery data set, patch size), the sum over its images of ceil(H / p) * ceil(W / p).
    """
    from evaluate.pixels.tokens320 import tokens320_grid

    dtype = DTYPE_BYTES[exp.config["features"]["dtype"]]
    coco_images = sum(images[name] for name in exp.section("datasets"))
    semseg_images = sum(images[name] for name in exp.section("semseg"))
    features = native = tokens320 = 0
    for name in exp.checkpoints:
        geometry = geometries[name]
        per_image = sum(rows * width for rows, width in geometry.kinds.values()) * dtype
        features += coco_images * per_image
        native += sum(native_patches[(d, geometry.patch)] for d in exp.section("discovery")) * geometry.width * dtype
        grid = tokens320_grid(geometry.patch)
        tokens320 += semseg_images * grid * grid * geometry.width * DTYPE_BYTES["float32"]
    return Disk(features=features, native=native, inputs=coco_images * INPUT_BYTES, tokens320=tokens320,
                kept=bool(exp.config["features"].get("keep", True)))
