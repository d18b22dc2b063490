"""The measure catalogue: every measure the tool reports, once (names, units, display names, order, which way is
better). The ledger checks a record's measures against it, and the tables, figures and report read it; nothing
else spells a measure's display name, unit, place or direction. A new measure is one entry here.

An entry (`Measure`): `name` as records and scores.csv spell it; `plain` (Markdown, HTML, figures) and `latex`
display names; `unit` ("percent", or "nats" for the attention entropy); `better` ("higher", "lower", or
"neither" for a measure that describes a checkpoint rather than scores it: no bold best either way); `digits`,
the decimals shown. `CATALOGUE` is in the tables' column order.

Variants: a measure of TokenCut's saliency reading scored after the bilateral solver is its name with the suffix
`BS_SUFFIX` ("+ BS" in its display names), an entry of its own (`with_suffix`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from evaluate.scores import ScoreError

BS_SUFFIX = "_bs"  # the measures of the bilateral solver's output ("+ BS" rows): each saliency name with this suffix
DIGITS = 1  # decimals of a percentage in Markdown, HTML and LaTeX (CSV keeps full precision)


@dataclass(frozen=True)
class Measure:
    """One measure: name, display names (plain, LaTeX), unit, which way is better, decimals shown."""

    name: str
    plain: str
    latex: str
    unit: str = "percent"
    better: str = "higher"
    digits: int = DIGITS

    @property
    def marks_best(self) -> bool:
        """Whether a column of it marks a best value (in bold): the highest, for a measure better when higher."""
        return self.better == "higher"


def with_suffix(measure: Measure, suffix: str, plain: str, latex: str) -> Measure:
    """A variant of `measure`: its name + `suffix`, its display names + `plain` / `latex`."""
    return replace(measure, name=measure.name + suffix, plain=measure.plain + plain, latex=measure.latex + latex)


# saliency (docs/design.md §16): TokenCut's three, PySODMetrics' four
SALIENCY = (
    Measure("saliency_iou", "IoU", "IoU"),
    Measure("saliency_accuracy", "accuracy", "accuracy"),
    Measure("saliency_maxf", "maxF", r"max$F_\beta$"),
    Measure("sod_maxf", "SOD maxF", r"SOD max$F_\beta$"),
    Measure("sod_mae", "SOD MAE", "SOD MAE", better="lower"),
    Measure("sod_smeasure", "SOD S", r"SOD $S_\alpha$"),
    Measure("sod_emeasure", "SOD E", r"SOD $E_\phi$"),
)

CATALOGUE: tuple[Measure, ...] = (
    # the label-free decoder's masks (§6) and object discovery's boxes (§15)
    Measure("jaccard", "Jaccard", "Jaccard"),
    Measure("corloc", "CorLoc", "CorLoc"),
    Measure("corloc_box", "CorLoc (box)", "CorLoc (box)"),
    *SALIENCY,
    *(with_suffix(m, BS_SUFFIX, " + BS", " + BS") for m in SALIENCY),
    Measure("ap", "AP", "AP"),
    Measure("ap50", "AP50", "AP$_{50}$"),
    Measure("ar10", "AR@10", "AR@10"),
    # the linear probe (§6)
    Measure("probe_miou", "probe mIoU", "probe mIoU"),
    Measure("probe_accuracy", "probe accuracy", "probe accuracy"),
    # DINO's class-token attention masks against VOC12's objects (§17): the best head per object, the heads' mean
    Measure("attention_mask_jaccard", "attention-mask Jaccard", "attention-mask Jaccard"),
    Measure("attention_mask_jaccard_heads", "attention-mask Jaccard (heads' mean)",
            "attention-mask Jaccard (heads' mean)"),
    # unsupervised semantic segmentation (§18): the clusters matched to the classes once for the whole set
    Measure("unsup_miou", "unsup. mIoU", "unsup.\\ mIoU"),
    Measure("unsup_acc", "unsup. accuracy", "unsup.\\ accuracy"),
    # the attention spread (§13): a description of the checkpoint, not a score
    Measure("attention_spread", "attention spread", "attention spread", better="neither"),
    Measure("attention_entropy", "attention entropy", "attention entropy", unit="nats", better="neither", digits=2),
    # DAVIS label propagation (§10)
    Measure("jf_mean", "J&F", r"$\mathcal{J}\&\mathcal{F}$"),
    Measure("j_mean", "J", r"$\mathcal{J}$"),
    Measure("f_mean", "F", r"$\mathcal{F}$"),
    Measure("j_recall", "J recall", r"$\mathcal{J}$ recall"),
    Measure("f_recall", "F recall", r"$\mathcal{F}$ recall"),
    Measure("j_decay", "J decay", r"$\mathcal{J}$ decay", better="lower"),
    Measure("f_decay", "F decay", r"$\mathcal{F}$ decay", better="lower"),
)

BY_NAME: dict[str, Measure] = {m.name: m for m in CATALOGUE}
ORDER: tuple[str, ...] = tuple(BY_NAME)
SALIENCY_NAMES: tuple[str, ...] = tuple(m.name for m in SALIENCY)


def measure(name: str) -> Measure:
    """The catalogue's entry of `name`; ScoreError naming the measure when it has none."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ScoreError(f"measure {name!r} is not in the measure catalogue (evaluate/scores/catalogue.py): add its "
                         "entry there") from None


def known(name: str) -> bool:
    """Whether `name` has an entry."""
    return name in BY_NAME


def place(name: str) -> int:
    """Its position in the tables' column order (an unknown name after every known one)."""
    return ORDER.index(name) if name in BY_NAME else len(ORDER)


def plain(name: str) -> str:
    """Its plain display name (the name itself where the catalogue has no entry: a record of an older release)."""
    return BY_NAME[name].plain if name in BY_NAME else name


def describes(name: str) -> bool:
    """Whether it describes a checkpoint rather than scores it (no best; absent, not missing, where not measured)."""
    return name in BY_NAME and BY_NAME[name].better == "neither"
