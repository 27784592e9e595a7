"""Argo's own rules (madbench_common.pipeline.argo_rules): one minimal violating workflow per
rule, each expected to be refused in Argo's words by ``madbench lint`` and by the local
executor (which must refuse what Argo refuses). The base workflow has the renderer's
shapes (a fan-out DAG, depends, retries, resources, an exit handler) and passes."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from madbench_common.cluster.argo_local import Workflow
from madbench_common.core.errors import ConfigError

_SC = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
       "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def _container(args: list[str]) -> dict[str, Any]:
    return {"image": "ghcr.io/madbench/reference-cpu:0.1.0", "command": ["madbench"],
            "args": args, "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
                          "limits": {"memory": "2Gi", "nvidia.com/gpu": "1"}},
            "securityContext": dict(_SC)}


def base() -> dict[str, Any]:
    shard = {"parameters": [{"name": "shard", "value": "0"}]}
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "metadata": {"generateName": "t-"},
        "spec": {
            "entrypoint": "main", "onExit": "summary",
            "arguments": {"parameters": [
                {"name": "n", "value": "2"},
                {"name": "flag", "value": "false", "enum": ["true", "false"]}]},
            "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001},
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
            "podGC": {"strategy": "OnPodSuccess"},
            "templates": [
                {"name": "main", "dag": {"failFast": False, "tasks": [
                    {"name": "a", "template": "fan"},
                    {"name": "a-merge", "template": "work", "depends": "a", "arguments": shard},
                    {"name": "b", "template": "work", "arguments": copy.deepcopy(shard),
                     "depends": "a-merge || a-merge.Failed || a-merge.Omitted"}]}},
                {"name": "fan", "parallelism": 2, "dag": {"tasks": [
                    {"name": "shard", "template": "work",
                     "withSequence": {"count": "{{workflow.parameters.n}}"},
                     "arguments": {"parameters": [{"name": "shard", "value": "{{item}}"}]}}]}},
                {"name": "work", "inputs": {"parameters": [{"name": "shard"}]},
                 "activeDeadlineSeconds": "600",
                 "retryStrategy": {"limit": "2", "retryPolicy": "Always",
                                   "expression": 'lastRetry.exitCode != "3"',
                                   "backoff": {"duration": "30s", "factor": "2"}},
                 "container": _container(["--shard", "{{inputs.parameters.shard}}",
                                          "{{workflow.parameters.n}}", "{{workflow.name}}"])},
                {"name": "summary",
                 "container": _container(["{{workflow.status}}", "{{workflow.failures}}"])},
            ]}}


def _t(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in doc["spec"]["templates"] if t["name"] == name)


def _task(doc: dict[str, Any], name: str, dag: str = "main") -> dict[str, Any]:
    return next(x for x in _t(doc, dag)["dag"]["tasks"] if x["name"] == name)


def _res(doc: dict[str, Any]) -> dict[str, Any]:
    res: dict[str, Any] = _t(doc, "work")["container"]["resources"]
    return res


Change = Callable[[dict[str, Any]], Any]

CASES: list[tuple[str, Change, str]] = [
    # --- DAG (validate.go validateDAG, ancestry.go, dag.go)
    ("mixed_depends_dependencies",
     lambda d: (_task(d, "a-merge").pop("depends"),
                _task(d, "a-merge").update(dependencies=["a"])),
     "templates.main cannot use both 'depends' and 'dependencies' in the same DAG template"),
    ("unknown_task_reference",
     lambda d: _task(d, "b").update(depends="a-merge || nope.Failed"),
     "templates.main.tasks.b dependency 'nope' not defined"),
    ("cyclic_task_reference", lambda d: _task(d, "a").update(depends="b"),
     "templates.main sorting failed: graph with cycle"),
    ("depends_unknown_result", lambda d: _task(d, "b").update(depends="a-merge.Completed"),
     "templates.main.tasks.b task result 'Completed' for task 'a-merge' is invalid"),
    ("depends_dangling_operator", lambda d: _task(d, "b").update(depends="a-merge &&"),
     "templates.main.tasks.b unable to evaluate expression 'a_merge &&'"),
    ("depends_unbalanced_parenthesis",
     lambda d: _task(d, "b").update(depends="(a-merge || a-merge.Failed"),
     "templates.main.tasks.b unable to evaluate expression '(a_merge || a_merge.Failed'"),
    ("depends_items_condition_without_items",
     lambda d: _task(d, "b").update(depends="a-merge.AnySucceeded"),
     "templates.main.tasks.b dependency 'a-merge' uses an items-based condition such as "
     ".AnySucceeded or .AllFailed but does not contain any items"),
    ("duplicate_task_name",
     lambda d: _t(d, "main")["dag"]["tasks"].append(copy.deepcopy(_task(d, "b"))),
     "templates.main sorting failed: duplicated nodeName b"),
    ("invalid_task_name", lambda d: _t(d, "fan")["dag"]["tasks"][0].update(name="shard_x"),
     "templates.fan.tasks[0].name: 'shard_x' is invalid"),
    ("task_name_starts_with_digit",
     lambda d: _task(d, "b").update(name="9b"),
     "templates.main.tasks.9b name cannot begin with a digit when using either 'depends' or "
     "'dependencies'"),
    ("continue_on_with_depends", lambda d: _task(d, "b").update(continueOn={"failed": True}),
     "templates.main cannot use 'continueOn' when using 'depends'"),
    ("dag_target_undefined", lambda d: _t(d, "main")["dag"].update(target="a nope"),
     "templates.main.targets: target 'nope' is not defined"),
    ("dag_without_tasks", lambda d: _t(d, "fan")["dag"].update(tasks=[]),
     "templates.fan must have at least one task"),
    ("sequence_count_and_end",
     lambda d: _task(d, "shard", "fan")["withSequence"].update(end="3"),
     "templates.fan.tasks.shard only one of count or end can be defined in withSequence"),
    # --- template references, entrypoint, onExit (validate.go ValidateWorkflow)
    ("undefined_task_template", lambda d: _task(d, "b").update(template="nope"),
     "templates.main.tasks.b template name 'nope' undefined"),
    ("entrypoint_missing", lambda d: d["spec"].pop("entrypoint"),
     "spec.entrypoint is required"),
    ("entrypoint_undefined", lambda d: d["spec"].update(entrypoint="nope"),
     "template name 'nope' undefined"),
    ("on_exit_undefined", lambda d: d["spec"].update(onExit="gone"),
     "template name 'gone' undefined"),
    ("duplicate_template_name",
     lambda d: d["spec"]["templates"].append(copy.deepcopy(_t(d, "summary"))),
     "spec.templates[4].name 'summary' is not unique"),
    ("template_without_type", lambda d: d["spec"]["templates"].append({"name": "x"}),
     "templates.x template type unspecified"),
    ("template_with_two_types",
     lambda d: _t(d, "summary").update(dag={"tasks": [{"name": "a", "template": "work"}]}),
     "templates.summary multiple template types specified"),
    # --- parameters (resolveAllVariables, validateArguments, ProcessArgs)
    ("undefined_input_parameter",
     lambda d: _t(d, "work")["container"]["args"].append("{{inputs.parameters.nope}}"),
     "templates.work: failed to resolve {{inputs.parameters.nope}}"),
    ("undefined_workflow_parameter",
     lambda d: _t(d, "work")["container"]["args"].append("{{workflow.parameters.nope}}"),
     "templates.work: failed to resolve {{workflow.parameters.nope}}"),
    ("workflow_failures_outside_the_exit_handler",
     lambda d: _t(d, "work")["container"]["args"].append("{{workflow.failures}}"),
     "templates.work: failed to resolve {{workflow.failures}}"),
    ("task_output_of_a_non_ancestor",
     lambda d: _task(d, "a-merge")["arguments"]["parameters"][0].update(
         value="{{tasks.b.id}}"),
     "templates.main.tasks.a-merge failed to resolve {{tasks.b.id}}"),
    ("item_outside_a_loop",
     lambda d: _task(d, "b")["arguments"]["parameters"][0].update(value="{{item}}"),
     "templates.main.tasks.b failed to resolve {{item}}"),
    ("undefined_name_in_an_expression",
     lambda d: _t(d, "work")["container"]["args"].append(
         "{{=workflow.parameters.nope == '' ? workflow.name : 'x'}}"),
     "templates.work: failed to resolve {{=workflow.parameters.nope == '' ? workflow.name : "
     "'x'}}"),
    ("input_not_supplied", lambda d: _task(d, "b").pop("arguments"),
     "templates.main.tasks.b templates.work inputs.parameters.shard was not supplied"),
    ("task_argument_without_value",
     lambda d: _task(d, "b")["arguments"]["parameters"][0].pop("value"),
     "templates.main.tasks.b.arguments.shard.value or "
     "templates.main.tasks.b.arguments.shard.valueFrom is required"),
    ("value_outside_enum",
     lambda d: d["spec"]["arguments"]["parameters"][1].update(value="maybe"),
     "spec.arguments.flag.value should be present in spec.arguments.flag.enum list"),
    # --- retryStrategy (validateTemplateHolder; operator.go retry backoff)
    ("retry_policy_unknown",
     lambda d: _t(d, "work")["retryStrategy"].update(retryPolicy="Sometimes"),
     "Sometimes is not a valid RetryPolicy"),
    ("retry_limit_not_an_integer", lambda d: _t(d, "work")["retryStrategy"].update(limit="two"),
     'templates.work.retryStrategy.limit: strconv.Atoi: parsing "two": invalid syntax'),
    ("backoff_duration_unknown_unit",
     lambda d: _t(d, "work")["retryStrategy"]["backoff"].update(duration="1d"),
     'unable to parse 1d as a duration: time: unknown unit "d" in duration "1d"'),
    ("backoff_duration_unparsable",
     lambda d: _t(d, "work")["retryStrategy"]["backoff"].update(duration="30 s"),
     'unable to parse 30 s as a duration: time: invalid duration "30 s"'),
    ("backoff_without_duration",
     lambda d: _t(d, "work")["retryStrategy"]["backoff"].pop("duration"),
     "templates.work.retryStrategy: no base duration specified for retryStrategy"),
    ("backoff_factor_not_an_integer",
     lambda d: _t(d, "work")["retryStrategy"]["backoff"].update(factor="1.5"),
     'templates.work.retryStrategy.backoff.factor: strconv.Atoi: parsing "1.5"'),
    ("retry_expression_unparsable",
     lambda d: _t(d, "work")["retryStrategy"].update(expression="lastRetry.exitCode !="),
     "templates.work.retryStrategy.expression: unable to evaluate expression"),
    # --- resources (Kubernetes quantity grammar and ValidateResourceRequirements)
    ("quantity_grammar", lambda d: _res(d)["limits"].update(memory="2 GB"),
     "resources.limits[memory]: quantities must match the regular expression "
     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("quantity_suffix", lambda d: _res(d)["requests"].update(memory="1MM"),
     "resources.requests[memory]: unable to parse quantity's suffix"),
    ("request_over_limit", lambda d: _res(d)["requests"].update(memory="4Gi"),
     'resources.requests: Invalid value: "4Gi": must be less than or equal to memory limit'),
    ("gpu_request_not_equal_to_limit", lambda d: _res(d)["limits"].update(
        {"nvidia.com/gpu": "2"}),
     'resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit'),
    ("gpu_fraction", lambda d: (_res(d)["limits"].update({"nvidia.com/gpu": "0.5"}),
                                _res(d)["requests"].update({"nvidia.com/gpu": "0.5"})),
     'resources.limits[nvidia.com/gpu]: Invalid value: "0.5": must be an integer'),
    ("gpu_request_without_limit", lambda d: _res(d)["limits"].pop("nvidia.com/gpu"),
     "resources.requests[nvidia.com/gpu]: Forbidden: Limit must be set for non "
     "overcommitable resources"),
    ("negative_cpu", lambda d: _res(d)["requests"].update(cpu="-1"),
     'resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    ("ephemeral_storage_quantity",
     lambda d: _res(d)["requests"].update({"ephemeral-storage": "ten"}),
     "resources.requests[ephemeral-storage]: quantities must match the regular expression"),
    ("empty_dir_size_limit", lambda d: d["spec"]["volumes"][0]["emptyDir"].update(
        sizeLimit="lots"),
     "spec.volumes[scratch].emptyDir.sizeLimit: quantities must match"),
    # --- leaf and non-leaf template fields (validateLeaf, validateNonLeaf)
    ("active_deadline_on_a_dag", lambda d: _t(d, "main").update(activeDeadlineSeconds=60),
     "templates.main.activeDeadlineSeconds is only valid for leaf templates"),
    ("active_deadline_not_an_integer",
     lambda d: _t(d, "work").update(activeDeadlineSeconds="ten"),
     "templates.work.activeDeadlineSeconds must be a positive integer > 0 or an argo variable"),
    ("parallelism_on_a_container", lambda d: _t(d, "work").update(parallelism=2),
     "templates.work.parallelism is only valid for steps and dag templates"),
    ("empty_image", lambda d: _t(d, "work")["container"].update(image=""),
     "templates.work.container.image may not be empty"),
    ("mount_path_twice", lambda d: _t(d, "work")["container"]["volumeMounts"].append(
        {"name": "scratch", "mountPath": "/tmp"}),
     "templates.work.container.volumeMounts[1].mountPath '/tmp' already mounted in "
     "container.volumeMounts.scratch"),
    ("mount_of_an_unknown_volume", lambda d: _t(d, "work")["container"]["volumeMounts"][0]
     .update(name="nope"),
     'templates.work.container.volumeMounts[0].name: Not found: "nope"'),
    ("pod_gc_strategy", lambda d: d["spec"]["podGC"].update(strategy="Sometimes"),
     "podGC.strategy unknown strategy 'Sometimes'"),
    # --- version-gated fields
    ("backoff_cap_needs_3_7",
     lambda d: _t(d, "work")["retryStrategy"]["backoff"].update(cap="15m"),
     "templates.work: retryStrategy.backoff.cap needs Argo v3.7"),
]


def _violating(change: Change) -> dict[str, Any]:
    doc = base()
    change(doc)
    return doc


def test_the_base_workflow_passes() -> None:
    from madbench_common.pipeline.argo_rules import check_workflow

    assert check_workflow(base()) == []
    Workflow.from_doc(base())


@pytest.mark.parametrize("change,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_lint_reports_argos_message(change: Change, message: str, tmp_path: Path) -> None:
    from madbench_common.cluster.lint import lint_workflow

    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(_violating(change)))
    problems = lint_workflow(path)
    assert any(message in p for p in problems), problems
    assert all(p.startswith(f"{path}: ") for p in problems)


@pytest.mark.parametrize("change,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_executor_refuses_it_in_argos_words(change: Change, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        Workflow.from_doc(_violating(change))
    assert message in str(err.value)


def test_a_newer_argo_accepts_the_gated_field() -> None:
    from madbench_common.pipeline.argo_rules import check_workflow, min_version

    doc = _violating(lambda d: _t(d, "work")["retryStrategy"]["backoff"].update(cap="15m"))
    assert check_workflow(doc, target=(3, 7)) == []
    assert min_version(doc) == (3, 7) and min_version(base()) == (3, 4)  # .Omitted


def test_depends_results_argo_knows_evaluate_in_the_executor() -> None:
    """Every result Argo accepts parses; ``Completed`` (which Argo refuses) does not."""
    from madbench_common.pipeline.argo_rules import DEPENDS_RESULTS, check_workflow

    for result in DEPENDS_RESULTS:
        if result in ("AnySucceeded", "AllFailed"):
            continue  # items-based: needs a loop on the task (a case above)
        doc = _violating(lambda d, r=result: _task(d, "b").update(
            depends=f"(a-merge.{r} || !a-merge) && !(a-merge.Skipped)"))
        assert check_workflow(doc) == [], result
        Workflow.from_doc(doc)


def test_madbench_lint_exit_codes_and_render_refuses(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from hera.workflows import models as m

    from madbench_common.cli import main
    from madbench_common.pipeline.argo import workflow_yaml

    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(base()))
    bad.write_text(yaml.safe_dump(_violating(CASES[0][1])))
    assert main(["lint", str(good)]) == 0
    assert "ok: " in capsys.readouterr().out
    assert main(["lint", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}: templates.main cannot use both 'depends' and 'dependencies'" in out
    # render: the text of a workflow Argo would refuse is never produced
    wf = m.Workflow.model_validate(json.loads(json.dumps(_violating(CASES[0][1]))))
    with pytest.raises(ConfigError, match="cannot use both 'depends' and 'dependencies'"):
        workflow_yaml(wf)
    assert workflow_yaml(m.Workflow.model_validate(base())).startswith("# Generated")


def test_every_committed_workflow_passes() -> None:
    from madbench_common.cluster.lint import lint_workflow

    root = Path(__file__).resolve().parents[2] / "workflows"
    paths = sorted(root.glob("*.yaml"))
    assert len(paths) >= 4
    for path in paths:
        assert lint_workflow(path) == [], path


def test_lint_pods_checks_the_dry_run_and_notes_what_it_cannot_run(tmp_path: Path) -> None:
    from madbench_common.cluster.lint import lint_workflow

    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(base()))
    assert lint_workflow(path) == []
    # the base's pods run `madbench --shard …` (and the summary `madbench Succeeded …`),
    # which madbench's own parser refuses
    problems = lint_workflow(path, pods=True)
    assert any(": madbench --shard 0" in p for p in problems)
    assert all(p.startswith(f"{path}: ") and ": madbench " in p for p in problems)
    notes: list[str] = []
    weights = Path(__file__).resolve().parents[2] / "workflows" / "weights.yaml"
    assert lint_workflow(weights, pods=True, notes=notes) == []
    assert len(notes) == 1 and "withParam" in notes[0]
