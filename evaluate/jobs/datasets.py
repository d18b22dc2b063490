"""Jobs of workflow/rules/datasets.smk: every data set's manifest, whatever its kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def manifest(smk: Any) -> None:
    """List a data set (its kind's files, the labels' identity) and write its manifest: its images cut into shards,
    or its sequences (`evaluate.datasets.manifest.write_manifest`)."""
    spec: dict = dict(smk.params.dataset)
    roles: tuple[str, ...] = smk.params.run_time.roles  # run-time: giving a data set a role re-runs nothing
    shard_size = int(smk.params.shard_size)
    out = Path(smk.output.manifest)

    from evaluate.datasets.manifest import write_manifest

    write_manifest(spec=spec, roles=roles, shard_size=shard_size, out=out)
