"""The package's layers and the one rule between them: an import points down
or sideways, never up, so there is no cycle between folders.

Strings are not imports: the CLI finds its command modules, the engine a benchmark's
graph (``pipeline/pipelines.PIPELINES``), a stage its ``target`` and a model its card's
adapter by name, so that the layer below never imports the one above."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "madbench_common"
LAYERS = (
    ("core",),  # storage, manifests, errors, types, process utilities
    ("media",),  # audio, video, DSP, muxing, guarded decoding
    ("models",),  # roles, cards, registry, weights, adapters, CPU references, tiny builders
    ("imagefactory",),  # image definitions, locks, builds, pushes, SBOMs, the container engine
    ("pipeline",),  # the generic graph engine: stages, runners, plan, status, Argo rendering
    ("benchmarks.madbench", "benchmarks.deaf"),  # each benchmark's graph, stages, evaluation
    ("cli",),  # the `madbench` command
    ("testing",),  # the fault suite and the image tests
    ("cluster",),  # the local Argo executor, the rehearsal, workflow lint
)
"""Lowest first. Two benchmarks share a rank and do not import each other."""
MODELS_ON_BENCHMARKS = {
    "models/tiny/omni.py",  # the tiny tokenizers learn MADBench's packaged prompts
}
"""Model code that still imports a benchmark (test support: the tiny omni checkpoints'
tokenizers are trained on the prompts MADBench asks). The list may shrink, never grow."""


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "madbench_common":
        return None
    for rank in LAYERS:
        for name in rank:
            if parts[1:1 + name.count(".") + 1] == name.split("."):
                return name
    return None


def _rank(layer: str) -> int:
    return next(i for i, rank in enumerate(LAYERS) if layer in rank)


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _edges() -> list[tuple[str, str, str, str]]:
    """(file, its layer, imported module, that module's layer) for every cross-layer import."""
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) < 2:
            continue  # the package's own __init__
        module = ".".join(("madbench_common", *rel.with_suffix("").parts))
        if module == "madbench_common.benchmarks.__init__":
            continue  # the empty package that holds the benchmarks
        layer = _layer(module)
        assert layer is not None, f"{rel} is in no layer of LAYERS"
        for imported in sorted(_imports(path)):
            other = _layer(imported)
            if other is not None and other != layer:
                edges.append((str(rel), layer, imported, other))
    return edges


def test_every_folder_is_in_a_layer() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    named = {name.split(".")[0] for rank in LAYERS for name in rank}
    assert folders == named


def test_imports_point_down() -> None:
    up = [f"{rel} ({layer}) imports {imported} ({other})"
          for rel, layer, imported, other in _edges()
          if _rank(other) > _rank(layer) and rel not in MODELS_ON_BENCHMARKS]
    assert not up, "\n".join(up)


def test_the_listed_adapters_still_need_their_exception() -> None:
    """A fixed adapter leaves MODELS_ON_BENCHMARKS."""
    upward = {rel for rel, layer, _, other in _edges() if _rank(other) > _rank(layer)}
    assert set(MODELS_ON_BENCHMARKS) <= upward, set(MODELS_ON_BENCHMARKS) - upward


def test_one_benchmark_does_not_import_the_other() -> None:
    sideways = [f"{rel} imports {imported}" for rel, layer, imported, other in _edges()
                if layer.startswith("benchmarks.") and other.startswith("benchmarks.")]
    assert not sideways, sideways


def test_the_layer_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The check itself: core importing the engine is reported."""
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from madbench_common.pipeline.stage import StageImpl\n")
    imported = _imports(source)
    assert "madbench_common.pipeline.stage" in imported
    assert _rank(_layer("madbench_common.pipeline.stage") or "") > _rank("core")
    assert _layer("madbench_common.benchmarks.deaf.graph") == "benchmarks.deaf"
    assert _layer("madbench_common.models.reference.asr") == "models"
