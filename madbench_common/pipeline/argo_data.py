"""Compile ``workflows/data.yaml``: the one-off Argo workflow that fills the data volume.

It runs ``madbench data fetch --dataset <name> --dest /data`` once per chosen data set of
``madbench_common/data/paper_data.yaml`` (DEMAND and EMIS by default), with the pod rules
of ``workflows/weights.yaml`` (:mod:`.argo_weights`) and the ``madbench-data`` volume
read-write; ``workflows/deaf.yaml`` then mounts it read-only. The fetch pods run the base
image, which ships ``paper_data.yaml``: after pinning, rebuild the bases first. Usage is in
the README (The data volume).
"""

from __future__ import annotations

import json
from pathlib import Path

from hera.workflows import models as m

from madbench_common.pipeline.argo import ClusterProfile, ImageLock, workflow_yaml
from madbench_common.pipeline.argo_weights import (
    fetch_parameters,
    fetch_template,
    fetch_workflow,
    write_workflow,
)
from madbench_common.pipeline.paper_data import DATA_ROOT, load_spec

__all__ = ["compile_data_workflow", "render_data_workflow"]

_SCRATCH = "/tmp"


def _env() -> list[m.EnvVar]:
    plain = {"HOME": _SCRATCH, "TMPDIR": _SCRATCH, "XDG_CACHE_HOME": f"{_SCRATCH}/.cache",
             "PYTHONUNBUFFERED": "1"}
    return [m.EnvVar(name=k, value=v) for k, v in plain.items()]


def compile_data_workflow(lock: ImageLock, profile: ClusterProfile,
                          datasets: list[str] | None = None) -> m.Workflow:
    """The data workflow (``datasets``: the default of its ``datasets`` parameter)."""
    chosen = list(load_spec().datasets) if datasets is None else datasets
    params = fetch_parameters(
        lock, "data", "paper_data.yaml",
        m.Parameter(name="datasets", value=json.dumps(chosen),
                    description="JSON list of data sets of madbench_common/data/"
                                "paper_data.yaml to fetch"),
        "true: fetch data sets with unpinned files or an unverified licence (the digests "
        "found are recorded in each data set's lock); false: refuse them (exit 3)")
    return fetch_workflow(
        "data", "one-off: fill the madbench-data volume with the paper's data sets "
        "(DEMAND, EMIS)", params,
        fetch_template("data", "dataset", _env(), "data", DATA_ROOT, ("1Gi", "2Gi")),
        profile, profile.data_claim, scratch_gib=5)


def render_data_workflow(lock: ImageLock, profile: ClusterProfile, out_dir: str | Path,
                         check: bool = False) -> list[Path]:
    """Write (or, with ``check``, compare) ``<out_dir>/data.yaml``; returns it if changed."""
    return write_workflow(Path(out_dir) / "data.yaml",
                          workflow_yaml(compile_data_workflow(lock, profile),
                                        "madbench_common/pipeline/argo_data.py"), check)
