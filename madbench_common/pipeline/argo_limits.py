"""Argo limits of a rendered workflow at a given scale: pods, concurrency, object size.

A Workflow object lives in etcd, whose request limit is 1.5 MiB. It holds the spec
(what ``madbench render`` writes) and, while it runs, one ``status.nodes`` entry per
node: the DAG, each stage's fan-out DAG, and for every task with a ``retryStrategy`` a
Retry node plus one Pod node per attempt. :func:`workflow_limits` counts those nodes
for given shard counts and sizes them with a node shaped as the controller writes it
(names, phase, times, resources, inputs, outputs, children). Above ~1 MB the
controller gzips the nodes into ``compressedNodes``; past that, only
``nodeStatusOffLoad`` (a database) keeps the workflow under etcd's limit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from madbench_common.pipeline.graph import Graph

__all__ = ["ETCD_LIMIT_BYTES", "StageLimits", "WorkflowLimits", "node_bytes", "workflow_limits"]

ETCD_LIMIT_BYTES = 1_572_864
"""etcd's default ``--max-request-bytes`` (1.5 MiB)."""
_NAME = "madbench-full-x7k2q"


@dataclass(frozen=True)
class StageLimits:
    stage: str
    shards: int
    pods: int
    """Shard pods plus the merge pod (first attempts)."""
    parallelism: int
    """Pods of this stage that may run at once (its fan-out template's cap)."""


@dataclass(frozen=True)
class WorkflowLimits:
    stages: list[StageLimits]
    pods: int
    nodes: int
    spec_bytes: int
    status_bytes: int
    max_concurrent_pods: int
    """The most shard pods that may run at once (independent stages overlap)."""

    @property
    def object_bytes(self) -> int:
        return self.spec_bytes + self.status_bytes

    @property
    def etcd_fraction(self) -> float:
        return self.object_bytes / ETCD_LIMIT_BYTES


def node_bytes(stage: str, shard: int, kind: str) -> int:
    """JSON size of one ``status.nodes`` entry as the controller writes it."""
    name = f"{_NAME}.{stage.replace('_', '-')}.shard({shard}:{shard})"
    node: dict[str, Any] = {
        "id": f"{_NAME}-{1234567890 + shard}", "name": name, "displayName": name.split(".")[-1],
        "type": kind, "templateName": f"{stage.replace('_', '-')}-shard",
        "templateScope": "local/", "phase": "Succeeded", "boundaryID": f"{_NAME}-987654321",
        "startedAt": "2026-11-30T12:00:00Z", "finishedAt": "2026-11-30T12:10:00Z",
        "progress": "1/1", "resourcesDuration": {"cpu": 600, "memory": 2400,
                                                 "nvidia.com/gpu": 600},
        "inputs": {"parameters": [{"name": "shard", "value": str(shard)}]},
        "outputs": {"exitCode": "0"}, "hostNodeName": "gpu-node-pool-a-7f9c2-xk4lz",
        "children": [f"{_NAME}-{2234567890 + shard}"],
    }
    if kind == "Pod":
        node["podIP"] = "10.244.12.34"
    return len(json.dumps({node["id"]: node}, separators=(",", ":")))


def _levels(graph: Graph) -> dict[str, int]:
    """Longest-path depth of each stage: stages of one depth can run at the same time."""
    depth: dict[str, int] = {}
    for stage in graph:
        depth[stage.name] = 1 + max((depth[d] for d in stage.inputs), default=-1)
    return depth


def workflow_limits(doc: Mapping[str, Any], graph: Graph, shards: Mapping[str, int],
                    retries: bool = True) -> WorkflowLimits:
    """Limits of the workflow ``doc`` (rendered from ``graph``) run with ``shards`` (a stage
    not named there: the workflow's default ``<stage>_shards``)."""
    fanout = {t["name"]: t.get("parallelism", 0) for t in doc["spec"]["templates"]}
    defaults = {p["name"]: p.get("value") for p in doc["spec"]["arguments"]["parameters"]}
    stages, status, nodes = [], 0, 2  # the DAG root and the onExit node
    for stage in graph:
        default = int(defaults.get(f"{stage.name}_shards") or stage.shards)
        n = shards.get(stage.name, default) if stage.sharded else 1
        cap = fanout.get(f"{stage.name.replace('_', '-')}-fanout", 0) or n
        stages.append(StageLimits(stage.name, n, n + 1, min(cap, n)))
        per_task = 2 if retries else 1  # Retry node + Pod node per task
        tasks = n + 1
        nodes += tasks * per_task + (1 if stage.sharded else 0)
        status += sum(node_bytes(stage.name, i, "Pod") for i in range(tasks)) * per_task
    depth = _levels(graph)
    concurrent = max(sum(s.parallelism for s in stages if depth[s.stage] == level)
                     for level in set(depth.values()))
    spec = len(json.dumps(doc, separators=(",", ":")))
    return WorkflowLimits(stages, sum(s.pods for s in stages) + 1, nodes, spec, status,
                          concurrent)
