"""The local Argo interpreter (madbench_common.cluster.argo_local) on small synthetic workflows:
substitution, expressions, DAG order, fan-out, retries, exit handler, parallelism, memo,
and refusals of what it does not implement. No containers: runners are in-memory."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from madbench_common.cluster.argo_local import (
    Executor,
    Pod,
    PodResult,
    SecretRef,
    UnsupportedConstruct,
    Workflow,
    evaluate,
    parse_duration,
    parse_quantity,
    substitute,
)
from madbench_common.cluster.argo_local.executor import _DagNode
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.argo import RUN_ID, parse_failures

_SC = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
       "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def container(name: str, args: list[str], **extra: Any) -> dict[str, Any]:
    """A container template running ``echo`` with ``args`` (the runner reads the args)."""
    t: dict[str, Any] = {"name": name, "container": {
        "image": "ghcr.io/madbench/reference-cpu:0.1.0", "command": ["echo"], "args": args,
        "securityContext": dict(_SC),
        "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "500m",
                                                                "memory": "1Gi"}}}}
    t.update(extra)
    return t


def workflow(tasks: list[dict[str, Any]], templates: list[dict[str, Any]],
             params: dict[str, str] | None = None, **spec: Any) -> Workflow:
    doc = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
           "metadata": {"generateName": "t-"},
           "spec": {"entrypoint": "main",
                    "arguments": {"parameters": [{"name": k, "value": v}
                                                 for k, v in (params or {}).items()]},
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                        "runAsGroup": 10001},
                    "templates": [{"name": "main", "dag": {"tasks": tasks}}, *templates],
                    **spec}}
    return Workflow.from_doc(doc)


class Recorder:
    """A runner that records starts and ends and answers from a rule per pod."""

    def __init__(self, rule: Callable[[Pod, int], PodResult] | None = None,
                 delay: float = 0.0) -> None:
        self.rule = rule or (lambda pod, attempt: PodResult("Succeeded", 0))
        self.delay = delay
        self.events: list[tuple[str, str, float]] = []
        self.pods: list[Pod] = []
        self.lock = threading.Lock()
        self.running = 0
        self.max_running = 0

    def prepare(self, pod: Pod) -> None:
        pass

    def run(self, pod: Pod, attempt: int, cancel: threading.Event) -> PodResult:
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.events.append(("start", pod.node, time.monotonic()))
            self.pods.append(pod)
        if self.delay:
            cancel.wait(self.delay)
        result = self.rule(pod, attempt)
        with self.lock:
            self.running -= 1
            self.events.append(("end", pod.node, time.monotonic()))
        return result

    def order(self) -> list[str]:
        return [n for kind, n, _ in self.events if kind == "start"]


# ------------------------------------------------------------------ expressions


def test_the_run_id_expression_the_renderer_emits() -> None:
    scope = {"workflow.parameters.run_id": "", "workflow.name": "madbench-full-abcde"}
    assert substitute(RUN_ID, scope) == "madbench-full-abcde"
    scope["workflow.parameters.run_id"] = "r1"
    assert substitute(RUN_ID, scope) == "r1"


def test_substitution_of_every_tag_kind() -> None:
    scope = {"workflow.parameters.store": "s3://b/runs", "inputs.parameters.shard": "3",
             "item": "7", "workflow.name": "w-1"}
    text = "{{workflow.parameters.store}}/{{ inputs.parameters.shard }}/{{item}}/{{workflow.name}}"
    assert substitute(text, scope) == "s3://b/runs/3/7/w-1"
    assert substitute("a=b \"quoted\" {x}", scope) == "a=b \"quoted\" {x}"


def test_a_lazy_parameter_is_read_when_substituted() -> None:
    box = ["v1"]
    scope = {"workflow.parameters.image": lambda: box[0]}
    assert substitute("{{workflow.parameters.image}}", scope) == "v1"
    box[0] = "v2"
    assert substitute("{{workflow.parameters.image}}", scope) == "v2"


@pytest.mark.parametrize("tag", ["{{workflow.parameters.nope}}", "{{tasks.a.outputs.result}}",
                                 "{{steps.x.ip}}", "{{=sprig.trim(' a ')}}",
                                 "{{=asInt(workflow.parameters.n) + 1}}", "{{=a ~ b}}"])
def test_unknown_tags_and_expressions_fail_loudly(tag: str) -> None:
    with pytest.raises(UnsupportedConstruct):
        substitute(tag, {"workflow.parameters.n": "1", "a": "x", "b": "y"})


def test_expression_operators() -> None:
    names = {"x": "3", "y": "", "n": 2}
    look = names.__getitem__
    assert evaluate("x == '3' && !(y != '')", look) is True
    assert evaluate("x == \"4\" || y == ''", look) is True
    assert evaluate("y == '' ? 'empty' : x", look) == "empty"
    assert evaluate("n >= 2 && n < 3", look) is True
    assert evaluate("true ? (false ? 1 : 2) : 3", look) == 2
    with pytest.raises(UnsupportedConstruct):
        evaluate("x && true", look)  # a string is not a boolean


def test_quantities_and_durations() -> None:
    assert parse_quantity("512Mi") == 512 * 2**20
    assert parse_quantity("2Gi") == 2 * 2**30
    assert parse_quantity("500m") == 0.5
    assert parse_quantity("1") == 1
    assert parse_duration("30s") == 30
    assert parse_duration("1m30s") == 90
    assert parse_duration("2h") == 7200
    assert parse_duration("45") == 45
    with pytest.raises(UnsupportedConstruct):
        parse_duration("1d")
    with pytest.raises(UnsupportedConstruct):
        parse_quantity("1Ei")


# ------------------------------------------------------------------ DAG semantics


def diamond() -> Workflow:
    tasks = [{"name": "a", "template": "echo", "arguments": {"parameters": [
                 {"name": "msg", "value": "a"}]}},
             {"name": "b", "template": "echo", "depends": "a",
              "arguments": {"parameters": [{"name": "msg", "value": "b"}]}},
             {"name": "c", "template": "echo", "depends": "a",
              "arguments": {"parameters": [{"name": "msg", "value": "c"}]}},
             {"name": "d", "template": "echo", "depends": "b && c",
              "arguments": {"parameters": [{"name": "msg", "value": "d"}]}}]
    echo = container("echo", ["{{inputs.parameters.msg}}", "{{workflow.parameters.p}}"],
                     inputs={"parameters": [{"name": "msg"}]})
    return workflow(tasks, [echo], {"p": "default"})


def test_dag_order_and_argument_substitution() -> None:
    rec = Recorder(delay=0.05)
    result = Executor(diamond(), {"p": "given"}, runner=rec, workers=2, name="w").run()
    assert result.phase == "Succeeded"
    order = rec.order()
    assert order[0] == "w.a" and order[-1] == "w.d"
    ends = {n: t for kind, n, t in rec.events if kind == "end"}
    starts = {n: t for kind, n, t in rec.events if kind == "start"}
    assert starts["w.d"] >= max(ends["w.b"], ends["w.c"])
    assert starts["w.b"] >= ends["w.a"] and starts["w.c"] >= ends["w.a"]
    assert rec.max_running == 2  # b and c ran side by side
    assert {p.argv for p in rec.pods} == {("echo", m, "given") for m in "abcd"}


def test_a_parameter_argo_would_refuse_is_refused() -> None:
    with pytest.raises(ConfigError, match="no workflow parameter nope"):
        Executor(diamond(), {"nope": "1"})


def fanout(count: str = "{{workflow.parameters.n}}", parallelism: int | None = None
           ) -> Workflow:
    inner: dict[str, Any] = {"name": "fan", "dag": {"tasks": [{
        "name": "shard", "template": "work", "withSequence": {"count": count},
        "arguments": {"parameters": [{"name": "shard", "value": "{{item}}"}]}}]}}
    if parallelism is not None:
        inner["parallelism"] = parallelism
    work = container("work", ["--shard", "{{inputs.parameters.shard}}"],
                     inputs={"parameters": [{"name": "shard"}]})
    merge = container("merge", ["merge"])
    tasks: list[dict[str, Any]] = [
        {"name": "stage", "template": "fan"},
        {"name": "stage-merge", "template": "merge", "dependencies": ["stage"]}]
    return workflow(tasks, [inner, work, merge], {"n": "3"})


def test_with_sequence_fans_out_and_the_merge_waits_for_every_shard() -> None:
    rec = Recorder(delay=0.02)
    result = Executor(fanout(), {"n": "5"}, runner=rec, workers=3, name="w").run()
    assert result.phase == "Succeeded"
    shards = sorted(p.argv[2] for p in rec.pods if p.argv[1] == "--shard")
    assert shards == ["0", "1", "2", "3", "4"]
    assert rec.order()[-1] == "w.stage-merge"
    assert {f"w.stage.shard({i})" for i in range(5)} <= set(result.nodes)


def test_with_sequence_start_end_and_dry_run_match_execution() -> None:
    wf = fanout()
    wf.templates["fan"]["dag"]["tasks"][0]["withSequence"] = {"start": "2", "end": "4"}
    ex = Executor(wf, name="w")
    planned = [p.node for p in ex.dry_run()]
    assert planned == ["w.stage.shard(2)", "w.stage.shard(3)", "w.stage.shard(4)",
                       "w.stage-merge"]
    rec = Recorder()
    Executor(wf, runner=rec, name="w").run()
    assert sorted(rec.order()) == sorted(planned)


def test_template_parallelism_caps_running_pods_under_it() -> None:
    rec = Recorder(delay=0.05)
    Executor(fanout(parallelism=1), {"n": "4"}, runner=rec, workers=4, name="w").run()
    assert rec.max_running == 1


def test_workers_cap_every_pod() -> None:
    rec = Recorder(delay=0.05)
    Executor(fanout(), {"n": "6"}, runner=rec, workers=2, name="w").run()
    assert rec.max_running == 2


def _fail_and_other() -> tuple[Workflow, Callable[[Pod, int], PodResult]]:
    tasks: list[dict[str, Any]] = [{"name": "bad", "template": "fail"},
             {"name": "other", "template": "ok"},
             {"name": "after-other", "template": "ok", "dependencies": ["other"]},
             {"name": "after-bad", "template": "ok", "dependencies": ["bad"]}]
    wf = workflow(tasks, [container("fail", ["fail"]), container("ok", ["ok"])])

    def rule(pod: Pod, attempt: int) -> PodResult:
        if pod.argv[1] == "fail":
            return PodResult("Failed", 1, "boom")
        time.sleep(0.1)  # "other" is still running when "bad" fails
        return PodResult("Succeeded", 0)

    return wf, rule


def test_fail_fast_as_argo_schedules_it() -> None:
    """Argo's DAG (failFast on by default) still starts a task whose dependencies finished
    while another branch runs (dag.go:137-246: the phase is Running until every started
    node is done; argoproj/argo-workflows#10312); the failure's dependents are Omitted and
    the DAG Failed. ``stop_on_failure`` is the stricter mode: nothing new after it."""
    wf, rule = _fail_and_other()
    rec = Recorder(rule)
    result = Executor(wf, runner=rec, workers=2, name="w").run()
    assert result.phase == "Failed"
    assert "w.after-other" in rec.order() and "w.after-bad" not in rec.order()
    assert result.nodes["w.after-bad"]["phase"] == "Omitted"
    assert [f["podName"] for f in result.failures] == ["w.bad"]
    rec = Recorder(rule)
    result = Executor(wf, runner=rec, workers=2, name="w", stop_on_failure=True).run()
    assert result.phase == "Failed"
    assert "w.after-other" not in rec.order()
    assert result.nodes["w.after-other"]["phase"] == "Omitted"


def test_fail_fast_decides_without_waiting_for_unreached_targets() -> None:
    """assessDAGPhase with failFast: a failed target branch decides the DAG at once;
    without it the DAG waits (a target not reached keeps it Running)."""
    wf, _ = _fail_and_other()
    ex = Executor(wf, name="w")
    node = ex._node("main", {}, "w", "c")
    assert isinstance(node, _DagNode) and node.targets == ["after-bad", "after-other"]
    node.tasks["bad"].phase, node.tasks["after-bad"].phase = "Failed", "Omitted"
    node.tasks["other"].phase = "Succeeded"  # after-other: not reached (e.g. parallelism)
    assert ex._assess(node) == "Failed"
    node.fail_fast = False
    assert ex._assess(node) == "Running"


def test_depends_on_a_failure() -> None:
    tasks: list[dict[str, Any]] = [{"name": "a", "template": "fail"},
             {"name": "cleanup", "template": "ok", "depends": "a.Failed"},
             {"name": "on-success", "template": "ok", "depends": "a.Succeeded"}]
    wf = workflow(tasks, [container("fail", ["fail"]), container("ok", ["ok"])])
    rec = Recorder(lambda pod, attempt: PodResult("Failed", 2) if pod.argv[1] == "fail"
                   else PodResult("Succeeded", 0))
    result = Executor(wf, runner=rec, name="w").run()
    assert "w.cleanup" in rec.order()
    assert result.nodes["w.on-success"]["phase"] == "Omitted"
    # on-success is a leaf reached only from the failure: its branch is Failed
    assert result.phase == "Failed"


def test_a_handled_failure_leaves_the_dag_succeeded_as_on_argo() -> None:
    """assessDAGPhase: the only leaf ran on a.Failed and succeeded, so the DAG Succeeded;
    naming every task a target (what the renderer does for optional inputs) fails it."""
    tasks: list[dict[str, Any]] = [{"name": "a", "template": "fail"},
                                   {"name": "handler", "template": "ok",
                                    "depends": "a.Failed || a.Errored"}]
    wf = workflow(tasks, [container("fail", ["fail"]), container("ok", ["ok"])])

    def rule(pod: Pod, attempt: int) -> PodResult:
        return PodResult("Failed", 2) if pod.argv[1] == "fail" else PodResult("Succeeded", 0)

    result = Executor(wf, runner=Recorder(rule), name="w").run()
    assert result.phase == "Succeeded" and [f["podName"] for f in result.failures] == ["w.a"]
    doc = _doc(wf)
    doc["spec"]["templates"][0]["dag"]["target"] = "a handler"
    result = Executor(Workflow.from_doc(doc), runner=Recorder(rule), name="w").run()
    assert result.phase == "Failed"


def test_any_succeeded_and_all_failed_look_at_the_shards() -> None:
    wf = fanout()
    doc = _doc(wf)
    tasks = doc["spec"]["templates"][0]["dag"]["tasks"]
    tasks[0]["template"] = "work"
    tasks[0]["withSequence"] = {"count": "{{workflow.parameters.n}}"}
    tasks[0]["arguments"] = {"parameters": [{"name": "shard", "value": "{{item}}"}]}
    tasks[1]["depends"] = "stage.AnySucceeded && !stage.AllFailed"
    del tasks[1]["dependencies"]
    wf = Workflow.from_doc(doc)
    rec = Recorder(lambda pod, attempt: PodResult("Failed", 1) if pod.argv[-1] == "0"
                   else PodResult("Succeeded", 0))
    result = Executor(wf, {"n": "2"}, runner=rec, name="w").run()
    assert "w.stage-merge" in rec.order()
    assert result.phase == "Succeeded"  # the only leaf ran


# ------------------------------------------------------------------ retries


def retrying(policy: str = "Always", limit: str = "2") -> Workflow:
    t = container("work", ["x"], retryStrategy={
        "limit": limit, "retryPolicy": policy, "expression": 'lastRetry.exitCode != "3"',
        "backoff": {"duration": "30s", "factor": "2"}})
    return workflow([{"name": "a", "template": "work"}], [t])


def test_transient_failures_are_retried_up_to_the_limit() -> None:
    codes = iter([75, 75, 0])
    rec = Recorder(lambda pod, attempt: PodResult("Succeeded" if (c := next(codes)) == 0
                                                  else "Failed", c))
    result = Executor(retrying(), runner=rec, name="w", backoff_scale=0.0).run()
    assert result.phase == "Succeeded"
    assert [a["exit_code"] for a in result.nodes["w.a"]["attempts"]] == [75, 75, 0]


def test_the_limit_bounds_the_attempts() -> None:
    rec = Recorder(lambda pod, attempt: PodResult("Failed", 75))
    result = Executor(retrying(limit="2"), runner=rec, name="w", backoff_scale=0.0).run()
    assert result.phase == "Failed" and len(rec.pods) == 3


def test_exit_3_is_never_retried() -> None:
    rec = Recorder(lambda pod, attempt: PodResult("Failed", 3, "bad config"))
    result = Executor(retrying(), runner=rec, name="w", backoff_scale=0.0).run()
    assert result.phase == "Failed" and len(rec.pods) == 1
    assert result.failures[0]["exitCode"] == 3


def test_retry_policy_on_error_does_not_retry_failures() -> None:
    rec = Recorder(lambda pod, attempt: PodResult("Failed", 75))
    Executor(retrying("OnError"), runner=rec, name="w", backoff_scale=0.0).run()
    assert len(rec.pods) == 1


def test_backoff_waits_between_attempts() -> None:
    codes = iter([75, 0])
    rec = Recorder(lambda pod, attempt: PodResult("Succeeded" if (c := next(codes)) == 0
                                                  else "Failed", c))
    start = time.monotonic()
    Executor(retrying(), runner=rec, name="w", backoff_scale=0.01).run()  # 30 s → 0.3 s
    assert time.monotonic() - start >= 0.3


def test_a_pod_that_cannot_start_is_an_error_without_retry() -> None:
    class Broken(Recorder):
        def prepare(self, pod: Pod) -> None:
            raise ConfigError("image ghcr.io/madbench/x:0.1.0 cannot be built")

    rec = Broken()
    result = Executor(retrying(), runner=rec, name="w", backoff_scale=0.0).run()
    assert result.phase == "Error" and rec.pods == []
    assert "cannot be built" in result.failures[0]["message"]


# ------------------------------------------------------------------ exit handler, deadlines


def test_the_exit_handler_sees_status_and_failures() -> None:
    summary = container("summary", ["{{workflow.status}}", "{{workflow.failures}}",
                                     "{{workflow.duration}}"])
    wf = workflow([{"name": "a", "template": "fail"}],
                  [container("fail", ["fail"]), summary], onExit="summary")
    rec = Recorder(lambda pod, attempt: PodResult("Failed", 1, "boom")
                   if pod.argv[1] == "fail" else PodResult("Succeeded", 0))
    result = Executor(wf, runner=rec, name="w").run()
    assert result.phase == "Failed"
    handler = rec.pods[-1]
    assert handler.node == "w.onExit" and handler.argv[1] == "Failed"
    failures = parse_failures(handler.argv[2])
    assert [f["podName"] for f in failures] == ["w.a"] and failures[0]["message"] == "boom"
    assert float(handler.argv[3]) >= 0
    assert result.exit_handler is not None and result.exit_handler["phase"] == "Succeeded"


def test_no_failures_reach_the_handler_as_null() -> None:
    summary = container("summary", ["{{workflow.status}}", "{{workflow.failures}}"])
    wf = workflow([{"name": "a", "template": "ok"}], [container("ok", ["ok"]), summary],
                  onExit="summary")
    rec = Recorder()
    Executor(wf, runner=rec, name="w").run()
    assert rec.pods[-1].argv[1:] == ("Succeeded", '"null"')
    assert parse_failures(rec.pods[-1].argv[2]) == []


def test_the_workflow_deadline_stops_running_pods() -> None:
    wf = workflow([{"name": "a", "template": "ok"}, {"name": "b", "template": "ok",
                                                     "dependencies": ["a"]}],
                  [container("ok", ["ok"])], activeDeadlineSeconds=1)

    class Slow(Recorder):
        def run(self, pod: Pod, attempt: int, cancel: threading.Event) -> PodResult:
            self.pods.append(pod)
            stopped = cancel.wait(30)
            return PodResult("Failed" if stopped else "Succeeded", 143 if stopped else 0,
                             "cancelled" if stopped else "")

    rec = Slow()
    start = time.monotonic()
    result = Executor(wf, runner=rec, name="w").run()
    assert time.monotonic() - start < 20
    assert result.phase == "Failed" and [p.node for p in rec.pods] == ["w.a"]


def test_pod_fields_come_from_the_template() -> None:
    t = container("work", ["x"], activeDeadlineSeconds="600")
    t["container"]["env"] = [
        {"name": "PLAIN", "value": "{{workflow.parameters.p}}"},
        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "KEY"}}},
        {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "OPT",
                                                        "optional": True}}}]
    t["container"]["volumeMounts"] = [{"name": "scratch", "mountPath": "/tmp"},
                                      {"name": "weights", "mountPath": "/weights",
                                       "readOnly": True}]
    t["container"]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    wf = workflow([{"name": "a", "template": "work"}], [t], {"p": "v"}, volumes=[
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "weights", "persistentVolumeClaim": {"claimName": "w", "readOnly": True}}])
    (pod,) = Executor(wf, name="w").dry_run()
    env = dict(pod.env)
    assert env["PLAIN"] == "v" and env["KEY"] == SecretRef("s3", "KEY")
    assert env["OPT"] == SecretRef("s3", "OPT", optional=True)
    assert [(m.path, m.read_only, m.kind, m.claim) for m in pod.mounts] == [
        ("/tmp", False, "emptyDir", ""), ("/weights", True, "persistentVolumeClaim", "w")]
    assert (pod.user, pod.group, pod.gpu, pod.deadline) == (10001, 10001, 1, 600.0)
    assert pod.memory_limit == 2**30 and pod.cpu_request == 0.5
    assert "secretKeyRef:s3/KEY" in json.dumps(pod.describe())


# ------------------------------------------------------------------ refusals


def _doc(wf: Workflow) -> dict[str, Any]:
    return json.loads(json.dumps(wf.doc))


@pytest.mark.parametrize("change", [
    lambda d: d["spec"]["templates"][0]["dag"]["tasks"][0].update(withParam="[1,2]"),
    lambda d: d["spec"]["templates"][0]["dag"]["tasks"][0].update(when="true"),
    lambda d: d["spec"]["templates"].append({"name": "s", "steps": [[]]}),
    lambda d: d["spec"]["templates"][1]["container"].update(env=[
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]),
    lambda d: d["spec"]["templates"][1].update(outputs={"parameters": []}),
    lambda d: d["spec"]["templates"][1]["retryStrategy"].update(retryPolicy="OnTransientError"),
    lambda d: d["spec"].update(hostNetwork=True),
    lambda d: d["spec"]["templates"][1]["container"]["securityContext"].update(privileged=True),
    lambda d: d["spec"].update(volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
], ids=["withParam", "when", "steps", "configMapKeyRef", "outputs", "retryPolicy",
        "hostNetwork", "privileged", "hostPath"])
def test_unsupported_constructs_fail_at_load(change: Callable[[dict[str, Any]], None]) -> None:
    doc = _doc(retrying())
    change(doc)
    with pytest.raises(UnsupportedConstruct):
        Workflow.from_doc(doc)


@pytest.mark.parametrize("field,value", [("readOnlyRootFilesystem", False),
                                         ("allowPrivilegeEscalation", True),
                                         ("runAsUser", 0)])
def test_a_pod_policy_the_engine_cannot_honour_is_refused(field: str, value: Any) -> None:
    doc = _doc(retrying())
    doc["spec"]["templates"][1]["container"]["securityContext"][field] = value
    with pytest.raises(UnsupportedConstruct, match="securityContext"):
        Executor(Workflow.from_doc(doc), name="w").dry_run()


def test_broken_references_fail_at_load() -> None:
    doc = _doc(diamond())
    doc["spec"]["templates"][0]["dag"]["tasks"][1]["depends"] = "nope"
    with pytest.raises(ConfigError, match="dependency 'nope' not defined"):
        Workflow.from_doc(doc)
    doc = _doc(diamond())
    doc["spec"]["templates"][0]["dag"]["tasks"][0]["depends"] = "d"
    with pytest.raises(ConfigError, match="sorting failed: graph with cycle"):
        Workflow.from_doc(doc)
    doc = _doc(diamond())
    doc["spec"]["templates"][0]["dag"]["tasks"][0]["template"] = "missing"
    with pytest.raises(ConfigError, match="template name 'missing' undefined"):
        Workflow.from_doc(doc)


def test_a_missing_input_parameter_fails() -> None:
    doc = _doc(diamond())
    del doc["spec"]["templates"][0]["dag"]["tasks"][0]["arguments"]
    with pytest.raises(ConfigError, match=r"inputs\.parameters\.msg was not supplied"):
        Workflow.from_doc(doc)


# ------------------------------------------------------------------ memo and images


class DictMemo:
    def __init__(self) -> None:
        self.keys: dict[str, str] = {}

    def done(self, key: str, pod: Pod) -> bool:
        return key in self.keys

    def record(self, key: str, pod: Pod, result: PodResult) -> None:
        self.keys[key] = pod.node

    def entry(self, key: str, pod: Pod) -> dict[str, Any]:
        return {"node": self.keys[key], "peak_rss_bytes": 2**20}


def test_a_resumed_execution_skips_what_finished_and_reruns_what_depends_on_a_change() -> None:
    memo = DictMemo()
    first = Recorder()
    Executor(diamond(), runner=first, name="w", memo=memo).run()
    assert len(first.pods) == 4
    again = Recorder()
    result = Executor(diamond(), runner=again, name="w", memo=memo).run()
    assert again.pods == [] and all(n["memo"] for n in result.nodes.values())
    # a skipped node carries what its earlier run measured (the rehearsal's peaks)
    assert all(n["earlier"] == {"node": path, "peak_rss_bytes": 2**20}
               for path, n in result.nodes.items())
    doc = _doc(diamond())
    doc["spec"]["templates"][0]["dag"]["tasks"][1]["arguments"]["parameters"][0]["value"] = "B"
    changed = Recorder()
    Executor(Workflow.from_doc(doc), runner=changed, name="w", memo=memo).run()
    assert changed.order() == ["w.b", "w.d"]  # b changed, so d (downstream) reruns too


def test_pending_images_shrink_as_pods_finish() -> None:
    tasks: list[dict[str, Any]] = [{"name": "a", "template": "one"},
                                   {"name": "b", "template": "two", "dependencies": ["a"]}]
    one = container("one", ["1"])
    two = container("two", ["2"])
    two["container"]["image"] = "ghcr.io/madbench/qc:0.1.0"
    summary = container("summary", ["s"])
    wf = workflow(tasks, [one, two, summary], onExit="summary")
    seen: list[set[str]] = []
    ex = Executor(wf, runner=Recorder(), name="w")
    ex.on_event = lambda kind, data: seen.append(ex.pending_images()) \
        if kind == "pod_done" else None
    ex.run()
    ref, qc = "ghcr.io/madbench/reference-cpu:0.1.0", "ghcr.io/madbench/qc:0.1.0"
    assert seen[0] == {ref, qc}  # after a: b (qc) and the exit handler (reference-cpu)
    assert seen[1] == {ref}  # after b: only the exit handler
    assert seen[2] == set()


def test_round_trip_through_yaml() -> None:
    text = yaml.safe_dump(diamond().doc)
    wf = Workflow.from_doc(yaml.safe_load(text))
    assert len(Executor(wf, name="w").dry_run()) == 4


def test_a_judge_that_waits_on_answers_which_may_fail() -> None:
    """deaf.yaml's judge: runs once every answer finished, whatever became of each."""
    tasks: list[dict[str, Any]] = [
        {"name": "answer-a", "template": "ok"},
        {"name": "answer-b", "template": "bad"},
        {"name": "answer-c", "template": "ok", "depends": "answer-b"},
        {"name": "deaf-judge", "template": "ok", "depends":
            "answer-a && (answer-b || answer-b.Failed || answer-b.Errored || answer-b.Omitted) "
            "&& (answer-c || answer-c.Failed || answer-c.Errored || answer-c.Omitted)"}]
    wf = workflow(tasks, [container("ok", ["ok"]), container("bad", ["bad"])])
    rec = Recorder(lambda pod, attempt: PodResult("Error", None, "no image")
                   if pod.argv[1] == "bad" else PodResult("Succeeded", 0))
    result = Executor(wf, runner=rec, name="w").run()
    assert result.nodes["w.answer-c"]["phase"] == "Omitted"
    assert "w.deaf-judge" in rec.order()
    # the judge, the only leaf, ran: on Argo the DAG Succeeded although an answer failed
    assert result.phase == "Succeeded" and result.failures
    doc = _doc(wf)
    doc["spec"]["templates"][0]["dag"]["target"] = " ".join(t["name"] for t in tasks)
    result = Executor(Workflow.from_doc(doc), runner=rec, name="w").run()
    assert result.phase == "Error"  # every task a target, as rendered: the failure shows


def test_podresult_defaults() -> None:
    assert PodResult("Succeeded").info == {}
