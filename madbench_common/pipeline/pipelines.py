"""The benchmarks this platform runs, by name: the one table that the CLI and the cluster
tools look a pipeline up in.

Each entry names its graph builder as ``module:function``, imported only when asked for,
so the generic engine (``pipeline/``, ``cluster/``) never imports a benchmark: the arrows
point from the benchmarks to the engine, not back. A new benchmark adds one row here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.graph import Graph

__all__ = ["PIPELINES", "Pipeline", "build_pipeline"]


@dataclass(frozen=True)
class Pipeline:
    """One benchmark's graph: its name, builder and what it is."""

    name: str
    builder: str
    """``module:function`` returning the :class:`Graph`; ``takes_models``: called with the
    answer models to run (``()``: the paper's)."""
    description: str
    takes_models: bool = False


PIPELINES: dict[str, Pipeline] = {p.name: p for p in (
    Pipeline("madbench", "madbench_common.benchmarks.madbench.graph:build_graph",
             "MADBench (2026): component-level audio deepfakes of real clips, R/S/E/Q"),
    Pipeline("deaf", "madbench_common.benchmarks.deaf.graph:build_deaf_graph",
             "DEAF: do audio language models hear the audio or read its words",
             takes_models=True),
)}


def build_pipeline(name: str, models: tuple[str, ...] = ()) -> Graph:
    """The graph of pipeline ``name`` (``models``: DEAF's answer models; ``()``: all)."""
    try:
        pipeline = PIPELINES[name]
    except KeyError:
        raise ConfigError(f"unknown pipeline {name!r}; known: {', '.join(PIPELINES)}") from None
    if models and not pipeline.takes_models:
        raise ConfigError(f"pipeline {name!r} takes no model list (got {', '.join(models)})")
    module, _, function = pipeline.builder.partition(":")
    build: Any = getattr(importlib.import_module(module), function)
    graph: Graph = build(models) if pipeline.takes_models else build()
    return graph
