"""workflows/deaf.yaml: current, the DEAF graph's DAG, GPU requests, API keys only
by secretKeyRef, pods that run the ``madbench deaf`` commands. The strict schema, reference,
parameter, lock-down and S3-secret checks of tests/pipeline/test_argo.py run over it too (they glob
``workflows/*.yaml``)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from madbench_common.benchmarks.deaf.graph import PAPER_MODELS, build_deaf_graph
from madbench_common.benchmarks.deaf.workflow import deaf_lock, render_deaf_workflow
from madbench_common.pipeline.argo import API_EGRESS_LABEL, ClusterProfile, ImageLock
from madbench_common.pipeline.argo_limits import ETCD_LIMIT_BYTES, workflow_limits
from tests.paths import LOCK, ROOT
from tests.pipeline.test_argo import task_deps, task_runs
from tests.yaml_docs import load_yaml

PROFILE = ROOT / "k8s" / "overlays" / "gpu-nodepool" / "cluster-profile.yaml"
DEAF = ROOT / "workflows" / "deaf.yaml"
_KEYS = {"GEMINI_API_KEY", "OPENAI_API_KEY", "ELEVENLABS_API_KEY", "JUDGE_API_KEY",
         "AZURE_SPEECH_KEY"}


def _doc() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(DEAF)
    return data


def _templates() -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in _doc()["spec"]["templates"]}


def _params() -> dict[str, str]:
    return {p["name"]: p["value"] for p in _doc()["spec"]["arguments"]["parameters"]}


def _shard(stage: str) -> dict[str, Any]:
    return _templates()[f"{stage.replace('_', '-')}-shard"]


def test_deaf_workflow_is_current(tmp_path: Path) -> None:
    lock, profile = ImageLock.load(LOCK), ClusterProfile.load(PROFILE)
    assert render_deaf_workflow(lock, profile, ROOT / "workflows", check=True) == []
    assert render_deaf_workflow(lock, profile, tmp_path, check=True) == [tmp_path / "deaf.yaml"]
    render_deaf_workflow(lock, profile, tmp_path)
    assert (tmp_path / "deaf.yaml").read_text() == DEAF.read_text()


def test_dag_follows_the_deaf_graph() -> None:
    graph = build_deaf_graph()
    tasks = {t["name"]: t for t in _templates()["madbench"]["dag"]["tasks"]}
    assert len(tasks) == 2 * len(graph.stages)
    for stage in graph:
        name = stage.name.replace("_", "-")
        deps = {f"{d.replace('_', '-')}-merge" for d in stage.inputs}
        assert set(task_deps(tasks[name])) == deps
        assert tasks[f"{name}-merge"]["depends"] == name
    # one dependency style per DAG: Argo refuses a DAG template that mixes them
    # (validateDAG, workflow/validate/validate.go:1393-1395 at v3.7.18)
    assert not any("dependencies" in t for t in tasks.values())
    answers = {f"answer-{m.name.replace('_', '-')}-merge" for m in PAPER_MODELS}
    assert answers <= set(task_deps(tasks["deaf-judge"]))


def _outcome(tasks: dict[str, dict[str, Any]], failed: set[str]) -> dict[str, str]:
    """Each task's result when the tasks in ``failed`` fail, as Argo schedules a DAG with
    ``failFast: false`` (a task whose dependencies are unmet is Omitted)."""
    results: dict[str, str] = {}
    while len(results) < len(tasks):
        for name, task in tasks.items():
            if name in results or not all(d in results for d in task_deps(task)):
                continue
            if not task_runs(task, results):
                results[name] = "Omitted"
            else:
                results[name] = "Failed" if name in failed else "Succeeded"
    return results


def test_a_failed_answer_stage_blocks_neither_judge_nor_report() -> None:
    """One model's answer shards fail: every other stage still runs, through the report
    (which names the absent model: tests/benchmarks/deaf/test_pipeline.py); the workflow ends
    Failed.
    A failed stimulus stage still stops what needs it."""
    dag = _templates()["madbench"]["dag"]
    assert dag["failFast"] is False
    tasks = {t["name"]: t for t in dag["tasks"]}
    after = _outcome(tasks, {"answer-salmonn"})
    assert after["answer-salmonn"] == "Failed" and after["answer-salmonn-merge"] == "Omitted"
    assert {n: r for n, r in after.items() if r != "Succeeded"} == {
        "answer-salmonn": "Failed", "answer-salmonn-merge": "Omitted"}
    assert after["deaf-report-merge"] == "Succeeded"
    merge_failed = _outcome(tasks, {"answer-qwen2-audio-merge"})
    assert merge_failed["deaf-judge"] == merge_failed["deaf-report"] == "Succeeded"
    no_trials = _outcome(tasks, {"deaf-trials"})
    assert {no_trials[n] for n in ("deaf-judge", "deaf-metrics", "deaf-report")} == {"Omitted"}
    assert _outcome(tasks, set())["deaf-report-merge"] == "Succeeded"
    # every task is a target, so the omitted merge fails the DAG (assessDAGPhase)
    assert dag["target"].split() == list(tasks)


def test_a_failed_answer_fails_the_workflow_on_the_local_executor() -> None:
    """deaf.yaml itself, run by the local executor (Argo's scheduling and DAG phase) with
    pods that succeed except one model's answer shards: the judge and the report run, and
    the workflow ends Failed, naming the failed pods."""
    from madbench_common.cluster.argo_local import Executor, PodResult, Workflow
    from tests.cluster.test_argo_local import Recorder

    runner = Recorder(lambda pod, attempt: PodResult("Failed", 3, "boom")
                      if pod.template == "answer-salmonn-shard" else PodResult("Succeeded", 0))
    result = Executor(Workflow.load(DEAF), runner=runner, workers=4, name="d").run()
    assert result.phase == "Failed"
    assert {f["templateName"] for f in result.failures} == {"answer-salmonn-shard"}
    assert {"d.deaf-report-merge", "d.deaf-judge-merge"} <= set(runner.order())
    assert result.nodes["d.answer-salmonn-merge"]["phase"] == "Omitted"


def test_sic_voices_are_a_workflow_parameter() -> None:
    """ElevenLabs voices per SIC profile: a parameter with the documented default set,
    passed verbatim to sic_tts's pods (and parsed there)."""
    from madbench_common.benchmarks.deaf.design import ELEVENLABS_VOICES, VOICE_PROFILES
    from madbench_common.benchmarks.deaf.stages_stimuli import parse_voices

    value = _params()["sic_tts_voices"]
    assert parse_voices(value) == dict(ELEVENLABS_VOICES)
    assert set(ELEVENLABS_VOICES) == {p.name for p in VOICE_PROFILES}
    for verb in ("shard", "merge"):
        args = _templates()[f"sic-tts-{verb}"]["container"]["args"]
        assert "voices={{workflow.parameters.sic_tts_voices}}" in args
        assert "voices" not in json.loads(args[args.index("--params-json") + 1]) \
            if "--params-json" in args else True


def _substitute(arg: str, params: dict[str, str]) -> str:
    """``arg`` as Argo would pass it: parameter defaults, shard 0, a run id, workflow fields."""
    arg = re.sub(r"\{\{workflow\.parameters\.([A-Za-z0-9_-]+)\}\}",
                 lambda m: params[m.group(1)], arg)
    arg = arg.replace("{{inputs.parameters.shard}}", "0")
    return re.sub(r"\{\{=?[^}]*\}\}", "x", arg)


def test_pods_run_the_deaf_commands_and_parse() -> None:
    """Every pod's argv is a valid ``madbench deaf`` command line; no MADBench ``sources``."""
    from madbench_common.cli import build_parser

    parser, params = build_parser(), _params()
    for tpl in _templates().values():
        if "container" not in tpl:
            continue
        args = [_substitute(a, params) for a in tpl["container"]["args"]]
        assert tpl["container"]["command"] == ["madbench"] and args[0] == "deaf", tpl["name"]
        ns = parser.parse_args(args)
        if args[1] == "stage":  # MADBench's pod path, on the DEAF graph
            assert ns.func.__module__ == "madbench_common.cli.pipeline", tpl["name"]
            assert ns.stage in ns.graph_of(ns).stages, tpl["name"]
        else:
            assert ns.func.__module__ == "madbench_common.cli.deaf", tpl["name"]
    assert "sources" not in _params()
    assert not any(a.startswith("sources=") for a in _shard("deaf_sentences")["container"]["args"])


def test_full_profile_runs_the_papers_models_on_gpu_images() -> None:
    params, lock = _params(), deaf_lock(ImageLock.load(LOCK))
    for model in PAPER_MODELS:
        shard = _shard(model.stage)
        assert params[f"{model.stage}_model"] == model.slug
        assert params[f"{model.stage}_image"] == lock.ref(model.image)
        resources = shard["container"]["resources"]
        if model.gpu:
            assert resources["requests"]["nvidia.com/gpu"] == "1" == \
                resources["limits"]["nvidia.com/gpu"]
            assert resources["limits"]["memory"] == model.memory
            assert shard["nodeSelector"] == ClusterProfile.load(PROFILE).gpu_node_selector
            assert "/weights" in {m["mountPath"] for m in shard["container"]["volumeMounts"]}
        else:
            assert "nvidia.com/gpu" not in json.dumps(shard) and "nodeSelector" not in shard
    assert params["sic_tts_model"] == "deaf-elevenlabs"


def test_judge_is_r1_for_every_answer_and_its_endpoint_a_parameter() -> None:
    """§2.4/§3.1: DeepSeek-R1 labels every answer. Mode, endpoint and model are workflow
    parameters (deepseek-reasoner no longer serves R1), passed verbatim to the judge pods."""
    from madbench_common.benchmarks.deaf.judge import R1_BASE_URL, R1_MODEL

    params = _params()
    assert (params["deaf_judge_mode"], params["deaf_judge_judge_base_url"],
            params["deaf_judge_judge_model_id"]) == ("llm", R1_BASE_URL, R1_MODEL)
    assert "deepseek-reasoner" not in DEAF.read_text()
    for verb in ("shard", "merge"):
        args = _templates()[f"deaf-judge-{verb}"]["container"]["args"]
        for key in ("mode", "judge_base_url", "judge_model_id"):
            assert f"{key}={{{{workflow.parameters.deaf_judge_{key}}}}}" in args


def test_qwen3_omni_asks_for_an_80gb_class_gpu_and_ram_for_its_load_path() -> None:
    """The thinker is ~59 GiB in bf16 and is loaded in host memory before moving to the
    GPU: 80 GiB for the pod, and a node whose GPUs have more than 70 GiB (GFD label)."""
    shard = _shard("answer_qwen3_omni")
    assert shard["container"]["resources"]["limits"]["memory"] == "80Gi"
    terms = shard["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": [str(70 * 1024 - 1)]}]}]
    assert ClusterProfile.load(PROFILE).gpu_memory_label == "nvidia.com/gpu.memory"
    for other in ("answer_qwen2_audio", "answer_salmonn", "answer_gpt_4o_audio"):
        assert "affinity" not in _shard(other)
    assert "affinity" not in _templates()["answer-qwen3-omni-merge"]


def test_paper_stimuli_parameters() -> None:
    """EMIS and DEMAND from the data volume by default (another copy by parameter), the ESC
    emotional-TTS slot, and BSC speech from Microsoft neural TTS (en-US-GuyNeural) with its
    key from the Secret."""
    params = _params()
    for name in ("deaf_sentences_emis", "esc_tts_a_emis", "esc_tts_b_emis", "esc_tts_c_emis"):
        assert params[name] == "/data/emis"
    assert params["deaf_envlib_demand"] == "/data/demand"
    assert params["esc_tts_a_model"] == "ref-deaf-emotion-a"
    assert json.loads(params["esc_tts_a_model_args"]) == {}
    assert params["bsc_speech_model"] == "deaf-azure-tts"
    assert json.loads(params["bsc_speech_model_args"]) == {
        "region": "eastus", "voices": {"narrator": "en-US-GuyNeural"}}
    args = _shard("deaf_envlib")["container"]["args"]
    assert "demand={{workflow.parameters.deaf_envlib_demand}}" in args
    assert _api_keys(_shard("bsc_speech")).keys() == {"AZURE_SPEECH_KEY"}


def test_images_missing_from_the_lock_get_planned_slots() -> None:
    lock = ImageLock({"reference-cpu": {"ref": "r/ref:1", "digest": None}})
    slots = deaf_lock(lock)
    assert slots.ref("reference-cpu") == "r/ref:1"  # the lock's entry wins
    assert slots.ref("deaf-tf5") == "ghcr.io/madbench/deaf-tf5:0.1.0"
    assert slots.entries["deaf-salmonn"]["status"] == "planned"


def _api_keys(tpl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in tpl.get("container", {}).get("env", []) if e["name"] in _KEYS}


def test_api_keys_only_by_secret_ref_and_only_where_declared() -> None:
    profile = ClusterProfile.load(PROFILE)
    graph = build_deaf_graph()
    seen: set[str] = set()
    for name, tpl in _templates().items():
        keys = _api_keys(tpl)
        stage = tpl.get("metadata", {}).get("labels", {}).get("madbench.io/stage")
        want = set(graph[stage].secrets) if stage and name.endswith("-shard") else set()
        assert set(keys) == want, name
        for key, env in keys.items():
            assert "value" not in env
            assert env["valueFrom"]["secretKeyRef"] == {"name": profile.api_secret, "key": key}
        labels = tpl.get("metadata", {}).get("labels", {})
        assert (labels.get("madbench.io/egress") == "api") == bool(keys), name
        seen |= set(keys)
    assert seen == _KEYS
    assert _api_keys(_shard("answer_gpt_4o_audio")).keys() == {"OPENAI_API_KEY"}
    assert _api_keys(_shard("sic_tts")).keys() == {"ELEVENLABS_API_KEY"}
    assert not _api_keys(_shard("answer_qwen2_audio"))


def test_no_key_value_anywhere_in_the_workflow() -> None:
    text = DEAF.read_text()
    for key in _KEYS:
        assert text.count(f"name: {key}") == text.count(f"key: {key}") > 0


def test_only_api_pods_may_reach_https() -> None:
    docs = yaml.safe_load_all((ROOT / "k8s" / "base" / "networkpolicy.yaml").read_text())
    policy = {d["metadata"]["name"]: d for d in docs}["allow-api-stages-to-https"]
    assert policy["spec"]["podSelector"] == {"matchLabels": API_EGRESS_LABEL}
    assert [p["port"] for r in policy["spec"]["egress"] for p in r["ports"]] == [443]


def test_profile_names_the_api_secret(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiSecret: my-keys\n")
    assert ClusterProfile.load(path).api_secret == "my-keys"
    assert ClusterProfile().api_secret == "madbench-api-keys"


def test_deaf_workflow_fits_etcd() -> None:
    limits = workflow_limits(_doc(), build_deaf_graph(), {})
    assert limits.object_bytes < 0.5 * ETCD_LIMIT_BYTES


@pytest.mark.parametrize("verb", ["run", "merge"])
def test_stage_command_takes_verbatim_params(verb: str) -> None:
    from madbench_common.cli import build_parser
    from madbench_common.cli import pipeline as cli_pipeline

    argv = ["deaf", "stage", verb, "--stage", "answer_qwen2_audio", "--store", "/x",
            "--run-id", "r", "--param", "model=a=b", "--params-json", '{"repeats": 1}']
    ns = build_parser().parse_args(argv)
    assert isinstance(ns, argparse.Namespace) and ns.param == ["model=a=b"]
    captured: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli_pipeline, "make_context",
                   lambda *a: captured.setdefault("params", a[3]))
        cli_pipeline._context(ns)
    assert captured["params"] == {"repeats": 1, "model": "a=b"}


# ------------------------------------------------------------------ the paper's data sets


_DATA_STAGES = ("deaf_sentences", "deaf_envlib", "esc_tts_a", "esc_tts_b", "esc_tts_c")


def test_full_profile_reads_the_data_volume_and_refuses_stand_ins() -> None:
    """deaf.yaml's full profile names the data-volume paths that workflows/data.yaml fills
    (DEMAND for BSC, EMIS for the sentences and the ESC emotional-TTS slot), mounts the
    volume read-only, and refuses the embedded stand-ins (-p <stage>_stand_ins=allow opts in)."""
    from madbench_common.pipeline.paper_data import DATA_PATHS, DATA_ROOT

    params, profile = _params(), ClusterProfile.load(PROFILE)
    assert DATA_PATHS == {"demand": "/data/demand", "emis": "/data/emis"}
    full = build_deaf_graph().profiled("full")
    assert full["deaf_envlib"].params["demand"] == DATA_PATHS["demand"]
    for stage in ("deaf_sentences", "esc_tts_a", "esc_tts_b", "esc_tts_c"):
        assert full[stage].params["emis"] == DATA_PATHS["emis"]
    for stage in _DATA_STAGES:
        assert params[f"{stage}_stand_ins"] == "refuse"
        for verb in ("shard", "merge"):
            tpl = _templates()[f"{stage.replace('_', '-')}-{verb}"]
            assert f"stand_ins={{{{workflow.parameters.{stage}_stand_ins}}}}" in \
                tpl["container"]["args"]
            mounts = {m["name"]: m for m in tpl["container"]["volumeMounts"]}
            assert mounts["data"] == {"mountPath": DATA_ROOT, "name": "data", "readOnly": True}
    volumes = {v["name"]: v for v in _doc()["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"] == {"claimName": profile.data_claim,
                                                        "readOnly": True}
    # the embedded (local/demo) profile keeps the stand-ins as its default
    embedded = build_deaf_graph()
    for stage in _DATA_STAGES:
        assert not embedded[stage].params.get("emis") and not embedded[stage].params.get("demand")
        assert "stand_ins" not in embedded[stage].params


def test_madbench_workflows_do_not_mount_the_data_volume() -> None:
    for name in ("full.yaml", "smoke.yaml", "weights.yaml"):
        doc = load_yaml(ROOT / "workflows" / name)
        assert "data" not in {v["name"] for v in doc["spec"]["volumes"]}, name
