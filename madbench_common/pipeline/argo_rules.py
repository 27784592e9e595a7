"""Argo Workflows' own rules for a Workflow, checked before ``argo submit``.

A pure-Python reading of what Argo refuses for the constructs ``madbench render`` emits,
so a workflow fails here, in Argo's words, rather than on the cluster. Each rule cites the
file and line of Argo's source at :data:`ARGO_RELEASE` (:data:`ARGO_COMMIT`) it
re-implements: the validator (``argo submit``/``lint``), the controller's runtime checks
and the API server's pod validation; where it is stricter it says so. :func:`check_workflow`
returns every problem found; ``madbench lint``, ``madbench render`` and the local executor
run it. Expressions, ``depends``, durations and quantities are parsed by :mod:`.argo_expr`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from madbench_common.pipeline.argo_expr import (
    DependsError,
    UnsupportedConstruct,
    ancestry,
    dependency_cycle,
    depends_names,
    evaluate,
    parse_depends,
    parse_go_duration,
    parse_k8s_quantity,
    sort_problem,
)

__all__ = [
    "ARGO_COMMIT",
    "ARGO_RELEASE",
    "DEPENDS_RESULTS",
    "MIN_ARGO_VERSION",
    "VERSION_GATES",
    "check_workflow",
    "min_version",
]

ARGO_RELEASE = "v3.7.18"
ARGO_COMMIT = "66e32e5cc367f223e2ecf4fbe852b95eaed83034"
"""argoproj/argo-workflows at the tag :data:`ARGO_RELEASE`: every line cited here."""

MIN_ARGO_VERSION = (3, 5)
"""The oldest Argo release the rendered workflows may need (README: Running on a
Kubernetes cluster). A field newer than this is refused (:data:`VERSION_GATES`)."""


# ------------------------------------------------------------------ names and variables

# validate.go:1634 (workflowFieldNameFmt) and :1640-1650 (isValidWorkflowFieldName)
_FIELD_NAME = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9]*$")
_FIELD_NAME_MSG = ("name must consist of alpha-numeric characters or '-', and must start with "
                   "an alpha-numeric character (e.g. My-name1-2, 123-NAME)")
# validate.go:1617 (paramOrArtifactNameRegex) and :1625-1631 (isValidParamOrArtifactName)
_PARAM_NAME = re.compile(r"^[-a-zA-Z0-9_]+[-a-zA-Z0-9_]*$")
_PARAM_NAME_MSG = ("Parameter/Artifact name must consist of alpha-numeric characters, '_' or "
                   "'-' e.g. my_param_1, MY-PARAM-1")

DEPENDS_RESULTS = ("Succeeded", "Failed", "Errored", "Skipped", "Omitted", "Daemoned",
                   "AnySucceeded", "AllFailed")
"""The task results a ``depends`` expression may name (workflow/common/ancestry.go:21-30,
checked by ValidateTaskResults at :89-107). ``Completed`` is not one of them."""

# workflow/common/ancestry.go:34-35 (taskNameRegex, taskResultRegex)
# workflow/common/ancestry.go:34-35 (taskResultRegex)
_TASK_RESULT = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)")

_TEMPLATE_TYPES = ("container", "containerSet", "steps", "script", "resource", "dag",
                   "suspend", "data", "http", "plugin")
_LEAF_TYPES = ("container", "containerSet", "script", "resource", "suspend", "data", "http",
               "plugin")
_RETRY_POLICIES = ("Always", "OnError", "OnFailure", "OnTransientError", "")
_PODGC = ("", "OnPodCompletion", "OnPodSuccess", "OnWorkflowCompletion", "OnWorkflowSuccess")

# workflow/common/common.go:297 (GlobalVarValidWorkflowVariablePrefix): only tags with one
# of these prefixes are resolved at validation (a bare {{item}} is not among them)
_CHECKED_PREFIXES = ("item.", "steps.", "inputs.", "outputs.", "pod.", "workflow.", "tasks.")
# validate.go:737-754: prefixes resolved only at run time
_RUNTIME_PREFIXES = ("outputs.", "workflow.creationTimestamp", "workflow.scheduledTime",
                     "workflow.duration", "tasks.name", "steps.name", "node.name")

_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


@dataclass(frozen=True)
class VersionGate:
    """A field that exists only from an Argo release on (older controllers drop it)."""

    where: str
    since: tuple[int, int]
    source: str


VERSION_GATES = (
    VersionGate("retryStrategy.expression", (3, 2),
                "pkg/apis/workflow/v1alpha1/workflow_types.go:2176 (absent at v3.1.0)"),
    VersionGate("parameter description", (3, 3),
                "pkg/apis/workflow/v1alpha1/workflow_types.go:927 (absent at v3.2.0)"),
    VersionGate("depends result .Omitted", (3, 4),
                "workflow/common/ancestry.go:26 (absent at v3.3.0)"),
    VersionGate("podGC.deleteDelayDuration", (3, 5),
                "pkg/apis/workflow/v1alpha1/workflow_types.go:1078 (absent at v3.4.0)"),
    VersionGate("retryStrategy.backoff.cap", (3, 7),
                "pkg/apis/workflow/v1alpha1/workflow_types.go:2147 (absent at v3.6.0)"),
)
"""Each gate was found by reading the field's declaration at every minor release tag."""


# ------------------------------------------------------------------ the checker


def _names(items: Any, prefix: str, param: bool = False) -> list[str]:
    """validateWorkflowFieldNames (validate.go:1270-1314): every item named, validly,
    once."""
    out: list[str] = []
    seen: set[str] = set()
    for i, item in enumerate(items or []):
        name = str((item or {}).get("name") or "") if isinstance(item, dict) else ""
        if not name:
            out.append(f"{prefix}[{i}].name is required")
            continue
        pattern, msg = (_PARAM_NAME, _PARAM_NAME_MSG) if param else (_FIELD_NAME, _FIELD_NAME_MSG)
        errs = [msg] if not pattern.match(name) else []
        if not param and len(name) > 128:
            errs.insert(0, "must be no more than 128 characters")
        if errs:
            out.append(f"{prefix}[{i}].name: '{name}' is invalid: {';'.join(errs)}")
        elif name in seen:
            out.append(f"{prefix}[{i}].name '{name}' is not unique")
        seen.add(name)
    return out


def _arguments(prefix: str, args: Any, allow_empty: bool) -> list[str]:
    """validateArguments (validate.go:902-976) for parameters."""
    params = (args or {}).get("parameters") or []
    out = _names(params, f"{prefix}parameters", param=True)
    for p in params:
        if not isinstance(p, dict):
            continue
        name = p.get("name")
        if "value" not in p and "valueFrom" not in p and not allow_empty:
            out.append(f"{prefix}{name}.value or {prefix}{name}.valueFrom is required")
        if "enum" in p:
            enum = p["enum"] or []
            if not enum:
                out.append(f"{prefix}{name}.enum should contain at least one value")
            elif "value" not in p:
                if not allow_empty:
                    out.append(f"{prefix}{name}.value is required")
            elif str(p["value"]) not in [str(e) for e in enum]:
                out.append(f"{prefix}{name}.value should be present in {prefix}{name}.enum list")
    return out


def _tags(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield from (m.group(1) for m in _TAG.finditer(value))
    elif isinstance(value, list):
        for v in value:
            yield from _tags(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tags(v)


_EXPR_NAME = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|([A-Za-z_][A-Za-z0-9_]*"""
                        r"""(?:\.[A-Za-z_][A-Za-z0-9_-]*)*)(\s*\()?""")
_EXPR_WORDS = {"true", "false", "nil", "and", "or", "not", "in", "matches", "contains",
               "startsWith", "endsWith"}


def _unresolved(value: Any, scope: set[str], loop: bool) -> list[str]:
    """Tags of ``value`` that resolve to nothing: resolveAllVariables (validate.go:720-758)
    for plain tags; stricter than Argo for ``{{item}}`` (needs a loop on the task) and for
    the dotted names inside ``{{=…}}`` (Argo evaluates those at run time only)."""
    out: list[str] = []
    for raw in _tags(value):
        tag = raw.strip()
        if tag.startswith("="):
            names = [m.group(1) for m in _EXPR_NAME.finditer(tag[1:])
                     if m.group(1) and not m.group(2) and m.group(1) not in _EXPR_WORDS]
            out += [f"failed to resolve {{{{{raw}}}}}" for n in names
                    if not _resolves(n, scope, loop)][:1]
        elif not _resolves(tag, scope, loop):
            out.append(f"failed to resolve {{{{{raw}}}}}")
    return out


def _resolves(tag: str, scope: set[str], loop: bool) -> bool:
    if tag == "item" or tag.startswith("item."):
        return loop
    if not tag.startswith(_CHECKED_PREFIXES):
        return True  # validate.go:727-730: a custom variable, not Argo's to check
    return tag in scope or tag.startswith(_RUNTIME_PREFIXES)


class _Checker:
    def __init__(self, doc: Mapping[str, Any], target: tuple[int, int]) -> None:
        self.doc = doc
        self.spec: dict[str, Any] = dict(doc.get("spec") or {})
        self.target = target
        self.problems: list[str] = []
        self.templates: dict[str, dict[str, Any]] = {}
        for t in self.spec.get("templates") or []:
            if isinstance(t, dict) and t.get("name") and t["name"] not in self.templates:
                self.templates[str(t["name"])] = t
        self.globals: set[str] = {"workflow.name", "workflow.namespace", "workflow.uid",
                                  "workflow.mainEntrypoint", "workflow.serviceAccountName",
                                  "workflow.status", "workflow.annotations",
                                  "workflow.annotations.json", "workflow.labels",
                                  "workflow.labels.json"}
        self.done: set[str] = set()

    def add(self, msg: str) -> None:
        if msg not in self.problems:
            self.problems.append(msg)

    def run(self) -> list[str]:
        spec = self.spec
        # validate.go:174-184: template names
        for msg in _names(spec.get("templates"), "spec.templates"):
            self.add(msg)
        # validate.go:186-194: workflow arguments (as argo lint: values may be empty)
        args = spec.get("arguments") or {}
        for msg in _arguments("spec.arguments.", args, allow_empty=True):
            self.add(msg)
        params = [p for p in args.get("parameters") or [] if isinstance(p, dict)]
        if params:
            self.globals |= {"workflow.parameters", "workflow.parameters.json"}
        self.globals |= {f"workflow.parameters.{p.get('name')}" for p in params}
        meta = self.doc.get("metadata") or {}
        self.globals |= {f"workflow.annotations.{k}" for k in meta.get("annotations") or {}}
        self.globals |= {f"workflow.labels.{k}" for k in meta.get("labels") or {}}
        if "priority" in spec:
            self.globals.add("workflow.priority")
        # validate.go:243-245 and :247-262: the entrypoint, then everything it reaches
        entry = spec.get("entrypoint")
        if not entry:
            self.add("spec.entrypoint is required")
        else:
            self.holder(str(entry), "")
        # validate.go:271-317: the exit handler, with {{workflow.failures}} in scope
        if spec.get("onExit"):
            self.globals.add("workflow.failures")
            self.holder(str(spec["onExit"]), "")
        # validate.go:323-325
        strategy = str((spec.get("podGC") or {}).get("strategy") or "")
        if strategy not in _PODGC:
            self.add(f"podGC.strategy unknown strategy '{strategy}'")
        if "deleteDelayDuration" in (spec.get("podGC") or {}):
            self.duration((spec["podGC"])["deleteDelayDuration"], "podGC.deleteDelayDuration")
        # validate.go:342-347: every template, reachable or not
        for name in self.templates:
            self.holder(name, f"templates.{name} ")
        self.volumes()
        self.versions()
        return self.problems

    # -- templates
    def holder(self, name: str, prefix: str) -> dict[str, Any] | None:
        """validateTemplateHolder (validate.go:585-639): the template exists, its
        retryStrategy's policy is one Argo knows; then validateTemplate."""
        t = self.templates.get(name)
        if t is None:
            self.add(f"{prefix}template name '{name}' undefined")
            return None
        rs = t.get("retryStrategy")
        if isinstance(rs, dict) and str(rs.get("retryPolicy", "")) not in _RETRY_POLICIES:
            self.add(f"{prefix}{rs['retryPolicy']} is not a valid RetryPolicy")
        if name not in self.done:
            self.done.add(name)
            self.template(t)
        return t

    def template(self, t: dict[str, Any]) -> None:
        name = t["name"]
        types = [k for k in _TEMPLATE_TYPES if t.get(k) is not None]
        # validate.go:642-658
        if not types:
            self.add(f"templates.{name} template type unspecified. choose one of: container, "
                     "containerSet, steps, script, resource, dag, suspend, template, "
                     "template ref")
            return
        if len(types) > 1:
            self.add(f"templates.{name} multiple template types specified. choose one of: "
                     "container, containerSet, steps, script, resource, dag, suspend, "
                     "template, template ref")
            return
        # validate.go:660-665 (validateInputs)
        inputs = (t.get("inputs") or {}).get("parameters") or []
        for msg in _names(inputs, f"templates.{name}.inputs.parameters", param=True):
            self.add(msg)
        scope = set(self.globals)
        scope |= {f"inputs.parameters.{p.get('name')}" for p in inputs if isinstance(p, dict)}
        if inputs:
            scope.add("inputs.parameters")
        leaf = types[0] in _LEAF_TYPES
        if leaf:
            scope.add("pod.name")  # validate.go:474-477
        if t.get("retryStrategy") is not None:  # validate.go:478-489
            scope |= {"retries", "lastRetry.exitCode", "lastRetry.status",
                      "lastRetry.duration", "lastRetry.message"}
            self.retry(name, t["retryStrategy"])
        if types[0] == "dag":
            self.dag(t, scope)
        elif leaf:
            self.leaf(t, scope)

    def leaf(self, t: dict[str, Any], scope: set[str]) -> None:
        """validateLeaf (validate.go:777-900) and the pod's resources (Kubernetes)."""
        name = t["name"]
        for msg in _unresolved({k: v for k, v in t.items() if k != "name"}, scope, False):
            self.add(f"templates.{name}: {msg}")
        c = t.get("container")
        if isinstance(c, dict):
            seen: dict[str, str] = {}
            for i, vm in enumerate(c.get("volumeMounts") or []):
                path = str(vm.get("mountPath"))
                if path in seen:  # validate.go:789-795
                    self.add(f"templates.{name}.container.volumeMounts[{i}].mountPath '{path}'"
                             f" already mounted in {seen[path]}")
                seen[path] = f"container.volumeMounts.{vm.get('name')}"
            if not c.get("image"):  # validate.go:801-814
                self.add(f"templates.{name}.container.image may not be empty")
            self.resources(name, c.get("resources") or {})
        ads = t.get("activeDeadlineSeconds")
        if ads is not None:  # validate.go:888-895
            text = str(ads)
            ok = bool(re.fullmatch(r"\d+", text)) or bool(
                re.fullmatch(r"\{\{.*\}\}", text.strip()))
            if not ok:
                self.add(f"templates.{name}.activeDeadlineSeconds must be a positive integer > "
                         "0 or an argo variable")
        if t.get("parallelism") is not None:  # validate.go:896-898
            self.add(f"templates.{name}.parallelism is only valid for steps and dag templates")

    def resources(self, name: str, res: Mapping[str, Any]) -> None:
        """The API server's ValidateResourceRequirements
        (kubernetes pkg/apis/core/validation/validation.go): every quantity parses
        (apimachinery resource/quantity.go ParseQuantity), none is negative, a request
        is at most its limit, an extended resource (``nvidia.com/gpu``) is an integer,
        has a limit, and its request equals it."""
        parsed: dict[str, dict[str, float]] = {}
        for part in ("limits", "requests"):
            for key, value in (res.get(part) or {}).items():
                where = f"templates.{name}.container.resources.{part}[{key}]"
                if "{{" in str(value):
                    continue  # resolved at run time
                try:
                    q = parse_k8s_quantity(value)
                except ValueError as exc:
                    self.add(f"{where}: {exc}")
                    continue
                parsed.setdefault(part, {})[key] = q
                if q < 0:
                    self.add(f"{where}: Invalid value: \"{value}\": must be greater than or "
                             "equal to 0")
                if "/" in key and not key.startswith("kubernetes.io/") and q != int(q):
                    self.add(f"{where}: Invalid value: \"{value}\": must be an integer")
        limits, requests = parsed.get("limits", {}), parsed.get("requests", {})
        for key, q in requests.items():
            extended = "/" in key and not key.startswith("kubernetes.io/")
            where = f"templates.{name}.container.resources.requests"
            if extended and key not in limits:
                self.add(f"{where}[{key}]: Forbidden: Limit must be set for non "
                         "overcommitable resources")
            elif key in limits and extended and q != limits[key]:
                self.add(f"{where}: Invalid value: \"{res['requests'][key]}\": must be equal "
                         f"to {key} limit")
            elif key in limits and q > limits[key]:
                self.add(f"{where}: Invalid value: \"{res['requests'][key]}\": must be less "
                         f"than or equal to {key} limit")

    def retry(self, name: str, rs: Any) -> None:
        """What the controller parses of a retryStrategy when a node fails
        (workflow/controller/operator.go:1021-1075, the limit at :1126): limit and factor
        are integers (intstr), durations parse (utils.go:9-20), a backoff has a duration."""
        if not isinstance(rs, dict):
            return
        where = f"templates.{name}.retryStrategy"
        limit = rs.get("limit")
        if limit is not None and "{{" not in str(limit) and not re.fullmatch(r"\d+",
                                                                              str(limit)):
            self.add(f'{where}.limit: strconv.Atoi: parsing "{limit}": invalid syntax')
        backoff = rs.get("backoff")
        if isinstance(backoff, dict):
            if not backoff.get("duration"):
                self.add(f"{where}: no base duration specified for retryStrategy")
            for key in ("duration", "maxDuration", "cap"):
                if backoff.get(key):
                    self.duration(backoff[key], f"{where}.backoff.{key}")
            factor = backoff.get("factor")
            if factor is not None and not re.fullmatch(r"-?\d+", str(factor)):
                self.add(f'{where}.backoff.factor: strconv.Atoi: parsing "{factor}": '
                         "invalid syntax")
        if rs.get("expression"):
            known = {"lastRetry.exitCode": "1", "lastRetry.status": "Failed",
                     "lastRetry.duration": "1", "lastRetry.message": ""}

            def lookup(n: str) -> str:
                if n not in known:
                    raise UnsupportedConstruct(f"unknown name {n}")
                return known[n]

            try:
                evaluate(str(rs["expression"]), lookup)
            except UnsupportedConstruct as exc:
                self.add(f"{where}.expression: unable to evaluate expression "
                         f"'{rs['expression']}': {exc}")

    def duration(self, value: Any, where: str) -> None:
        try:
            parse_go_duration(str(value))
        except ValueError as exc:
            self.add(f"{where}: {exc}")

    def dag(self, t: dict[str, Any], scope: set[str]) -> None:
        """validateDAG (validate.go:1353-1501)."""
        name = t["name"]
        if t.get("activeDeadlineSeconds") is not None:  # validate.go:770-775
            self.add(f"templates.{name}.activeDeadlineSeconds is only valid for leaf templates")
        dag = t.get("dag") or {}
        tasks = [x for x in dag.get("tasks") or [] if isinstance(x, dict)]
        if not tasks:  # validate.go:1358-1360
            self.add(f"templates.{name} must have at least one task")
            return
        by_name = {str(x.get("name")): x for x in tasks}
        deps = {str(x.get("name")): depends_names(x) for x in tasks}
        # validate.go:1374-1377 with util/sorting/topological_sorting.go:16-45
        sorting = sort_problem([str(x.get("name")) for x in tasks], deps)
        if sorting:
            self.add(f"templates.{name} sorting failed: {sorting}")
        # validate.go:1379-1382
        for msg in _names(tasks, f"templates.{name}.tasks"):
            self.add(msg)
        using_depends = any(x.get("depends") for x in tasks)
        for x in tasks:
            tname = str(x.get("name"))
            where = f"templates.{name}.tasks.{tname}"
            if (using_depends or x.get("dependencies")) and tname[:1].isdigit():
                self.add(f"{where} name cannot begin with a digit when using either 'depends' "
                         "or 'dependencies'")  # validate.go:1389-1391
            if using_depends and x.get("dependencies"):  # validate.go:1393-1395
                self.add(f"templates.{name} cannot use both 'depends' and 'dependencies' in "
                         "the same DAG template")
            if using_depends and x.get("continueOn") is not None:  # validate.go:1397-1399
                self.add(f"templates.{name} cannot use 'continueOn' when using 'depends'. "
                         "Instead use 'dep-task.Failed'/'dep-task.Errored'")
            self.holder(str(x.get("template")), f"{where} ")  # validate.go:1401-1405
            if x.get("depends"):  # ancestry.go:89-107 via validate.go:1413-1416
                for match in _TASK_RESULT.findall(str(x["depends"])):
                    task, result = match.split(".", 1)
                    if result not in DEPENDS_RESULTS:
                        self.add(f"{where} task result '{result}' for task '{task}' is invalid")
                try:
                    parse_depends(str(x["depends"]))
                except DependsError as exc:  # dag.go:1017-1021 (a run-time Error node)
                    expr = str(x["depends"]).replace("-", "_")
                    self.add(f"{where} unable to evaluate expression '{expr}': {exc}")
            for dep, items in deps[tname].items():  # validate.go:1418-1431
                other = by_name.get(dep)
                if other is None:
                    self.add(f"{where} dependency '{dep}' not defined")
                elif items and not any(other.get(k) for k in
                                       ("withItems", "withParam", "withSequence")):
                    self.add(f"{where} dependency '{dep}' uses an items-based condition such "
                             "as .AnySucceeded or .AllFailed but does not contain any items")
        if not sorting:  # validate.go:1551-1585
            cycle = dependency_cycle(deps)
            if cycle:
                self.add(f"templates.{name}.tasks dependency cycle detected: {cycle}")
        for target in str(dag.get("target") or "").split():  # validate.go:1535-1549
            if target not in by_name and not re.fullmatch(r"\{\{.*\}\}", target):
                self.add(f"templates.{name}.targets: target '{target}' is not defined")
        for x in tasks:
            self.task(name, x, scope, deps)

    def task(self, dag: str, x: dict[str, Any], scope: set[str],
             deps: Mapping[str, Mapping[str, bool]]) -> None:
        tname = str(x.get("name"))
        where = f"templates.{dag}.tasks.{tname}"
        loops = [k for k in ("withItems", "withParam", "withSequence") if x.get(k)]
        if len(loops) > 1:  # validate.go:1058-1071
            self.add(f"{where} only one of withItems, withParam, withSequence can be specified")
        seq = x.get("withSequence")
        if isinstance(seq, dict) and "count" in seq and "end" in seq:  # validate.go:1095-1098
            self.add(f"{where} only one of count or end can be defined in withSequence")
        # validate.go:1441-1484: the task's own tags, with its ancestors' outputs in scope
        task_scope = set(scope)
        for anc in ancestry(tname, deps):
            task_scope |= {f"tasks.{anc}.{k}" for k in
                           ("id", "startedAt", "finishedAt", "hostNodeName", "status")}
            t = self.templates.get(str(self.task_template(dag, anc)))
            if t is not None and t.get("container") is not None:
                task_scope |= {f"tasks.{anc}.outputs.result", f"tasks.{anc}.exitCode"}
            for p in ((t or {}).get("outputs") or {}).get("parameters") or []:
                task_scope.add(f"tasks.{anc}.outputs.parameters.{p.get('name')}")
        for msg in _unresolved({k: v for k, v in x.items() if k not in ("name", "depends")},
                               task_scope, bool(loops)):
            self.add(f"{where} {msg}")
        # validate.go:1485-1488: task arguments need values
        for msg in _arguments(f"{where}.arguments.", x.get("arguments"), allow_empty=False):
            self.add(msg)
        # validate.go:1494-1497 via workflow/common/util.go:146-150: every input supplied
        t = self.templates.get(str(x.get("template")))
        if t is not None:
            given = {str(p.get("name")) for p in (x.get("arguments") or {}).get(
                "parameters") or [] if isinstance(p, dict)}
            for p in (t.get("inputs") or {}).get("parameters") or []:
                if isinstance(p, dict) and p.get("name") not in given and "value" not in p \
                        and "default" not in p and "valueFrom" not in p:
                    self.add(f"{where} templates.{t['name']} inputs.parameters.{p['name']} "
                             "was not supplied")

    def task_template(self, dag: str, task: str) -> str | None:
        for x in (self.templates.get(dag) or {}).get("dag", {}).get("tasks") or []:
            if x.get("name") == task:
                return str(x.get("template"))
        return None

    def volumes(self) -> None:
        """Each volumeMount names a volume of the workflow (Kubernetes pod validation:
        ``volumeMounts[i].name: Not found``); an emptyDir sizeLimit is a quantity."""
        names = {str(v.get("name")) for v in self.spec.get("volumes") or [] if isinstance(v, dict)}
        for v in self.spec.get("volumes") or []:
            size = ((v or {}).get("emptyDir") or {}).get("sizeLimit")
            if size is not None:
                try:
                    parse_k8s_quantity(size)
                except ValueError as exc:
                    self.add(f"spec.volumes[{v.get('name')}].emptyDir.sizeLimit: {exc}")
        for t in self.templates.values():
            for i, vm in enumerate((t.get("container") or {}).get("volumeMounts") or []):
                if str(vm.get("name")) not in names:
                    self.add(f"templates.{t['name']}.container.volumeMounts[{i}].name: Not "
                             f"found: \"{vm.get('name')}\"")

    def versions(self) -> None:
        for gate, where in _gated(self.spec):
            if gate.since > self.target:
                self.add(f"{where}: {gate.where} needs Argo v{gate.since[0]}.{gate.since[1]} "
                         f"({gate.source}); the workflows support "
                         f"v{self.target[0]}.{self.target[1]} and later")


def _gated(spec: Mapping[str, Any]) -> list[tuple[VersionGate, str]]:
    gates = {g.where: g for g in VERSION_GATES}
    out: list[tuple[VersionGate, str]] = []
    if "deleteDelayDuration" in (spec.get("podGC") or {}):
        out.append((gates["podGC.deleteDelayDuration"], "spec.podGC"))
    for p in (spec.get("arguments") or {}).get("parameters") or []:
        if isinstance(p, dict) and "description" in p:
            out.append((gates["parameter description"], f"spec.arguments.{p.get('name')}"))
    for t in spec.get("templates") or []:
        if not isinstance(t, dict):
            continue
        rs = t.get("retryStrategy") or {}
        if "expression" in rs:
            out.append((gates["retryStrategy.expression"], f"templates.{t.get('name')}"))
        if "cap" in (rs.get("backoff") or {}):
            out.append((gates["retryStrategy.backoff.cap"], f"templates.{t.get('name')}"))
        for p in (t.get("inputs") or {}).get("parameters") or []:
            if isinstance(p, dict) and "description" in p:
                out.append((gates["parameter description"], f"templates.{t.get('name')}"))
        for x in (t.get("dag") or {}).get("tasks") or []:
            if ".Omitted" in str(x.get("depends") or ""):
                out.append((gates["depends result .Omitted"],
                            f"templates.{t.get('name')}.tasks.{x.get('name')}"))
    return out


def min_version(doc: Mapping[str, Any]) -> tuple[int, int]:
    """The oldest Argo release (major, minor) that knows every field ``doc`` uses among
    :data:`VERSION_GATES` (v3.0 when none)."""
    return max([g.since for g, _ in _gated(doc.get("spec") or {})], default=(3, 0))



def check_workflow(doc: Any, target: tuple[int, int] = MIN_ARGO_VERSION) -> list[str]:
    """Every reason Argo (release :data:`ARGO_RELEASE`, or the Kubernetes API server for
    its pods) would refuse ``doc``, in Argo's words; empty when it would run it.
    ``target``: the oldest Argo release the workflow must run on (version-gated fields)."""
    if not isinstance(doc, dict) or doc.get("kind") != "Workflow":
        return ["not a Workflow (kind: Workflow, apiVersion: argoproj.io/v1alpha1)"]
    if not isinstance(doc.get("spec"), dict):
        return ["spec is required"]
    return _Checker(doc, target).run()
