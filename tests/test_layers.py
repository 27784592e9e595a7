"""The package's layers and the one rule between them: an import points down
or sideways, never up, so there is no cycle between folders; and no two files import
each other, even through others (a cycle between files).

Every import counts: at module level, inside a function (deferred, as the CLI and the
engine do to stay light) or under ``TYPE_CHECKING``, absolute or relative.

Strings are not imports, but they reach a layer all the same: the CLI finds its command
modules, a stage its ``target`` and a model its card's adapter by name. So the strings
are held to the rule too: a catalog card's adapter is model code (``models/``), and the
generic engine (``pipeline/``) names no benchmark: the benchmarks' table
(``cli/pipelines.py``) sits above them and hands their graphs down."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import yaml

PACKAGE = Path(__file__).resolve().parents[1] / "madbench_common"
LAYERS = (
    ("core",),  # storage, manifests, errors, types, process utilities
    ("media",),  # audio, video, DSP, muxing, guarded decoding
    ("models",),  # roles, cards, registry, weights, adapters, CPU references, tiny builders
    ("imagefactory",),  # image definitions, locks, builds, pushes, SBOMs, the container engine
    ("pipeline",),  # the generic graph engine: stages, runners, plan, status, Argo rendering
    ("benchmarks.madbench", "benchmarks.deaf"),  # each benchmark's graph, stages, evaluation
    ("cli",),  # the `madbench` command, and the table of benchmarks it runs
    ("testing",),  # the fault suite and the image tests
    ("cluster",),  # the local Argo executor, the rehearsal, workflow lint
)
"""Lowest first. Two benchmarks share a rank and do not import each other."""
MODELS_ON_BENCHMARKS = {
    "models/tiny/omni.py",  # the tiny tokenizers learn MADBench's packaged prompts
}
"""Model code that still imports a benchmark (test support: the tiny omni checkpoints'
tokenizers are trained on the prompts MADBench asks). The list may shrink, never grow."""
UNLAYERED = {"madbench_common", "madbench_common.benchmarks"}
"""The package itself and the package holding the benchmarks: in no layer."""


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


def _module(path: Path, root: Path = PACKAGE) -> str:
    """``madbench_common.a.b`` of ``a/b.py`` or ``a/b/__init__.py`` under ``root``."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str = "") -> set[str]:
    """Every name ``path`` imports, anywhere in it: ``a.b`` for ``import a.b`` and ``m.x``
    for ``from m import x`` (``x`` may be a module, or a name ``m`` defines); relative
    imports resolved against ``module``, the file's own dotted name."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                assert module, f"{path}: a relative import needs the file's module name"
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            out.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


@functools.cache
def _graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """File → the files it imports (each by its dotted module name): an imported name maps
    to the longest module of the package it starts with."""
    files = {_module(p, root): p for p in sorted(root.rglob("*.py"))}

    def file_of(name: str) -> str | None:
        parts = name.split(".")
        while parts and ".".join(parts) not in files:
            parts.pop()
        return ".".join(parts) or None

    graph = {}
    for module, path in files.items():
        targets = {file_of(name) for name in _imports(path, module)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one file (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _rel(module: str) -> str:
    """``madbench_common.a.b`` as the file path ``a/b.py`` (or ``a/b/__init__.py``)."""
    base = PACKAGE.joinpath(*module.split(".")[1:])
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    return str(path.relative_to(PACKAGE))


def _edges() -> list[tuple[str, str, str, str]]:
    """(file, its layer, imported file's module, that file's layer) for every import
    between layers."""
    edges = []
    for module, targets in sorted(_graph().items()):
        if module in UNLAYERED:
            continue
        layer = _layer(module)
        assert layer is not None, f"{_rel(module)} is in no layer of LAYERS"
        for imported in sorted(targets):
            other = _layer(imported)
            if other is not None and other != layer:
                edges.append((_rel(module), layer, imported, other))
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


def test_no_cycle_between_files() -> None:
    """No file imports itself through others (every import counts, deferred ones too)."""
    graph = _graph()
    report = []
    for component in _cycles(graph):
        report.append("cycle: " + ", ".join(_rel(m) for m in component))
        report += [f"  {_rel(a)} imports {_rel(b)}" for a in component
                   for b in sorted(graph[a]) if b in component]
    assert not report, "\n".join(report)


_BENCHMARK_NAME = re.compile(r"(?<![\w-])(madbench_common[./])?benchmarks[./][A-Za-z_]")
"""A module or file of a benchmark, dotted or as a path: ``benchmarks.deaf.graph``,
``madbench_common/benchmarks/madbench/graph.py``."""


def test_the_engine_names_no_benchmark() -> None:
    """``pipeline/`` reaches no benchmark through a string either (an import target, a
    ``module:function``, a path): the benchmarks are handed down to it."""
    named = []
    for path in sorted((PACKAGE / "pipeline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    _BENCHMARK_NAME.search(node.value):
                named.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value[:80]!r}")
    assert not named, "\n".join(named)


def test_every_card_names_model_code() -> None:
    """A catalog card's ``target`` (its adapter, ``madbench_common.<target>``) is in the
    models layer: the registry never hands a stage a benchmark's code as a model."""
    wrong = []
    for card in sorted((PACKAGE / "models" / "catalog").glob("*.yaml")):
        target = str(yaml.safe_load(card.read_text())["target"])
        if _layer(f"madbench_common.{target.partition(':')[0]}") != "models":
            wrong.append(f"{card.name}: target {target}")
    assert not wrong, "\n".join(wrong)


def test_the_layer_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The check itself: core importing the engine is reported."""
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from madbench_common.pipeline.stage import StageImpl\n")
    imported = _imports(source)
    assert "madbench_common.pipeline.stage.StageImpl" in imported
    assert _rank(_layer("madbench_common.pipeline.stage") or "") > _rank("core")
    assert _layer("madbench_common.benchmarks.deaf.graph") == "benchmarks.deaf"
    assert _layer("madbench_common.models.reference.asr") == "models"


def test_the_cycle_check_finds_a_cycle_through_deferred_and_relative_imports(
        tmp_path: Path) -> None:
    """The check itself: ``a`` imports ``b`` relatively, ``b`` imports ``c`` inside a
    function and ``c`` imports ``a``: one cycle of three files; ``d`` is outside it."""
    root = tmp_path / "madbench_common"
    (root / "core").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "core" / "__init__.py").write_text("")
    (root / "core" / "a.py").write_text("from .b import g\n")
    (root / "core" / "b.py").write_text("def g():\n    from madbench_common.core import c\n")
    (root / "core" / "c.py").write_text("import madbench_common.core.a\n")
    (root / "core" / "d.py").write_text("from . import a\n")
    graph = _graph(root)
    assert graph["madbench_common.core.d"] == {"madbench_common.core.a"}
    assert _cycles(graph) == [["madbench_common.core.a", "madbench_common.core.b",
                               "madbench_common.core.c"]]


def test_the_engine_check_reads_a_path_as_a_name() -> None:
    assert _BENCHMARK_NAME.search("madbench_common.benchmarks.deaf.graph:build_deaf_graph")
    assert _BENCHMARK_NAME.search("from madbench_common/benchmarks/madbench/graph.py and")
    assert not _BENCHMARK_NAME.search("the benchmarks. A stage")
    assert not _BENCHMARK_NAME.search("MADBench benchmarks")
