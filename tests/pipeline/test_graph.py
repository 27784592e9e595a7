"""Graph: validation, ordering, and the MADBench definition."""

from __future__ import annotations

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.graph import Graph, Stage


def _s(name: str, *inputs: str) -> Stage:
    return Stage(name=name, role="core", target="x:Y", inputs=inputs)


def test_toposort_is_deterministic_and_respects_deps() -> None:
    g = Graph([_s("c", "b"), _s("a"), _s("b", "a"), _s("d", "a")])
    assert g.order == ["a", "b", "c", "d"]
    assert [s.name for s in g.until("c")] == ["a", "b", "c"]
    assert [s.name for s in g.upstream("d")] == ["a"]


def test_cycle_and_unknown_dependency_fail() -> None:
    with pytest.raises(ConfigError, match="cycle"):
        Graph([_s("a", "b"), _s("b", "a")])
    with pytest.raises(ConfigError, match="unknown stage"):
        Graph([_s("a", "zzz")])
    with pytest.raises(ConfigError, match="duplicate"):
        Graph([_s("a"), _s("a")])
    with pytest.raises(ConfigError, match="must match"):
        Graph([_s("Bad-Name")])


def test_madbench_graph_shape() -> None:
    g = build_graph()
    assert g.order[:4] == ["ingest", "separate", "source_qc", "split"]
    for stage in g:
        assert stage.image_param == f"{stage.name}_image"
    with pytest.raises(ConfigError, match="unknown stage"):
        g["nope"]
