"""Where a local execution of a workflow departs from what Argo would do on a cluster.

The rehearsal runs the rendered workflows themselves, but forces every ``<stage>_shards``
parameter to the profile's count, runs GPU pods on the CPU with their deadlines scaled,
caps the pods running at once, and has no scheduler, garbage collector or RBAC. Nothing
of that may be silent: :func:`relaxations` lists each departure that applies, with what
Argo does instead, so that the record of a pass states it. Not relaxations: scheduling
after a failure and the DAG's phase follow Argo's controller
(:mod:`madbench_common.cluster.argo_local`); ``stop_on_failure`` is stricter, and listed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from madbench_common.cluster.argo_local import CLUSTER_ONLY, Workflow

__all__ = ["Relaxation", "relaxations"]


@dataclass(frozen=True)
class Relaxation:
    """One departure from Argo: its name, what the local execution did, what a cluster
    does, and the values concerned."""

    name: str
    local: str
    argo: str
    detail: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _gpu_templates(wf: Workflow) -> list[str]:
    out = []
    for name, t in wf.templates.items():
        limits = ((t.get("container") or {}).get("resources") or {}).get("limits") or {}
        if "nvidia.com/gpu" in limits:
            out.append(name)
    return sorted(out)


def relaxations(wf: Workflow, params: Mapping[str, Any], *, cpu_deadline_scale: float = 1.0,
                workers: int | None = None, stop_on_failure: bool = False,
                backoff_scale: float = 1.0, gpu_on_cpu: bool = True) -> list[Relaxation]:
    """The departures from Argo of executing ``wf`` with ``params`` (the ``argo submit
    -p`` values) as the rehearsal does. ``cpu_deadline_scale``: what a GPU pod's
    ``activeDeadlineSeconds`` is multiplied by; ``workers``: pods at once;
    ``gpu_on_cpu``: the engine passes no GPU."""
    declared = wf.parameters()
    out: list[Relaxation] = []
    shards = {k: {"workflow": declared[k], "local": str(v)} for k, v in sorted(params.items())
              if k.endswith("_shards") and k in declared and str(v) != declared[k]}
    if shards:
        out.append(Relaxation(
            "shards", "ran each stage with the shard count of the rehearsal profile",
            "runs each stage with the workflow's default <stage>_shards (or the -p given)",
            {"changed": shards}))
    gpu = _gpu_templates(wf)
    if gpu and gpu_on_cpu:
        out.append(Relaxation(
            "gpu_on_cpu", "ran the pods that request nvidia.com/gpu on the CPU, no GPU "
            "attached", "schedules them on a GPU node with the GPUs they request",
            {"templates": gpu}))
    if gpu and cpu_deadline_scale != 1.0:
        out.append(Relaxation(
            "gpu_deadline_scale", f"multiplied the activeDeadlineSeconds of those pods by "
            f"{cpu_deadline_scale:g} (sized for a GPU, they run on the CPU)",
            "kills a pod at its template's activeDeadlineSeconds",
            {"scale": cpu_deadline_scale, "templates": gpu}))
    if workers is not None:
        out.append(Relaxation(
            "workers", f"ran at most {workers} pods at once (the workflows' parallelism "
            "caps still applied)", "runs every ready pod the workflow's and templates' "
            "parallelism allow, as the cluster has room", {"workers": workers}))
    if backoff_scale != 1.0:
        out.append(Relaxation(
            "backoff_scale", f"waited {backoff_scale:g} times the retry backoff",
            "waits retryStrategy.backoff", {"scale": backoff_scale}))
    if stop_on_failure:
        out.append(Relaxation(
            "stop_on_failure", "started no new task of a DAG after its first failure",
            "keeps starting every task whose dependencies finished while any node runs "
            "(failFast only settles the phase; argoproj/argo-workflows#10312)", {}))
    stage_params = params.get("stage_params")
    if stage_params:
        try:
            stages = sorted(json.loads(str(stage_params)))
        except (ValueError, TypeError):
            stages = []
        if stages:
            out.append(Relaxation(
                "stage_params", "submitted stage parameter overrides (the profile's, e.g. "
                "content filters opened for random weights)",
                "runs the stages' own parameters unless stage_params is given",
                {"stages": stages}))
    used = _cluster_only_used(wf)
    if used:
        out.append(Relaxation(
            "cluster_only", "accepted these fields without effect (no scheduler, garbage "
            "collector, RBAC or image pulls locally)", "applies them",
            {"fields": {k: CLUSTER_ONLY[k] for k in used}}))
    return out


def _cluster_only_used(wf: Workflow) -> list[str]:
    """The :data:`CLUSTER_ONLY` fields ``wf`` sets somewhere."""
    spec = wf.spec
    holders: list[tuple[str, Mapping[str, Any]]] = [
        ("spec", spec), ("spec.securityContext", spec.get("securityContext") or {})]
    holders += [("volume.emptyDir", v.get("emptyDir") or {}) for v in spec.get("volumes") or []]
    for t in wf.templates.values():
        c = t.get("container") or {}
        res = c.get("resources") or {}
        holders += [("template", t), ("container", c), ("resources", res),
                    ("resources.limits", res.get("limits") or {})]
    used = {key for key in CLUSTER_ONLY for kind, obj in holders
            if key.rpartition(".")[0] == kind and key.rpartition(".")[2] in obj}
    return sorted(used)
