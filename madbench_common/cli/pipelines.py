"""The benchmarks this platform runs, by name: the one table that the CLI, the image
tests and the cluster tools look a pipeline up in.

It sits above the benchmarks (in ``cli/``) so that it may import them, and each graph
builder is imported only when its pipeline is asked for. The generic engine
(``pipeline/``) is handed a benchmark's graph and never names one: the arrows point from
the benchmarks to the engine, not back (``tests/test_layers.py``). A new benchmark adds
one row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from madbench_common.benchmarks import deaf, madbench
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.graph import Graph

__all__ = ["PIPELINES", "Pipeline", "build_pipeline"]


@dataclass(frozen=True)
class Pipeline:
    """One benchmark's graph: its name, builder and what it is."""

    name: str
    builder: Callable[[tuple[str, ...]], Graph]
    """Returns the :class:`Graph` for the answer models to run (``()``: the paper's; only
    a pipeline that ``takes_models`` is given any)."""
    description: str
    takes_models: bool = False


def _madbench_graph(models: tuple[str, ...]) -> Graph:
    from madbench_common.benchmarks.madbench.graph import build_graph

    return build_graph()


def _deaf_graph(models: tuple[str, ...]) -> Graph:
    from madbench_common.benchmarks.deaf.graph import build_deaf_graph

    return build_deaf_graph(models)


PIPELINES: dict[str, Pipeline] = {p.name: p for p in (
    Pipeline("madbench", _madbench_graph, madbench.DESCRIPTION),
    Pipeline("deaf", _deaf_graph, deaf.DESCRIPTION, takes_models=True),
)}


def build_pipeline(name: str, models: tuple[str, ...] = ()) -> Graph:
    """The graph of pipeline ``name`` (``models``: DEAF's answer models; ``()``: all)."""
    try:
        pipeline = PIPELINES[name]
    except KeyError:
        raise ConfigError(f"unknown pipeline {name!r}; known: {', '.join(PIPELINES)}") from None
    if models and not pipeline.takes_models:
        raise ConfigError(f"pipeline {name!r} takes no model list (got {', '.join(models)})")
    return pipeline.builder(models)
