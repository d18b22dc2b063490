"""The one table of data-set kinds (`KINDS`): where each kind's config entries live, which of their fields say where
it is, which readings it feeds, which callable opens it and which draws it for the demo. Read by the experiment's
checks (`evaluate.experiment`) in the workflow's own process; no job imports it (a data set's spec carries its
opener: `evaluate.datasets.open_dataset`). Imports nothing but the errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluate import ConfigError


@dataclass(frozen=True)
class Kind:
    """One kind of data set.

    section: the config section its entries live in; name: its `kind:` there (the section's only kind where the
    entry names none); opener: "module:callable" taking the spec; readings: what it feeds; fields: the entry's fields
    that say where it lives (paths and its own settings), carried in the spec; needs: the groups of path fields an
    entry gives (exactly one group, whole); demo: "module:callable" drawing a demo set into a folder from the entry's
    `demo:` values ("" where the demo draws none).
    """

    section: str
    name: str
    opener: str
    readings: tuple[str, ...]
    fields: tuple[str, ...]
    needs: tuple[tuple[str, ...], ...]
    demo: str


KINDS: tuple[Kind, ...] = (
    Kind("datasets", "coco", "evaluate.datasets.coco:CocoDataset.from_spec", ("keys480", "tokens224"),
         ("images", "annotations"), (("images", "annotations"),), "evaluate.demo.scenes:make_demo_dataset"),
    Kind("videos", "davis", "evaluate.datasets.davis:DavisDataset.from_spec", ("frames480",),
         ("root", "resolution", "sequences_file"), (("root",),), "evaluate.demo.videos:make_demo_videos"),
    Kind("discovery", "voc", "evaluate.datasets.boxes:VocBoxes.from_spec", ("keys-native",),
         ("root", "split", "benchmark"), (("root",),), "evaluate.demo.discovery:make_demo_voc"),
    Kind("discovery", "coco-boxes", "evaluate.datasets.boxes:CocoBoxes.from_spec", ("keys-native",),
         ("images", "annotations", "image_list", "benchmark"), (("images", "annotations"),), ""),
    Kind("saliency", "saliency", "evaluate.datasets.saliency:SaliencySet.from_spec", ("saliency",),
         ("root", "images", "masks", "benchmark", "bilateral"), (("root",), ("images", "masks")),
         "evaluate.demo.saliency:make_demo_saliency"),
    Kind("segmentation", "voc", "evaluate.datasets.voc_segmentation:VocSegmentation.from_spec", ("cls-attention",),
         ("root", "split", "benchmark"), (("root",),), "evaluate.demo.segmentation:make_demo_voc_segmentation"),
    Kind("semseg", "cocostuff", "evaluate.datasets.cocostuff:CocoStuffSet.from_spec", ("tokens320",),
         ("root", "split", "images", "labels", "list", "benchmark"), (("root",), ("images", "labels", "list")), ""),
    Kind("semseg", "cityscapes", "evaluate.datasets.cityscapes:CityscapesSet.from_spec", ("tokens320",),
         ("root", "split", "labels", "benchmark"), (("root",),), ""),
    Kind("semseg", "potsdam", "evaluate.datasets.potsdam:PotsdamSet.from_spec", ("tokens320",), ("root", "benchmark"),
         (("root",),), ""),
    Kind("semseg", "folder", "evaluate.datasets.label_folder:LabelFolderSet.from_spec", ("tokens320",),
         ("root", "split", "images", "labels", "classes", "benchmark"), (("root", "classes"),
                                                                         ("images", "labels", "classes")),
         "evaluate.demo.semseg:make_demo_semseg"),
)
SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(k.section for k in KINDS))


def kinds_of(section: str) -> dict[str, Kind]:
    """The kinds a config section holds, by name."""
    return {k.name: k for k in KINDS if k.section == section}


def kind_of(section: str, name: str | None) -> Kind:
    """The kind of an entry of `section` naming `name` (None: the section's only kind); ConfigError otherwise."""
    kinds = kinds_of(section)
    if name is None and len(kinds) == 1:
        return next(iter(kinds.values()))
    if name not in kinds:
        raise ConfigError(f"{section}: kind {name!r} is not one of {', '.join(kinds)}")
    return kinds[name]


def spec_of(section: str, name: str, kind: str | None = None, **fields: object) -> dict:
    """A data set's spec as its jobs are handed it (`evaluate.plumbing.config.DataSet.spec`), from a section, a name,
    a kind (None: the section's only one) and the entry's fields (absent ones None): for code that opens a data
    set outside the workflow (tests, benches)."""
    entry = kind_of(section, kind)
    unknown = set(fields) - set(entry.fields)
    if unknown:
        raise ConfigError(f"{section}.{name}: kind {entry.name} has no field(s) {', '.join(sorted(unknown))}")
    return {"name": name, "section": section, "kind": entry.name, "opener": entry.opener,
            **{field: fields.get(field) for field in entry.fields}}
