"""The pipelines table: the CLI, above the benchmarks, finds each one's graph by name and
hands it to the engine (the import rule between layers is tests/test_layers.py)."""

from __future__ import annotations

import pytest

from madbench_common.benchmarks.deaf.graph import build_deaf_graph
from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cli.pipelines import PIPELINES, build_pipeline
from madbench_common.core.errors import ConfigError


def test_the_table_builds_each_benchmark() -> None:
    assert set(PIPELINES) == {"madbench", "deaf"}
    assert list(build_pipeline("madbench").stages) == list(build_graph().stages)
    assert list(build_pipeline("deaf", ("qwen2_audio",)).stages) == \
        list(build_deaf_graph(("qwen2_audio",)).stages)


def test_an_unknown_pipeline_or_a_model_list_it_cannot_take_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown pipeline 'madbnech'; known: madbench, deaf"):
        build_pipeline("madbnech")
    with pytest.raises(ConfigError, match="takes no model list"):
        build_pipeline("madbench", ("qwen2_audio",))
