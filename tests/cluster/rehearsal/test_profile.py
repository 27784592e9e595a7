"""The rehearsal profile: its parameters resolve every pod of the workflows, its relaxations
reach the stages through ``stage_params`` (and the check every pod makes of them), and each
relaxation names a parameter its stage has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from madbench_common.benchmarks.madbench.graph import ENV_BRANCHES, GENERATOR_SLOTS, build_graph
from madbench_common.cli.pipeline import stage_overrides
from madbench_common.cluster.argo_local import Executor, SecretRef, Workflow
from madbench_common.cluster.lint import check_pods
from madbench_common.cluster.rehearsal.objectstore import _S3_KEYS, _S3_SECRET
from madbench_common.cluster.rehearsal.preflight import secret_problems
from madbench_common.cluster.rehearsal.profile import load_profile
from madbench_common.cluster.rehearsal.run import _API_SECRET, workflow_params
from madbench_common.cluster.sandbox import STUB_PORT
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.stage import stage_params
from tests.cluster.rehearsal.support import ROOT


@pytest.mark.parametrize("flow", ["smoke", "full", "deaf"])
def test_the_rehearsal_profile_resolves_and_passes_every_pods_check(flow: str) -> None:
    profile = load_profile()
    (wp,) = [f for f in profile.workflows if f.name == flow]
    wf = Workflow.load(ROOT / wp.file)
    params = workflow_params(wf, wp, profile, None, {"stub_port": STUB_PORT})
    assert json.loads(params["stage_params"])  # the relaxations travel in one parameter
    pods = Executor(wf, params, name="w").dry_run()
    sharded = [k for k in wf.parameters() if k.endswith("_shards")]
    assert all(params[k] == wp.params.get(k, str(profile.shards)) for k in sharded)
    problems = [p for p in check_pods(pods) if not p.startswith("warning:")]
    assert all("salmonn" in p for p in problems), problems
    # every secretKeyRef a pod needs is in the local secret set (the deaf rehearsal's
    # bsc_speech could not start for want of AZURE_SPEECH_KEY)
    available = {_S3_SECRET: _S3_KEYS, _API_SECRET: profile.api_keys}
    assert secret_problems(pods, available) == []
    if flow != "smoke":
        # the rehearsal's weights are its own tiny ones: no hub pin to check
        stages = [p for p in pods if "stage" in p.argv and "run" in p.argv]
        assert stages and all("--allow-unpinned=true" in p.argv for p in stages)
    if flow == "deaf":
        needy = [p for p in pods if any(isinstance(v, SecretRef) and v.key == "AZURE_SPEECH_KEY"
                                        for _, v in p.env)]
        assert needy
        less = {**available, _API_SECRET: [k for k in profile.api_keys
                                           if k != "AZURE_SPEECH_KEY"]}
        assert any("AZURE_SPEECH_KEY" in line and "bsc" in line
                   for line in secret_problems(pods, less))
        bsc = next(p for p in needy if "run" in p.argv)
        model_args = next(a for a in bsc.argv if a.startswith("model_args="))
        assert json.loads(model_args.split("=", 1)[1])["base_url"] == \
            f"http://127.0.0.1:{STUB_PORT}"
        judge = next(p for p in pods if "deaf_judge" in p.argv)
        # the judge's endpoint is a workflow parameter of its own (deaf_judge_judge_base_url)
        assert f"judge_base_url=http://127.0.0.1:{STUB_PORT}/v1" in judge.argv
        assert "judge_model_id=stub-judge" in judge.argv
        doc = json.loads(judge.argv[judge.argv.index("--stage-params") + 1])
        assert "judge_base_url" not in doc["deaf_judge"]


def test_stage_params_pick_this_stages_entry() -> None:
    graph = build_graph()
    text = json.dumps({"source_qc": {"min_speech_coverage": 0.1}, "split": {"ratios": [1, 0, 0]}})
    assert stage_overrides(graph, "source_qc", text) == {"min_speech_coverage": 0.1}
    assert stage_overrides(graph, "ingest", text) == {}
    assert stage_overrides(graph, "ingest", "") == {}


@pytest.mark.parametrize("text,match", [
    ('{"sepparate": {}}', "unknown stage 'sepparate'"),
    ('{"separate": {"model": "x"}}', "separate_model"),
    ('{"ingest": {"sources": "s3://x"}}', "-p sources"),
    ('[1]', "JSON object"),
    ('{"ingest": 3}', "JSON object"),
    ('{not json', "not JSON"),
])
def test_stage_params_refuse_what_a_pod_must_not_run_with(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        stage_overrides(build_graph(), "ingest", text)


def test_an_undeclared_key_is_refused_with_the_closest_one() -> None:
    """A typo in a profile's stage_params fails the pod at once (it used to run, warned,
    with a new fingerprint and nothing else changed)."""
    with pytest.raises(ConfigError, match=r"--stage-params: stage 'ingest' has no parameter "
                                          r"'min_duraton'; did you mean 'min_duration'\?"):
        stage_overrides(build_graph(), "ingest", '{"ingest": {"min_duraton": 1}}')


def test_stage_params_change_the_stage_fingerprint(tmp_path: Path) -> None:
    from madbench_common.cli import build_parser
    from madbench_common.cli.pipeline import _context

    sources = tmp_path / "sources.csv"  # ingest's fingerprint reads the listing's content
    sources.write_text("source_id,path\n")

    def fp(extra: list[str]) -> tuple[str, dict[str, Any]]:
        args = build_parser().parse_args(
            ["stage", "run", "--stage", "ingest", "--store", str(tmp_path / "store"),
             "--run-id", "r", "--param", f"sources={sources}", *extra])
        ctx = _context(args)
        return ctx.fingerprint, ctx.params

    base, params = fp([])
    relaxed, relaxed_params = fp(["--stage-params", '{"ingest": {"min_duration": 1.0}}'])
    assert relaxed != base and relaxed_params["min_duration"] == 1.0
    assert params["min_duration"] == 4.0
    assert fp(["--stage-params", '{"split": {"cluster_threshold": 0.3}}'])[0] == base


def test_a_key_with_its_own_workflow_parameter_is_refused_in_stage_params() -> None:
    from madbench_common.benchmarks.deaf.graph import build_deaf_graph

    graph = build_deaf_graph()
    assert "voices" in graph["sic_tts"].workflow_params
    with pytest.raises(ConfigError, match="sic_tts_voices"):
        stage_overrides(graph, "deaf_judge", '{"sic_tts": {"voices": {"young_male": "v"}}}')


# keys stages read without declaring a default (madbench_common/benchmarks/deaf/stages_eval.py,
# judge)
_OPTIONAL_KEYS = {"max_new_tokens", "rpm", "model_args"}

@pytest.mark.parametrize("flow", ["smoke", "full", "deaf"])
def test_every_relaxation_of_the_profile_names_a_parameter_its_stage_has(flow: str) -> None:
    """A stage parameter renamed upstream would silently undo a relaxation: fail instead."""
    from madbench_common.cluster.rehearsal.profile import _graph_for
    from madbench_common.pipeline.stage import stage_params

    (wp,) = [f for f in load_profile().workflows if f.name == flow]
    graph = _graph_for(flow).profiled("full")
    for stage, values in wp.stage_params.items():
        declared = set(stage_params(graph[stage], {}))
        assert set(values) - declared <= _OPTIONAL_KEYS, (stage, set(values) - declared)


def test_profile_fields_leave_json_braces_alone() -> None:
    from madbench_common.cluster.rehearsal.profile import _fill, _param_text

    text = _param_text({"base_url": "http://127.0.0.1:{stub_port}", "rpm": 0})
    assert json.loads(_fill(text, {"stub_port": 7})) == {"base_url": "http://127.0.0.1:7",
                                                         "rpm": 0}
    assert _fill("{other}", {"stub_port": 7}) == "{other}"
    assert _param_text(True) == "true" and _param_text(False) == "false"


def test_the_profile_s_model_args_are_constructor_arguments_of_the_full_models() -> None:
    """A generator's ``model_args`` (diffusion steps) must name an argument of the class the
    full graph loads there, or the pod fails at load (exit 3) an hour into a pass."""
    import importlib
    import inspect

    from madbench_common.cluster.rehearsal.profile import _graph_for
    from madbench_common.models.registry import REGISTRY

    (wp,) = [f for f in load_profile().workflows if f.name == "full"]
    graph = _graph_for("full").profiled("full")
    checked = 0
    for stage, values in wp.stage_params.items():
        args = values.get("model_args")
        if not args:
            continue
        slug = graph[stage].model
        module, _, name = REGISTRY[slug].target.partition(":")
        accepted: set[str] = set()
        for cls in getattr(importlib.import_module(module), name).__mro__:  # **kwargs → base
            params = inspect.signature(cls.__init__).parameters
            accepted |= set(params)
            if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                break
        assert set(args) <= accepted, (stage, slug, set(args) - accepted)
        checked += 1
    assert checked >= 4


def test_a_generator_stage_passes_its_model_args_to_the_model(tmp_path: Path) -> None:
    from madbench_common.models.registry import load_model_with, model_args

    assert model_args('{"steps": 5}') == {"steps": 5} and model_args("") == {}
    with pytest.raises(ConfigError, match="not JSON"):
        model_args("{steps")
    with pytest.raises(ConfigError, match=r"model_args\.steps"):
        load_model_with("ref-layered-t2a", {"steps": [5]})
    with pytest.raises(ConfigError, match="no_such_argument"):
        load_model_with("ref-layered-t2a", {"no_such_argument": 1})
    graph = build_graph()
    assert all(stage_params(graph[f"env_{b}_{s}"], {})["model_args"] == {}
               for b in ENV_BRANCHES for s in GENERATOR_SLOTS)
