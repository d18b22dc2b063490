"""The one reading runner: every stage reads a shard through it (docs/design.md §3, §8).

`run_reading(reading, body, ...)` loads the checkpoint's network in the form the reading needs (the reading's own,
where its protocol fixes one, else the config's `features.form`: decided once, here), opens the data set and the
shard's images (or the one sequence of a video set) from the manifest, runs the reading's `body` on them, and writes
the shard's meta file last, with the file's identity (checkpoint sha256, format, architecture, form, geometry), the
data set's manifest, the device, the precision, the code and library versions, and what the body reports. The body
writes its own arrays, each atomically (`evaluate.plumbing.atomic`): the meta file's presence marks a complete
shard, so a shard whose body failed or was killed is never taken for done.

A reading module declares a `Reading`: its name, the form, precision and device its protocol fixes (None: the
config's), and its geometry in its docstring (what size the image becomes, which grid the network reads). Its
`body(shard: Shard) -> dict` does the reading. `write_meta` is the runner's last step, also used where a network
is already loaded (benches, tests, a bench's reference).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Sequence

from evaluate import ConfigError

log = logging.getLogger("evaluate.readings.runner")


@dataclass(frozen=True)
class Reading:
    """A reading: `name` (recorded in meta.json and every record made from it); `form`, `precision`: what its
    protocol fixes (None: the config's `features.form`, `features.precision`); `cpu`: it runs on the CPU whatever
    `features.device` says."""

    name: str
    form: str | None = None
    precision: str | None = None
    cpu: bool = False

    def network_form(self, features: dict) -> str:
        """The network's form for this reading: its protocol's, else `features.form`."""
        return self.form or str(features["form"])


@dataclass
class Shard:
    """What a reading's body is handed: the network (`model`, eval mode, on `device`; `loaded`, its
    `evaluate.networks.checkpoints.LoadedCheckpoint`), the data set (`spec`; `dataset`, opened when first asked
    for: a body that reads stored inputs never parses the annotations) and its `manifest`, the shard's `name` and
    `units` (its image ids, or the sequence of a video set), where the network runs (`device`, `precision`) and the
    config's `features` section."""

    model: Any
    loaded: Any
    spec: dict
    manifest: dict
    manifest_file: Path
    name: str
    units: list
    device: str
    precision: str
    features: dict

    @cached_property
    def dataset(self) -> Any:
        """The data set, opened now and checked to be the one the manifest lists."""
        from evaluate.datasets import open_dataset
        from evaluate.datasets.manifest import check_listed

        return check_listed(open_dataset(self.spec), self.manifest, self.manifest_file)


def resolve_device(device: str) -> str:
    """config `features.device` -> a torch device: `auto` is "cuda" where a CUDA device is present, else "cpu"."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"features.device is {device!r} but no CUDA device is available here")
    return device


def network_identity(model: Any) -> dict:
    """What a meta file says of the network that ran: its form and geometry (patch, width, depth, registers)."""
    return {"form": model.form, **model.geometry.as_meta()}


def write_meta(meta_path: str | os.PathLike, body: Callable[[], dict], *, identity: dict) -> dict:
    """Run `body` (it writes the reading's arrays, each atomically, and returns what it reports), then write
    `meta_path` last: `identity`, the body's report, the code and library versions. An old meta file is removed
    first (it would vouch for the arrays about to be replaced). Returns the meta."""
    from evaluate.plumbing.atomic import write_json
    from evaluate.plumbing.provenance import code_version, library_versions

    meta_path = Path(meta_path)
    with contextlib.suppress(FileNotFoundError):
        meta_path.unlink()
    report = body()
    meta = {**identity, **report, "code_version": code_version(), "library_versions": library_versions()}
    write_json(meta_path, meta)
    return meta


def run_reading(reading: Reading, body: Callable[[Shard], dict], *, checkpoint: dict,
                checkpoint_file: str | os.PathLike, spec: dict, manifest_file: str | os.PathLike, shard: str,
                meta_out: str | os.PathLike, features: dict, units: Sequence | None = None) -> dict:
    """Read one shard of a data set with one checkpoint (module docstring); returns the meta written to `meta_out`.

    checkpoint: its params (name, which network, position rule: `evaluate.plumbing.config.Checkpoint.params`);
    spec: the data set's (`evaluate.plumbing.config.DataSet.spec`); shard: the manifest's shard ("000", ...) or, for
    a video set, the sequence's name; features: what the reading's rule hands it of the config's `features`: `form`,
    `precision` and `device` where the reading does not fix them, and whatever its body reads (batch size, dtype);
    units: the images to read where they are not a shard of the manifest (one image of a figure).
    """
    from evaluate.datasets.manifest import shard_image_ids
    from evaluate.networks.checkpoints import load_backbone
    from evaluate.plumbing.atomic import read_json

    manifest_file = Path(manifest_file)
    manifest = read_json(manifest_file)
    if units is None:
        units = shard_image_ids(manifest, shard, manifest_file) if "shards" in manifest else [shard]
    loaded = load_backbone(checkpoint_file, which=checkpoint["which"], form=reading.network_form(features),
                           position_rule=checkpoint["position_rule"])
    device = "cpu" if reading.cpu else resolve_device(str(features["device"]))
    precision = reading.precision or str(features["precision"])
    model = loaded.model.to(device).eval()
    identity = {"checkpoint": checkpoint["name"], **loaded.file_meta(), "dataset": spec["name"],
                "manifest_sha256": manifest["manifest_sha256"], "shard": shard, "reading": reading.name,
                **network_identity(model), "device": device, "precision": precision}
    run = Shard(model=model, loaded=loaded, spec=dict(spec), manifest=manifest, manifest_file=manifest_file,
                name=shard, units=list(units), device=device, precision=precision, features=dict(features))
    log.info("%s of %s on %s, shard %s: %d unit(s), %s form, %s on %s", reading.name, checkpoint["name"],
             spec["name"], shard, len(run.units), model.form, precision, device)
    return write_meta(meta_out, lambda: body(run), identity=identity)
