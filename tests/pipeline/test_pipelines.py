"""The pipelines table, and the rule that the engine does not import the benchmarks
(issue 22: no upward arrow)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from madbench_common.benchmarks.deaf.graph import build_deaf_graph
from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.pipelines import PIPELINES, build_pipeline

PACKAGE = Path(__file__).resolve().parents[2] / "madbench_common"
ENGINE = ("core", "media", "pipeline", "cluster")
"""The generic layers: storage, media, the graph engine and its Argo rendering."""
MADBENCH_GRAPH = {"pipeline/definition.py", "pipeline/eval_models.py", "pipeline/omni_models.py"}
"""MADBench's graph, which still lives beside the engine (issue 22's ``benchmarks/`` move
is not done); it may import the benchmark's modules."""
BENCHMARK = ("deaf", "stages", "rows", "sources", "taxonomy", "taxonomy_propose",
             "speech_prep", "eval", "robustness", "corpora", "release", "prompts", "omni",
             "reference")
"""The benchmarks' own modules (MADBench's stages, rows and evaluation; DEAF)."""


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


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_engine_imports_no_benchmark_module() -> None:
    """core/, media/, pipeline/ and cluster/ reach a benchmark only through a string
    (``pipelines.PIPELINES``, a stage's ``target``, a registry card), never an import,
    at module level or inside a function."""
    bad = []
    for layer in ENGINE:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            rel = str(path.relative_to(PACKAGE))
            if rel in MADBENCH_GRAPH:
                continue
            for module in _imports(path):
                parts = module.split(".")
                if parts[0] == "madbench_common" and len(parts) > 1 and parts[1] in BENCHMARK:
                    bad.append(f"{rel} imports {module}")
    assert not bad, bad
