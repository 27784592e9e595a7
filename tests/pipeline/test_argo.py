"""Tests for the Argo compiler: golden files, strict schema, DAG checks, image swaps, robustness."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.argo import (
    VARIANTS,
    ClusterProfile,
    ImageLock,
    compile_workflow,
    render_workflows,
    workflow_yaml,
    write_exit_summary,
)
from madbench_common.pipeline.graph import Graph, Stage
from tests.paths import LOCK, ROOT
from tests.yaml_docs import load_yaml

SCHEMA = ROOT.parent / "shared" / "schemas" / "argo-workflows.schema.json"
PROFILE = ROOT / "k8s" / "overlays" / "gpu-nodepool" / "cluster-profile.yaml"
WORKFLOWS = sorted((ROOT / "workflows").glob("*.yaml"))
PIPELINES = [p for p in WORKFLOWS if p.name not in ("weights.yaml", "data.yaml")]
GRAPH_SOURCE = "madbench_common/benchmarks/madbench/graph.py"
"""What ``madbench render`` names as full.yaml's and smoke.yaml's source."""
_PARAM = re.compile(r"\{\{workflow\.parameters\.([A-Za-z0-9_-]+)\}\}")


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(path)
    return data


def _compile(graph: Graph, variant: str) -> dict[str, Any]:
    wf = compile_workflow(graph, VARIANTS[variant], ImageLock.load(LOCK),
                          ClusterProfile.load(PROFILE))
    data: dict[str, Any] = yaml.safe_load(workflow_yaml(wf))
    return data


# ------------------------------------------------------------------ golden


def test_committed_workflows_are_current() -> None:
    stale = render_workflows(build_graph(), ImageLock.load(LOCK), ClusterProfile.load(PROFILE),
                             ROOT / "workflows", check=True, source=GRAPH_SOURCE)
    assert not stale, f"stale: {stale}; run `madbench render` and commit the result"


def test_render_check_reports_stale_and_render_writes(tmp_path: Path) -> None:
    args = (build_graph(), ImageLock.load(LOCK), ClusterProfile.load(PROFILE), tmp_path)
    assert len(render_workflows(*args, check=True, source=GRAPH_SOURCE)) == 2
    assert not list(tmp_path.iterdir())
    render_workflows(*args, source=GRAPH_SOURCE)
    assert render_workflows(*args, check=True, source=GRAPH_SOURCE) == []
    assert (tmp_path / "full.yaml").read_text() == (ROOT / "workflows" / "full.yaml").read_text()


def test_cli_render_check_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from madbench_common.cli import cluster as cli_cluster

    parser = argparse.ArgumentParser()
    cli_cluster.add_commands(parser.add_subparsers())
    argv = ["render", "--out", str(tmp_path), "--lock", str(LOCK), "--profile", str(PROFILE)]
    args = parser.parse_args([*argv, "--check"])
    assert args.func(args) == 1
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    args = parser.parse_args([*argv, "--check"])
    assert args.func(args) == 0


# ------------------------------------------------------------------ strict schema


def _strict(node: Any) -> Any:
    """additionalProperties: false on every object schema that lists its properties."""
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            _strict(value)
    elif isinstance(node, list):
        for value in node:
            _strict(value)
    return node


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    if not SCHEMA.exists():
        pytest.skip(f"{SCHEMA} not found (shared/ schemas are beside the repository)")
    full = _strict(json.loads(SCHEMA.read_text()))
    schema = {"$ref": "#/definitions/io.argoproj.workflow.v1alpha1.Workflow",
              "definitions": full["definitions"]}
    cls = jsonschema.validators.validator_for(full)
    return cls(schema)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_strict_schema(path: Path, validator: Any) -> None:
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}"
              for e in validator.iter_errors(_load(path))]
    assert not errors, "\n".join(errors[:20])


def test_strict_schema_rejects_misspelled_key(validator: Any) -> None:
    doc = _load(ROOT / "workflows" / "full.yaml")
    task = doc["spec"]["templates"][0]["dag"]["tasks"][1]
    task["dependancies"] = task.pop("dependencies")
    assert list(validator.iter_errors(doc))


def test_gpu_quantities_are_strings() -> None:
    text = (ROOT / "workflows" / "full.yaml").read_text()
    assert not re.search(r"nvidia\.com/gpu: \d", text)


# ------------------------------------------------------------------ DAG references


_DEP = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]*)(?:\.([A-Za-z]+))?")
_PLAIN = ("Succeeded", "Skipped", "Daemoned")


def task_deps(task: dict[str, Any]) -> list[str]:
    """The tasks a DAG task waits for: its ``dependencies``, or the names in ``depends``."""
    if "depends" in task:
        assert "dependencies" not in task, f"{task['name']}: both dependencies and depends"
        return list(dict.fromkeys(m.group(1) for m in _DEP.finditer(task["depends"])))
    return list(task.get("dependencies", []))


def task_runs(task: dict[str, Any], results: dict[str, str]) -> bool:
    """Whether Argo starts ``task`` given its dependencies' results (``Succeeded``,
    ``Failed``, ``Omitted``, …): ``dependencies`` need each to have succeeded; ``depends``
    is evaluated as Argo's enhanced depends logic (a bare name: Succeeded, Skipped or
    Daemoned)."""
    if "depends" not in task:
        return all(results[d] in _PLAIN for d in task.get("dependencies", []))

    def term(m: re.Match[str]) -> str:
        name, result = m.group(1), m.group(2)
        ok = results[name] == result if result else results[name] in _PLAIN
        return f" {ok} "

    expr = _DEP.sub(term, task["depends"]).replace("&&", " and ").replace("||", " or ")
    assert re.fullmatch(r"[\sA-Za-z()!]*", expr), expr
    return bool(eval(expr.replace("!", " not ")))  # only True/False, and/or/not, parentheses


def test_depends_evaluation_follows_argo() -> None:
    task = {"name": "j", "depends": "a && (b || b.Failed || b.Omitted)"}
    assert task_runs(task, {"a": "Succeeded", "b": "Succeeded"})
    assert task_runs(task, {"a": "Succeeded", "b": "Omitted"})
    assert not task_runs(task, {"a": "Omitted", "b": "Succeeded"})
    assert not task_runs({"name": "k", "dependencies": ["a"]}, {"a": "Failed"})
    assert task_deps(task) == ["a", "b"]


def _check_references(doc: dict[str, Any]) -> None:
    templates = {t["name"]: t for t in doc["spec"]["templates"]}
    assert len(templates) == len(doc["spec"]["templates"]), "duplicate template names"
    used = {doc["spec"]["entrypoint"], doc["spec"].get("onExit", doc["spec"]["entrypoint"])}
    for tpl in templates.values():
        tasks = tpl.get("dag", {}).get("tasks", [])
        names = {t["name"] for t in tasks}
        assert len(names) == len(tasks), f"{tpl['name']}: duplicate task names"
        for task in tasks:
            assert task["template"] in templates, f"{task['name']} → {task['template']}"
            used.add(task["template"])
            for dep in task_deps(task):
                assert dep in names, f"{tpl['name']}/{task['name']} depends on unknown {dep}"
        _check_acyclic({t["name"]: task_deps(t) for t in tasks})
    assert used <= set(templates)
    assert set(templates) - used == set(), f"unreachable templates: {set(templates) - used}"


def _check_acyclic(deps: dict[str, list[str]]) -> None:
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        assert state.get(name) != 1, f"cycle through {name}"
        if state.get(name) == 2:
            return
        state[name] = 1
        for dep in deps[name]:
            visit(dep)
        state[name] = 2

    for name in deps:
        visit(name)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_task_references_and_no_cycles(path: Path) -> None:
    _check_references(_load(path))


def test_reference_check_catches_cycle() -> None:
    with pytest.raises(AssertionError, match="cycle"):
        _check_acyclic({"a": ["b"], "b": ["a"]})


def test_every_parameter_used_is_declared() -> None:
    for path in WORKFLOWS:
        text = path.read_text()
        declared = {p["name"] for p in _load(path)["spec"]["arguments"]["parameters"]}
        assert set(_PARAM.findall(text)) <= declared, path.name


def test_dag_follows_graph() -> None:
    graph = build_graph()
    tasks = {t["name"]: t for t in _load(ROOT / "workflows" / "full.yaml")["spec"]["templates"][0]
             ["dag"]["tasks"]}
    for stage in graph:
        name = stage.name.replace("_", "-")
        deps = {f"{d.replace('_', '-')}-merge" for d in stage.inputs}
        assert set(task_deps(tasks[name])) == deps
        assert tasks[f"{name}-merge"]["dependencies"] == [name]


# ------------------------------------------------------------------ image parameters


def _effective_pods(doc: dict[str, Any], overrides: dict[str, str]) -> dict[str, str]:
    """Each container template with workflow parameters substituted, as `argo submit -p` would."""
    values = {p["name"]: p.get("value", "") for p in doc["spec"]["arguments"]["parameters"]}
    values.update(overrides)
    out = {}
    for tpl in doc["spec"]["templates"]:
        if "container" in tpl:
            text = json.dumps(tpl, sort_keys=True)
            out[tpl["name"]] = _PARAM.sub(lambda m: values[m.group(1)], text)
    return out


@pytest.mark.parametrize("stage", [s.name for s in build_graph()])
def test_swapping_one_image_changes_only_that_stage(stage: str) -> None:
    doc = _load(ROOT / "workflows" / "full.yaml")
    before = _effective_pods(doc, {})
    after = _effective_pods(doc, {f"{stage}_image": "example.org/other@sha256:" + "0" * 64})
    changed = {name for name in before if before[name] != after[name]}
    prefix = stage.replace("_", "-")
    assert changed == {f"{prefix}-shard", f"{prefix}-merge"}
    assert "example.org/other" in after[f"{prefix}-shard"]


def test_image_defaults_come_from_lock() -> None:
    lock = ImageLock.load(LOCK)
    for variant in ("full", "smoke"):
        doc = _load(ROOT / "workflows" / f"{variant}.yaml")
        params = {p["name"]: p["value"] for p in doc["spec"]["arguments"]["parameters"]}
        for stage in build_graph():
            slug = "reference-cpu" if variant == "smoke" else stage.in_profile("full").image
            assert params[stage.image_param] == lock.ref(slug)


def test_full_profile_runs_the_papers_speech_models_and_smoke_the_references() -> None:
    """full.yaml defaults the six speech stages to the paper's generators;
    smoke.yaml and the embedded default (``Stage.model``) stay on the CPU references."""
    from madbench_common.models.registry import REGISTRY

    full, smoke = (_load(ROOT / "workflows" / f"{v}.yaml") for v in ("full", "smoke"))
    fp, sp = ({p["name"]: p["value"] for p in d["spec"]["arguments"]["parameters"]}
              for d in (full, smoke))
    want = {"speech_tts_same_a": "tts-f5-same", "speech_tts_same_b": "tts-indextts2-same",
            "speech_tts_cross_a": "tts-f5-cross", "speech_tts_cross_b": "tts-indextts2-cross",
            "speech_vc_a": "vc-seedvc", "speech_vc_b": "vc-vevo"}
    for stage in build_graph():
        if stage.name not in want:
            continue
        slug = want[stage.name]
        spec = REGISTRY[slug]
        assert fp[f"{stage.name}_model"] == slug and not spec.reference
        assert fp[stage.image_param].split("/")[-1].startswith(f"{spec.image}:")
        assert REGISTRY[sp[f"{stage.name}_model"]].reference
        assert REGISTRY[stage.model].reference and sp[stage.image_param].split("/")[-1] \
            .startswith("reference-cpu:")
    after = _effective_pods(full, {"speech_vc_a_image": "example.org/vc@sha256:" + "1" * 64})
    assert "example.org/vc" in after["speech-vc-a-shard"]


def test_lock_digest_pins_image() -> None:
    entry = {"ref": "r/x:1", "digest": "sha256:" + "a" * 64}
    assert ImageLock({"x": entry}).ref("x") == "r/x:1@sha256:" + "a" * 64
    assert ImageLock({"x": {"ref": "r/x:1", "digest": None}}).ref("x") == "r/x:1"
    with pytest.raises(ConfigError, match="digest"):
        ImageLock({"x": {"ref": "r/x:1", "digest": "md5:1"}}).ref("x")
    with pytest.raises(ConfigError, match="not in the images lock"):
        ImageLock({}).ref("nope")


# ------------------------------------------------------------------ robustness


def _container_templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in doc["spec"]["templates"] if "container" in t]


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_every_pod_is_locked_down(path: Path) -> None:
    doc = _load(path)
    spec = doc["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["podGC"]["strategy"] and spec["ttlStrategy"] and spec["archiveLogs"] is True
    assert spec["onExit"] == "summary"
    for tpl in _container_templates(doc):
        sc = tpl["container"]["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["runAsNonRoot"] is True and sc["capabilities"]["drop"] == ["ALL"]
        assert int(tpl["activeDeadlineSeconds"]) > 0
        assert "/tmp" in {m["mountPath"] for m in tpl["container"]["volumeMounts"]}


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_s3_credentials_only_from_secret(path: Path) -> None:
    for tpl in _container_templates(_load(path)):
        env = {e["name"]: e for e in tpl["container"]["env"]}
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"):
            assert "value" not in env[key] and env[key]["valueFrom"]["secretKeyRef"]["key"] == key
        assert env["HF_HUB_OFFLINE"]["value"] == "1"


def test_retries_skip_deterministic_failures() -> None:
    doc = _load(ROOT / "workflows" / "full.yaml")
    for tpl in _container_templates(doc):
        if tpl["name"] == "summary":
            continue
        retry = tpl["retryStrategy"]
        assert retry["expression"] == 'lastRetry.exitCode != "3"'
        assert retry["backoff"]["duration"] and int(retry["backoff"]["factor"]) > 1


def test_fanout_by_shard_index_with_parallelism_cap() -> None:
    doc = _load(ROOT / "workflows" / "full.yaml")
    templates = {t["name"]: t for t in doc["spec"]["templates"]}
    for stage in build_graph():
        name = stage.name.replace("_", "-")
        if stage.sharded:
            fanout = templates[f"{name}-fanout"]
            assert fanout["parallelism"] == stage.parallelism
            seq = fanout["dag"]["tasks"][0]["withSequence"]
            assert seq["count"] == f"{{{{workflow.parameters.{stage.name}_shards}}}}"
        else:
            assert f"{name}-fanout" not in templates
        assert "withParam" not in json.dumps(doc)


def _gpu_graph() -> Graph:
    return Graph([
        Stage(name="ingest", role="core", target="m:C"),
        Stage(name="tts", role="speech_generator", target="m:T", inputs=("ingest",),
              image="tts-f5", gpu=1, shards=8, parallelism=2, memory="24Gi"),
    ])


def test_gpu_stage_full_requests_gpu_on_profile_pool() -> None:
    doc = _compile(_gpu_graph(), "full")
    templates = {t["name"]: t for t in doc["spec"]["templates"]}
    shard = templates["tts-shard"]
    assert shard["container"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    profile = ClusterProfile.load(PROFILE)
    assert shard["nodeSelector"] == profile.gpu_node_selector
    assert shard["tolerations"] == list(profile.gpu_tolerations)
    mounts = {m["name"]: m for m in shard["container"]["volumeMounts"]}
    assert mounts["weights"]["readOnly"] is True
    claim = {v["name"]: v for v in doc["spec"]["volumes"]}["weights"]["persistentVolumeClaim"]
    assert claim == {"claimName": profile.weights_claim, "readOnly": True}
    assert "nvidia.com/gpu" not in json.dumps(templates["tts-merge"])
    assert "nodeSelector" not in templates["ingest-shard"]
    params = {p["name"]: p["value"] for p in doc["spec"]["arguments"]["parameters"]}
    assert params["tts_image"] == ImageLock.load(LOCK).ref("tts-f5")


def test_gpu_stage_smoke_runs_on_cpu_reference() -> None:
    doc = _compile(_gpu_graph(), "smoke")
    text = json.dumps(doc)
    assert "nvidia.com/gpu" not in text and "nodeSelector" not in text
    assert "weights" not in {v["name"] for v in doc["spec"]["volumes"]}
    params = {p["name"]: p["value"] for p in doc["spec"]["arguments"]["parameters"]}
    assert params["tts_image"] == ImageLock.load(LOCK).ref("reference-cpu")


def test_root_stage_gets_sources_parameter() -> None:
    doc = _load(ROOT / "workflows" / "full.yaml")
    shard = {t["name"]: t for t in doc["spec"]["templates"]}["ingest-shard"]
    args = shard["container"]["args"]
    assert args[args.index("--param") + 1] == "sources={{workflow.parameters.sources}}"
    assert "--params-json" not in args


def test_profile_rejects_unknown_keys(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("gpuNodeSelectr: {}\n")
    with pytest.raises(ConfigError, match="unknown"):
        ClusterProfile.load(bad)


def test_exit_summary_written(tmp_path: Path) -> None:
    summary = write_exit_summary(build_graph(), str(tmp_path), "run1", "wf-abc", "Failed",
                                 "12", '[{"displayName": "ingest(0)", "message": "boom"}]')
    written = json.loads((tmp_path / "run1" / "_RUN_SUMMARY.json").read_text())
    assert written == json.loads(json.dumps(summary))
    assert written["status"] == "Failed" and written["failures"][0]["message"] == "boom"
    assert written["stages"]["ingest"] == {"done": False}
    assert copy.deepcopy(written)["workflow"] == "wf-abc"


def test_retry_exit_code_matches_cli() -> None:
    from madbench_common.cli import EXIT_DETERMINISTIC
    from madbench_common.pipeline.argo import DETERMINISTIC_EXIT_CODE

    assert DETERMINISTIC_EXIT_CODE == EXIT_DETERMINISTIC


def test_swapping_a_model_slug_changes_only_that_stage() -> None:
    doc = _load(ROOT / "workflows" / "full.yaml")
    params = {p["name"] for p in doc["spec"]["arguments"]["parameters"]}
    assert {"separate_model", "split_model", "speech_vc_a_model", "features_model"} <= params
    assert "source_qc_model" not in params  # compound QC stages name their models in params
    before = _effective_pods(doc, {})
    after = _effective_pods(doc, {"separate_model": "ref-deepfilternet3"})
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"separate-shard", "separate-merge"}
    assert '"model=ref-deepfilternet3"' in after["separate-shard"]


# ------------------------------------------------------------------ weights workflow


def test_weights_workflow_is_current_and_fills_the_volume() -> None:
    from madbench_common.pipeline.argo_weights import EGRESS_LABEL, render_weights_workflow

    lock, profile = ImageLock.load(LOCK), ClusterProfile.load(PROFILE)
    assert render_weights_workflow(lock, profile, ROOT / "workflows", check=True) == []
    doc = _load(ROOT / "workflows" / "weights.yaml")
    spec = doc["spec"]
    fetch = {t["name"]: t for t in spec["templates"]}["fetch"]
    assert fetch["metadata"]["labels"].items() >= EGRESS_LABEL.items()
    assert fetch["container"]["args"][:2] == ["weights", "fetch"]
    # unpinned weights.yaml entries are refused unless the submitter allows them
    params = {p["name"]: p for p in spec["arguments"]["parameters"]}
    assert params["allow_unpinned"]["value"] == "false"
    assert "--allow-unpinned={{workflow.parameters.allow_unpinned}}" in fetch["container"]["args"]
    mount = {m["name"]: m for m in fetch["container"]["volumeMounts"]}["weights"]
    assert mount["mountPath"] == "/weights" and not mount.get("readOnly")
    claim = {v["name"]: v for v in spec["volumes"]}["weights"]["persistentVolumeClaim"]
    assert claim["claimName"] == profile.weights_claim and not claim.get("readOnly")
    sc = fetch["container"]["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"]["drop"] == ["ALL"]
    assert spec["securityContext"]["runAsNonRoot"] is True


def test_only_weights_pods_may_reach_the_hub() -> None:
    """The hub-egress NetworkPolicy selects exactly the label only the fetch pods carry."""
    from madbench_common.pipeline.argo_weights import EGRESS_LABEL

    docs = list(yaml.safe_load_all((ROOT / "k8s" / "base" / "networkpolicy.yaml").read_text()))
    hub = [d for d in docs if d["metadata"]["name"] == "allow-weights-fetch-to-hub"]
    assert hub and hub[0]["spec"]["podSelector"] == {"matchLabels": EGRESS_LABEL}
    for path in PIPELINES:
        for tpl in _container_templates(_load(path)):
            labels = tpl.get("metadata", {}).get("labels", {})
            assert labels.get("madbench.io/egress") in (None, "api")  # api: deaf.yaml's keys
            env = {e["name"]: e.get("value") for e in tpl["container"]["env"]}
            assert env["HF_HUB_OFFLINE"] == "1"


def test_stage_pods_find_weights_where_the_volume_is() -> None:
    """Adapters resolve weights under $MADBENCH_WEIGHTS (default /weights): the mount."""
    from madbench_common.models.weights import DEFAULT_ROOT

    doc = _compile(build_graph(), "full")
    for tpl in _container_templates(doc):
        mounts = {m["name"]: m["mountPath"] for m in tpl["container"]["volumeMounts"]}
        if "weights" in mounts:
            env = {e["name"]: e.get("value") for e in tpl["container"]["env"]}
            assert mounts["weights"] == DEFAULT_ROOT == env["MADBENCH_WEIGHTS"]
            assert env["HF_HOME"] == f"{DEFAULT_ROOT}/huggingface"


def test_weights_images_default_to_every_weights_yaml(tmp_path: Path) -> None:
    from madbench_common.pipeline.argo_weights import compile_weights_workflow, weights_images

    for slug in ("b-fam", "a-fam"):
        (tmp_path / slug).mkdir()
        (tmp_path / slug / "weights.yaml").write_text(f"image: {slug}\n")
    (tmp_path / "no-weights").mkdir()
    assert weights_images(tmp_path) == ["a-fam", "b-fam"]
    wf = compile_weights_workflow(ImageLock.load(LOCK), ClusterProfile.load(PROFILE),
                                  images=["a-fam"])
    params = {p.name: p.value for p in wf.spec.arguments.parameters}
    assert json.loads(params["images"]) == ["a-fam"]
