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
ENGINE = ("core", "media", "pipeline", "cluster", "build")
"""The generic layers: storage, media, the graph engine, its Argo rendering, and the
image tooling."""
BENCHMARKS = "madbench_common.benchmarks"
MODELS_ON_BENCHMARKS = {
    "models/azure_tts.py", "models/elevenlabs.py",  # DEAF's voice table and narrator
    "models/qwen25vl.py", "models/reference/scene.py", "models/reference/env_gen.py",
    "models/tiny/omni.py",  # MADBench's scene taxonomy; its packaged prompts
}
"""Adapters that still import a benchmark's helpers (issue 22, left: moving those helpers
under ``models/`` would change these adapters' sources, hence their identity). The list
may shrink, never grow."""


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


def _bad_imports(folder: str, allowed: set[str] = set()) -> list[str]:  # noqa: B006
    bad = []
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        bad += [f"{rel} imports {m}" for m in sorted(_imports(path))
                if (m == BENCHMARKS or m.startswith(f"{BENCHMARKS}.")) and rel not in allowed]
    return bad


def test_the_engine_imports_no_benchmark_module() -> None:
    """core/, media/, pipeline/, cluster/ and build/ reach a benchmark only through a string
    (``pipelines.PIPELINES``, a stage's ``target``, a registry card), never an import,
    at module level or inside a function."""
    bad = [b for layer in ENGINE for b in _bad_imports(layer)]
    assert not bad, bad


def test_models_import_no_benchmark_beyond_the_listed_adapters() -> None:
    assert not _bad_imports("models", MODELS_ON_BENCHMARKS)
    for rel in MODELS_ON_BENCHMARKS:  # a fixed adapter leaves the list
        assert any(m.startswith(BENCHMARKS) for m in _imports(PACKAGE / rel)), rel


def test_one_benchmark_does_not_import_the_other() -> None:
    for one, other in (("madbench", "deaf"), ("deaf", "madbench")):
        bad = [f"{p.relative_to(PACKAGE)} imports {m}"
               for p in sorted((PACKAGE / "benchmarks" / one).rglob("*.py"))
               for m in _imports(p) if m.startswith(f"{BENCHMARKS}.{other}")]
        assert not bad, bad
