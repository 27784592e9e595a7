"""The pipeline definition: stages declared once, compiled to Argo or run locally.

A :class:`Stage` names what it runs (a lazy ``module:Class`` target implementing
:class:`madbench_common.pipeline.stage.StageImpl`), the image that carries it, its upstream
stages, the manifest it writes, and its scheduling knobs. A :class:`Graph` checks names,
references and cycles, and gives a deterministic topological order both backends share.
Each stage's defaults are the CPU references, so the embedded run and ``smoke.yaml`` need
no GPU; :attr:`Stage.full` names the paper's model where it differs (e.g.
``full={"model": "separator-mossformer2", "image": "separator-mossformer2"}``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from madbench_common.core.errors import ConfigError

__all__ = ["PROFILES", "Graph", "Stage"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
_PROFILE_FIELDS = frozenset({"model", "image", "gpu", "gpu_memory_gib", "cpu", "memory",
                             "timeout", "params"})
"""Stage fields a profile may override (never the name, target or wiring)."""
PROFILES = ("embedded", "full")


@dataclass(frozen=True)
class Stage:
    """One step of the graph; every field is plain data so both backends can read it."""

    name: str
    role: str
    """The role interface the stage's model implements (``separator``, …) or ``core``."""
    target: str
    """``module:Class`` of the stage implementation, imported only when run."""
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    """Manifest kinds written (``stems``); the first is ``<stage>/manifest.parquet``."""
    model: str = ""
    """Default model slug from the registry, if the stage runs a model."""
    image: str = "reference-cpu"
    """Image slug under ``images/``; the workflow parameter is :attr:`image_param`."""
    gpu: int = 0
    gpu_memory_gib: int = 0
    """Least memory per GPU a shard needs, in GiB (0: any GPU). Argo pods get a node
    affinity on the cluster profile's GPU-memory node label (``gpuMemoryLabel``)."""
    cpu: str = "1"
    memory: str = "2Gi"
    retries: int = 2
    timeout: int = 3600
    """Seconds before one shard is killed (Argo ``activeDeadlineSeconds``)."""
    shards: int = 1
    """Default fan-out; ``1`` means the stage runs as a single task."""
    parallelism: int = 8
    params: dict[str, Any] = field(default_factory=dict)
    """What this stage sets over its implementation's ``Params`` defaults: only values that
    differ for it (and the optional fields it uses); the user's are merged over them."""
    full: dict[str, Any] = field(default_factory=dict)
    """Overrides of the ``full`` profile (the paper's models on their images): any of
    ``model``, ``image``, ``gpu``, ``gpu_memory_gib``, ``cpu``, ``memory``, ``timeout``,
    and ``params``
    (merged over :attr:`params`). Empty: the stage runs the same in every profile."""
    secrets: tuple[str, ...] = ()
    """Environment variables the stage reads from the API-key Secret (hosted model APIs);
    on the cluster only these pods get them, and egress to HTTPS."""
    optional_inputs: tuple[str, ...] = ()
    """Inputs the stage runs without when they failed: their absence is part of the
    fingerprint, the stage reads them only when present (:meth:`StageContext.has_input`),
    and on Argo the task waits for them to finish, succeeded or not (``depends``)."""
    workflow_params: tuple[str, ...] = ()
    """Parameters that are also workflow parameters ``<stage>_<key>`` (``argo submit -p``),
    their defaults the profile's values (JSON text unless a string); the pod receives the
    value verbatim as ``--param key=value``, so the stage parses JSON values itself."""

    def in_profile(self, profile: str) -> Stage:
        """This stage as ``profile`` runs it (``embedded``: unchanged; ``full``: overridden).

        ``full`` itself is kept, so a backend can tell which params the profile set.
        """
        if profile not in PROFILES:
            raise ConfigError(f"unknown profile {profile!r}; profiles: {', '.join(PROFILES)}")
        if profile == "embedded" or not self.full:
            return self
        fields = {k: v for k, v in self.full.items() if k != "params"}
        params = {**self.params, **self.full.get("params", {})}
        return dataclasses.replace(self, **fields, params=params)

    @property
    def image_param(self) -> str:
        """The workflow parameter that selects this stage's image."""
        return f"{self.name}_image"

    @property
    def sharded(self) -> bool:
        return self.shards > 1

    @property
    def swappable(self) -> bool:
        """It runs one registry model, named by its ``model`` parameter (compound QC stages
        name their models in their own parameters)."""
        return bool(self.model) and "+" not in self.model


class Graph:
    """A validated DAG of stages."""

    def __init__(self, stages: list[Stage]) -> None:
        self.stages = {s.name: s for s in stages}
        if len(self.stages) != len(stages):
            raise ConfigError("duplicate stage names in graph")
        for s in stages:
            self._check_stage(s)
        self.order = self._toposort()

    def _check_stage(self, s: Stage) -> None:
        if not _NAME.match(s.name):
            raise ConfigError(f"stage name {s.name!r} must match {_NAME.pattern}")
        for dep in s.inputs:
            if dep not in self.stages:
                raise ConfigError(f"stage {s.name!r} depends on unknown stage {dep!r}")
        if s.shards < 1 or s.retries < 0 or s.timeout <= 0:
            raise ConfigError(f"stage {s.name!r}: shards ≥ 1, retries ≥ 0, timeout > 0")
        if not set(s.optional_inputs) <= set(s.inputs):
            raise ConfigError(f"stage {s.name!r}: optional inputs "
                              f"{sorted(set(s.optional_inputs) - set(s.inputs))} are not inputs")
        if unknown := set(s.full) - _PROFILE_FIELDS:
            raise ConfigError(f"stage {s.name!r}: full profile cannot set {sorted(unknown)}; "
                              f"allowed: {sorted(_PROFILE_FIELDS)}")

    def _toposort(self) -> list[str]:
        done: list[str] = []
        state: dict[str, int] = {}

        def visit(name: str, path: tuple[str, ...]) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                raise ConfigError(f"cycle in graph: {' -> '.join((*path, name))}")
            state[name] = 1
            for dep in self.stages[name].inputs:
                visit(dep, (*path, name))
            state[name] = 2
            done.append(name)

        for name in self.stages:  # declaration order breaks ties deterministically
            visit(name, ())
        return done

    def profiled(self, profile: str) -> Graph:
        """The same graph with every stage as ``profile`` runs it."""
        return Graph([self.stages[n].in_profile(profile) for n in self.stages])

    def __iter__(self) -> Iterator[Stage]:
        return (self.stages[n] for n in self.order)

    def __getitem__(self, name: str) -> Stage:
        try:
            return self.stages[name]
        except KeyError:
            raise ConfigError(
                f"unknown stage {name!r}; stages: {', '.join(self.order)}"
            ) from None

    def until(self, last: str | None) -> list[Stage]:
        """Stages needed to produce ``last`` (all of them when ``None``), in order."""
        if last is None:
            return list(self)
        needed: set[str] = set()
        stack = [self[last].name]
        while stack:
            name = stack.pop()
            if name not in needed:
                needed.add(name)
                stack.extend(self.stages[name].inputs)
        return [s for s in self if s.name in needed]

    def upstream(self, name: str) -> list[Stage]:
        """All transitive inputs of ``name``, in order, excluding itself."""
        return [s for s in self.until(name) if s.name != name]
