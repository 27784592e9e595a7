"""Stage parameters are checked: a ``--set`` typo, an unknown stage or a
pod parameter no stage takes is a clear exit 3 naming the stage, the key, the closest
valid key and every valid key, instead of a run that changes its fingerprint and nothing
else; a value of the wrong type names the stage, the key, the type and the value. The valid
keys and their types come from one place: the fields of the implementation's ``Params``."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from collections import defaultdict
from pathlib import Path

import pytest

from madbench_common.benchmarks.deaf.graph import build_deaf_graph
from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cli import main
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.params import (
    check_params,
    check_stage_params,
    check_stage_values,
    valid_keys,
)
from madbench_common.pipeline.paramspec import declared_defaults, param_types
from madbench_common.pipeline.stage import load_impl
from tests.yaml_docs import load_yaml

_REPO = Path(__file__).resolve().parents[2]
_ENGINE = "madbench_common.pipeline.stage"


def test_set_typo_names_stage_key_suggestion_and_valid_keys(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reported case: ``max_env_leakge`` ran, changed the fingerprint, changed nothing."""
    code = main(["run", "--store", str(tmp_path / "s"), "--run-id", "t", "--no-progress",
                 "--set", "source_qc.max_env_leakge=0.2"])
    err = capsys.readouterr().err
    assert code == 3
    assert "stage 'source_qc' has no parameter 'max_env_leakge'" in err
    assert "did you mean 'max_env_leakage'?" in err
    assert "min_speech_coverage" in err and "music_labels" in err  # the valid keys
    assert not (tmp_path / "s" / "t" / "ingest").exists()  # nothing ran


def test_shards_for_an_unknown_stage_is_refused(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``--shards separat=4`` used to run with one shard per stage, the typo unread."""
    code = main(["run", "--store", str(tmp_path / "s"), "--run-id", "t", "--no-progress",
                 "--shards", "separat=4"])
    assert code == 3
    assert "unknown stage 'separat'" in capsys.readouterr().err
    assert not (tmp_path / "s" / "t" / "ingest").exists()  # nothing ran


def test_deaf_shards_for_an_unknown_stage_is_refused(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """DEAF's run parses ``--shards`` with MADBench's parser (it had a copy without the check)."""
    code = main(["deaf", "run", "--store", str(tmp_path / "s"), "--run-id", "t", "--no-progress",
                 "--shards", "deaf_judg=2"])
    assert code == 3
    assert "unknown stage 'deaf_judg'" in capsys.readouterr().err
    assert not (tmp_path / "s" / "t").exists()  # nothing ran


def test_set_unknown_stage_suggests_the_closest(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--store", str(tmp_path / "s"), "--run-id", "t", "--no-progress",
                 "--set", "source_q.max_env_leakage=0.2"])
    assert code == 3
    assert "no stage 'source_q' in this graph; did you mean 'source_qc'?" in \
        capsys.readouterr().err


def test_deaf_set_typo_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["deaf", "run", "--store", str(tmp_path / "s"), "--run-id", "t",
                 "--no-progress", "--set", "deaf_metrics.nboot=200"])
    err = capsys.readouterr().err
    assert code == 3
    assert "stage 'deaf_metrics' has no parameter 'nboot'; did you mean 'n_boot'?" in err


@pytest.mark.parametrize("command", [[], ["deaf"]])
def test_pod_parameter_typo_exits_3(tmp_path: Path, command: list[str],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    stage = "deaf_metrics" if command else "evaluate"
    code = main([*command, "stage", "run", "--stage", stage, "--store", str(tmp_path / "s"),
                 "--run-id", "t", "--param", "nboot=3"])
    assert code == 3
    assert f"stage {stage!r} has no parameter 'nboot'; did you mean 'n_boot'?" in \
        capsys.readouterr().err


@pytest.mark.parametrize(("given", "message"), [
    ("source_qc.min_speech_coverage=abc",
     "source_qc.min_speech_coverage must be a number (default 0.3), got 'abc' (str)"),
    ("source_qc.languages=[1]", "source_qc.languages must be a list of strings"),
    ("ingest.max_file_mb=1.5", "ingest.max_file_mb must be an integer (default 1024)"),
    ("split.ratios={\"a\":1}", "split.ratios must be a list of numbers"),
])
def test_set_value_of_the_wrong_type_is_refused_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, message: str) -> None:
    """Values are typed by their declared defaults: a string where a number is declared
    fails at once, naming the key, the expected type and the default."""
    code = main(["run", "--store", str(tmp_path / "s"), "--run-id", "t", "--no-progress",
                 "--set", given])
    assert code == 3
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s" / "t" / "ingest").exists()  # nothing ran


def test_values_of_the_declared_type_pass() -> None:
    """A number for a float (an integer too), a mapping where one profile declares a
    mapping and the other a string (DEAF's ``voices``), any value for a ``None`` default."""
    graph = build_graph()
    check_params(graph, {"source_qc": {"min_speech_coverage": 1, "languages": ["en", "de"],
                                      "max_env_leakage": 0.05},
                         "split": {"ratios": [0.8, 0.1, 0.1]}})
    deaf = build_deaf_graph()
    check_params(deaf, {"sic_tts": {"voices": {"young_male": "abc"}}})
    check_params(deaf, {"sic_tts": {"voices": '{"young_male": "abc"}'}})
    with pytest.raises(ConfigError, match=r"sic_tts\.voices must be a mapping or a string"):
        check_params(deaf, {"sic_tts": {"voices": ["abc"]}})


def test_pod_params_json_of_the_wrong_type_exits_3(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["stage", "run", "--stage", "evaluate", "--store", str(tmp_path / "s"),
                 "--run-id", "t", "--params-json", json.dumps({"n_boot": "many"})])
    assert code == 3
    assert "--params-json: evaluate.n_boot must be an integer" in capsys.readouterr().err


def test_valid_keys_span_profiles_and_implementation() -> None:
    graph = build_graph()
    assert "model" in valid_keys(graph["features_det_batfd"])  # only ``full`` runs a model
    assert "model" not in valid_keys(graph["source_qc"])  # compound: vad/asr/tagger instead
    assert {"vad", "asr", "tagger"} <= valid_keys(graph["source_qc"])
    assert {"prompt_model", "asr_all"} <= valid_keys(graph["component_qc"])
    assert {"sources", "allow_outside_sources"} <= valid_keys(graph["ingest"])  # impl-declared
    assert "model" not in valid_keys(graph["pairing"])
    check_params(graph, {"separate": {"model": "separator-mossformer2"},
                         "ingest": {"sources": "x.csv"}})
    with pytest.raises(ConfigError, match=r"stage 'pairing' has no parameter 'model'"):
        check_params(graph, {"pairing": {"model": "ref-av-stats"}})


def _pod_params(args: list[str]) -> tuple[str, dict[str, object]]:
    stage, params = args[args.index("--stage") + 1], {}
    for flag, value in zip(args, args[1:]):
        if flag == "--param":
            params[value.partition("=")[0]] = value.partition("=")[2]
        elif flag == "--params-json":
            params.update(json.loads(value))
    return stage, params


def _json_params(args: list[str]) -> dict[str, object]:
    """The typed part of a pod's parameters: its ``--params-json`` object."""
    out: dict[str, object] = {}
    for flag, value in zip(args, args[1:]):
        if flag == "--params-json":
            out.update(json.loads(value))
    return out


@pytest.mark.parametrize("workflow", ["full", "smoke", "deaf"])
def test_every_rendered_pod_passes_only_valid_parameters(workflow: str) -> None:
    """The workflow's ``--param`` / ``--params-json`` (sources, model, workflow parameters,
    the profile's params) are all keys the pod's stage takes: the pod check refuses none."""
    doc = load_yaml(_REPO / "workflows" / f"{workflow}.yaml")
    graph = build_deaf_graph() if workflow == "deaf" else build_graph()
    seen = set()
    for template in doc["spec"]["templates"]:
        args = (template.get("container") or {}).get("args") or []
        if "stage" in args and "--stage" in args:
            stage, params = _pod_params(args)
            check_stage_params(graph[stage], params, f"{workflow}.yaml")
            check_stage_values(graph[stage], _json_params(args), f"{workflow}.yaml")
            seen.add(stage)
    assert seen == set(graph.stages)


def _keys_read(tree: ast.AST) -> set[str]:
    """String keys read from a stage's parameters: ``….params[k]``, ``….params.get(k)``,
    and the same through the local alias ``p`` (never another stage's ``stage.params``)."""
    def is_params(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in ("p", "params")
        return (isinstance(node, ast.Attribute) and node.attr == "params"
                and not (isinstance(node.value, ast.Name) and node.value.id == "stage"))

    keys = set()
    for node in ast.walk(tree):
        key: ast.AST | None = None
        if isinstance(node, ast.Subscript) and is_params(node.value):
            key = node.slice
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and is_params(node.func.value) and node.args):
            key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.add(key.value)
    return keys


@pytest.mark.parametrize("graph", [build_graph(), build_deaf_graph()],
                         ids=["madbench", "deaf"])
def test_every_key_a_stage_module_reads_is_declared(graph: Graph) -> None:
    """The check never refuses a key the code reads from the mapping (``ctx.params``, or a
    helper's ``params``): each is a field of a stage of that module. (Typed reads,
    ``self.p.key``, are mypy's to check.)"""
    valid: dict[str, set[str]] = defaultdict(set)
    for stage in graph:  # the modules of the implementation and of its bases
        for cls in load_impl(stage.target).__mro__:
            if cls.__module__.startswith("madbench_common.") and cls.__module__ != _ENGINE:
                valid[cls.__module__] |= valid_keys(stage)
    seen = set()
    for module, keys in valid.items():
        read = _keys_read(ast.parse(inspect.getsource(importlib.import_module(module))))
        assert read <= keys, f"{module} reads undeclared {sorted(read - keys)}"
        seen |= read
    assert seen & {"sources", "emis"}  # the scan sees the mapping reads


@pytest.mark.parametrize("profile", ["embedded", "full"])
def test_compound_qc_models_are_derived_from_their_parameters(profile: str) -> None:
    """The QC stages' ``vad+asr+…`` model is their model parameters joined (typed once)."""
    graph = build_graph().profiled(profile)
    for name in ("source_qc", "component_qc"):
        stage = graph[name]
        roles = [k for k in ("vad", "asr", "speaker", "tagger") if k in stage.params]
        assert stage.model == "+".join(stage.params[k] for k in roles), name


def _own_defaults(tree: ast.AST) -> set[str]:
    """Keys read with a default of the reader's own: ``….params.get(k, default)``."""
    out = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and len(node.args) == 2
                and "params" in ast.unparse(node.func.value)
                and isinstance(node.args[0], ast.Constant)):
            out.add(str(node.args[0].value))
    return out


@pytest.mark.parametrize("graph", [build_graph(), build_deaf_graph()],
                         ids=["madbench", "deaf"])
def test_a_parameter_has_one_default_and_the_graph_only_overrides(graph: Graph) -> None:
    """One default per parameter: its field's. Every key the graph sets for a stage, in
    every profile, is a field of the implementation's ``Params``; the graph sets a field
    that is not optional only where its value differs from the field's default in some
    stage of that implementation (a per-stage value such as ESC's ``setting``), and a
    ``full`` profile value differs from the embedded one. No stage class reads a field with
    a default of its own (``params.get(key, default)``) that could drift from the field's."""
    bad = []
    by_impl: dict[str, list[dict[str, object]]] = defaultdict(list)
    for stage in graph:
        by_impl[stage.target].append(stage.params)
    for stage in graph:
        impl = load_impl(stage.target)
        fields = param_types(impl.Params)
        defaults = declared_defaults(impl.Params)
        for profile in ("embedded", "full"):
            if unknown := set(stage.in_profile(profile).params) - set(fields):
                bad.append(f"{stage.name} ({profile}): {sorted(unknown)} are no fields")
        for key, value in stage.params.items():
            if key in defaults and all(p.get(key, defaults[key]) == defaults[key]
                                       for p in by_impl[stage.target]):
                bad.append(f"{stage.name}: the graph repeats {key}'s default {value!r}")
        for key, value in stage.full.get("params", {}).items():
            if stage.params.get(key, defaults.get(key)) == value:
                bad.append(f"{stage.name}: full repeats {key}={value!r}")
        for cls in impl.__mro__:
            if cls.__module__.startswith("madbench_common.") and cls.__module__ != _ENGINE \
                    and (twice := _own_defaults(ast.parse(inspect.getsource(cls))) & set(fields)):
                bad.append(f"{stage.name}: {cls.__name__} defaults {sorted(twice)} again")
    assert not bad, sorted(set(bad))
