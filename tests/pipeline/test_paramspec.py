"""Typed stage parameters: each implementation's ``Params`` types, defaults and documents
every parameter it reads, refuses a key or value it does not take, and gives back exactly
the mapping it was built from, so typing the parameters changes no fingerprint."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from madbench_common.benchmarks.deaf.graph import build_deaf_graph
from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cli import main
from madbench_common.cli.pipeline import stage_overrides
from madbench_common.core.errors import ConfigError
from madbench_common.core.manifest import params_json
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.params import decode_text_params
from madbench_common.pipeline.paramspec import (
    OUR_CHOICE,
    StageParams,
    build_params,
    check_value,
    declared_defaults,
    describe_type,
    param,
    param_docs,
    params_dict,
    unfingerprinted,
)
from madbench_common.pipeline.stage import load_impl, make_context, stage_params
from tests.readme_section import check_readme_section

_GRAPHS = [build_graph(), build_deaf_graph()]


@dataclass(frozen=True)
class _Toy(StageParams):
    x: float = param(0.5, doc="a number")
    n: int = param(1, doc="an integer")
    flag: bool = param(False, doc="a bool")
    names: list[str] = param([], doc="strings")
    voices: dict[str, str] | str = param("", doc="a mapping or its JSON")
    seen: str = param("", optional=True, doc="only where set")
    size: int | None = param(None, optional=True, minimum=1, fingerprinted=False,
                             doc="a bounded field the fingerprint leaves out")


@pytest.mark.parametrize("graph", _GRAPHS, ids=["madbench", "deaf"])
@pytest.mark.parametrize("profile", ["embedded", "full"])
def test_every_stage_gives_back_exactly_its_parameters(graph: Graph, profile: str) -> None:
    """The fingerprint hashes the mapping: the typed object of every stage's parameters, in
    every profile, converts back to the same keys, values, value types and JSON."""
    for stage in graph.profiled(profile):
        merged = stage_params(stage, {})
        back = params_dict(build_params(load_impl(stage.target).Params, merged, stage.name))
        assert back == merged, stage.name
        assert {k: type(v) for k, v in back.items()} == \
            {k: type(v) for k, v in merged.items()}, stage.name
        assert params_json(back) == params_json(merged), stage.name


@pytest.mark.parametrize("graph", _GRAPHS, ids=["madbench", "deaf"])
def test_every_field_is_documented_and_its_default_has_its_type(graph: Graph) -> None:
    for stage in graph:
        cls = load_impl(stage.target).Params
        for doc in param_docs(cls):
            assert doc.doc and doc.paper and doc.type, f"{stage.name}.{doc.name}"
            assert doc.paper == OUR_CHOICE or doc.paper.startswith(("§", "Table", "Appendix"))
            check_value(cls, doc.name, doc.default, stage.name, "default")


def test_declared_defaults_leave_out_optional_fields_and_copy_lists() -> None:
    defaults = declared_defaults(_Toy)
    assert "seen" not in defaults and "model" not in defaults
    assert defaults["names"] == [] and defaults["names"] is not declared_defaults(_Toy)["names"]
    assert _Toy().names is not _Toy().names


def test_an_integer_is_a_number_and_nothing_is_converted() -> None:
    typed = build_params(_Toy, {"x": 1, "voices": {"a": "b"}}, "toy")
    assert typed.x == 1 and type(typed.x) is int  # kept: the fingerprint hashes it as given
    assert typed.n == 1 and typed.seen == ""  # absent keys read their defaults
    assert params_dict(typed) == {"x": 1, "voices": {"a": "b"}}
    assert params_dict(build_params(_Toy, {"voices": '{"a": "b"}'}, "toy")) == \
        {"voices": '{"a": "b"}'}


@pytest.mark.parametrize(("values", "message"), [
    ({"n": 1.5}, "--set: toy.n must be an integer (default 1), got 1.5 (float)"),
    ({"n": True}, "toy.n must be an integer (default 1), got True (bool)"),
    ({"x": "0,3"}, "toy.x must be a number (default 0.5), got '0,3' (str)"),
    ({"flag": 1}, "toy.flag must be a bool (default False), got 1 (int)"),
    ({"names": ["a", 2]}, "toy.names must be a list of strings (default [])"),
    ({"voices": ["a"]}, "toy.voices must be a mapping or a string"),
    ({"nn": 2}, "--set: stage 'toy' has no parameter 'nn'; did you mean 'n'?"),
    ({"size": 0}, "--set: toy.size must be >= 1, got 0"),
])
def test_wrong_values_and_keys_are_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_params(_Toy, values, "toy", "--set")
    assert message in str(caught.value)


def test_unfingerprinted_fields_are_named_by_their_metadata() -> None:
    assert unfingerprinted(_Toy) == {"size", "max_failed_fraction"}
    assert build_params(_Toy, {"size": 1}, "toy").size == 1
    assert build_params(_Toy, {"size": None}, "toy").size is None  # unset: the card's
    batched = {load_impl(s.target).Params for g in _GRAPHS for s in g
               if "batch" in unfingerprinted(load_impl(s.target).Params)}
    assert len(batched) >= 2  # the feature and omni stages; none hashes its batch size


def test_types_are_described_in_words() -> None:
    assert describe_type(int) == "an integer" and describe_type(bool) == "a bool"
    assert describe_type(float | None) == "a number or null"
    assert describe_type(list[float]) == "a list of numbers"
    assert describe_type(dict[str, str] | str, bare=True) == "mapping or string"


def test_param_text_is_decoded_for_fields_that_take_no_text() -> None:
    """``--param KEY=VALUE`` is text: a field that takes text keeps it (a path, a slug, JSON
    the stage parses itself); another field's text is read as JSON."""
    graph, deaf = build_graph(), build_deaf_graph()
    assert decode_text_params(graph["evaluate"], {"n_boot": "200", "logo": "false"}) == \
        {"n_boot": 200, "logo": False}
    assert decode_text_params(graph["evaluate"], {"n_boot": "many"}) == {"n_boot": "many"}
    assert decode_text_params(deaf["sic_tts"], {"voices": '{"a": "b"}'}) == \
        {"voices": '{"a": "b"}'}
    assert decode_text_params(graph["ingest"], {"sources": "1"}) == {"sources": "1"}


def test_pod_param_of_the_wrong_type_exits_3(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["stage", "run", "--stage", "evaluate", "--store", str(tmp_path / "s"),
                 "--run-id", "t", "--param", "n_boot=many"])
    assert code == 3
    assert "--param: evaluate.n_boot must be an integer (default 1000), got 'many' (str)" in \
        capsys.readouterr().err


def test_stage_params_refuse_unknown_keys_and_wrong_types() -> None:
    """The workflows' ``stage_params`` JSON: a typo is refused with the closest key (it was
    passed on with a warning), a value of the wrong type names stage, key, type, value."""
    graph = build_graph()
    assert stage_overrides(graph, "split", json.dumps({"split": {"ratios": [0.8, 0.1, 0.1]}})) \
        == {"ratios": [0.8, 0.1, 0.1]}
    with pytest.raises(ConfigError, match=r"--stage-params: stage 'evaluate' has no parameter "
                                          r"'nboot'; did you mean 'n_boot'\?"):
        stage_overrides(graph, "split", json.dumps({"evaluate": {"nboot": 3}}))
    with pytest.raises(ConfigError, match=r"--stage-params: split\.ratios must be a list of "
                                          r"numbers \(default \[0\.7, 0\.1, 0\.2\]\), got 'x'"):
        stage_overrides(graph, "split", json.dumps({"split": {"ratios": "x"}}))


def test_the_engine_builds_the_typed_parameters(tmp_path: Path) -> None:
    """A context is refused for a value of the wrong type, whichever way it came."""
    run = RunStore(open_store(str(tmp_path / "store")), "r")
    graph = build_graph()
    with pytest.raises(ConfigError, match=r"parameters: ingest\.min_duration must be a number"):
        make_context(run, graph, "ingest", {"min_duration": "4"}, "embedded", 0)
    ctx = make_context(run, graph, "ingest", {"min_duration": 3}, "embedded", 0)
    assert ctx.params["min_duration"] == 3 and ctx.params["max_duration"] == 12.0


def test_readme_shows_every_stage_parameter_from_the_fields(tmp_path: Path) -> None:
    """The README's stage-parameter table is generated from the ``Params`` fields between
    its markers (``madbench render``); ``render --check`` reports a stale copy."""
    from madbench_common.cli.cluster import (
        PARAMS_BEGIN,
        PARAMS_END,
        readme_params,
        render_readme_params,
    )

    table = readme_params()
    check_readme_section(tmp_path, render_readme_params, PARAMS_BEGIN, PARAMS_END, table)
    assert "| `source_qc` | `min_speech_coverage` | number | `0.3` | fraction of the clip | " \
           "our choice |" in table
    assert "| `pairing` | `targets` | integer | `4` | target speakers | §3.3 |" in table
    assert "| `features_*` | `models` ‡ |" in table  # an optional field, on 14 stages
