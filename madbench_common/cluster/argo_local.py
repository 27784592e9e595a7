"""A local interpreter of the Argo Workflows subset that ``madbench render`` emits.

It executes the rendered YAML itself (``workflows/full.yaml``, ``smoke.yaml``,
``deaf.yaml``): what runs is what ``argo submit`` would run, pod by pod, with the
containers started by a :class:`Runner` (the rehearsal's runs each pod in its image
under the pod policy; tests use in-memory runners). Supported, with Argo's semantics:

- ``spec``: ``entrypoint``, ``arguments.parameters`` (overridden like ``argo submit -p``;
  an unknown name fails, and so does a value outside a parameter's ``enum``),
  ``templates``, ``onExit`` (run after the DAG with
  ``workflow.status``, ``workflow.duration`` and ``workflow.failures``), ``volumes``
  (``emptyDir``, ``persistentVolumeClaim``), ``securityContext``, ``activeDeadlineSeconds``,
  ``parallelism``;
- DAG templates: tasks with ``dependencies`` or ``depends`` (``&&``, ``||``, ``!``,
  parentheses, ``task`` and ``task.Succeeded|Failed|Errored|Skipped|Omitted|Daemoned|
  AnySucceeded|AllFailed``), ``arguments.parameters``, ``withSequence`` (``count`` or
  ``start``/``end``), ``target``, ``failFast``, template ``parallelism`` (running pods
  under one invocation). Scheduling and the DAG's phase follow Argo's controller
  (``_advance``, ``_assess``): a failure does not stop the other branches, and a failure
  that a ``.Failed`` branch handles can leave the DAG Succeeded;
- container templates: ``image``, ``command`` + ``args``, ``env`` (``value``, and
  ``valueFrom.secretKeyRef`` from a local secret set: values are handed to the runner
  only, never shown by :meth:`Pod.describe`), ``volumeMounts``, ``resources.limits``
  (``memory``: a memory cgroup; ``nvidia.com/gpu``: recorded, run on the CPU — a
  rehearsal relaxation), ``securityContext``, ``inputs.parameters``,
  ``activeDeadlineSeconds`` (per attempt), ``retryStrategy`` (``limit``,
  ``retryPolicy`` Always/OnFailure/OnError, ``expression`` over ``lastRetry.exitCode|
  status|duration|message``, ``backoff.duration|factor|maxDuration``);
- tags ``{{workflow.parameters.x}}``, ``{{inputs.parameters.x}}``, ``{{item}}``,
  ``{{workflow.name}}`` (``status``, ``duration``, ``failures`` in the exit handler) and
  ``{{=expr}}`` expressions (literals, dotted names, ``== != < <= > >= && || !``,
  ``?:``, parentheses).

A workflow Argo itself would refuse is refused first, in Argo's words
(:func:`madbench_common.pipeline.argo_rules.check_workflow`). Then anything this executor
does not honour — another template kind, ``withParam``, ``when``, ``outputs``, a tag or an
expression function it does not know, a security context the local engine cannot
enforce — fails loudly when the workflow is loaded or a pod resolved
(:class:`UnsupportedConstruct`, exit 3), never silently ignored, unless it is one of the
documented cluster-only fields (:data:`CLUSTER_ONLY`: scheduling, GC, TTL, RBAC, pulls,
requests), which are accepted and have no local meaning.

Simplifications (documented, not hidden): a pod that cannot start (image missing, secret
key missing) is an ``Error`` at once rather than a pending pod; ``stop_on_failure`` is a
mode stricter than Argo (no new task after a DAG's first failure).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import string
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Union

import yaml

from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.argo_expr import (
    UnsupportedConstruct,
    depends_names,
    evaluate,
    parse_depends,
    truth,
)
from madbench_common.pipeline.argo_rules import ARGO_RELEASE, check_workflow

__all__ = [
    "Executor",
    "Memo",
    "Pod",
    "PodResult",
    "Retry",
    "Runner",
    "SecretRef",
    "UnsupportedConstruct",
    "VolumeMount",
    "Workflow",
    "WorkflowResult",
    "evaluate",
    "parse_duration",
    "parse_quantity",
    "substitute",
]

ParamValue = Union[str, Callable[[], str]]
"""A workflow parameter's value: a string, or a callable bound when a pod is resolved."""


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def substitute(text: str, scope: Mapping[str, ParamValue], where: str = "") -> str:
    """Replace every ``{{tag}}`` and ``{{=expression}}`` in ``text`` from ``scope``.

    ``scope`` maps full tag names (``workflow.parameters.store``, ``item``, …) to values;
    an unknown tag fails (Argo refuses unresolved variables too).
    """
    def lookup(name: str) -> str:
        if name not in scope:
            raise UnsupportedConstruct(f"{where or 'workflow'}: unknown variable {{{{{name}}}}}"
                                       f" (known here: {', '.join(sorted(scope)) or 'none'})")
        value = scope[name]
        return value() if callable(value) else value

    def one(m: re.Match[str]) -> str:
        body = m.group(1).strip()
        if body.startswith("="):
            return _render(evaluate(body[1:], lookup))
        return lookup(body)

    return _TAG.sub(one, text)


def _subst_tree(value: Any, scope: Mapping[str, ParamValue], where: str) -> Any:
    if isinstance(value, str):
        return substitute(value, scope, where)
    if isinstance(value, list):
        return [_subst_tree(v, scope, where) for v in value]
    if isinstance(value, dict):
        return {k: _subst_tree(v, scope, where) for k, v in value.items()}
    return value


# ------------------------------------------------------------------ quantities


_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity (``512Mi``, ``2Gi``, ``500m``, ``1``) as a number."""
    m = _QUANTITY.match(str(value).strip())
    if m is None or m.group(2) not in _SUFFIX:
        raise UnsupportedConstruct(f"quantity {value!r} is not supported")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(value: Any) -> float:
    """Seconds of an Argo duration: ``30s``, ``1m30s``, ``2h``, or a plain number."""
    text = str(value).strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise UnsupportedConstruct(f"duration {value!r} is not supported")
    scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


# ------------------------------------------------------------------ pods


@dataclass(frozen=True)
class SecretRef:
    """``valueFrom.secretKeyRef``: resolved by the runner, never shown."""

    secret: str
    key: str
    optional: bool = False


@dataclass(frozen=True)
class VolumeMount:
    """A mount of a workflow volume: ``emptyDir`` or a ``persistentVolumeClaim``."""

    name: str
    path: str
    read_only: bool
    kind: str
    claim: str = ""


@dataclass(frozen=True)
class Retry:
    """A template's ``retryStrategy``."""

    limit: int
    policy: str = "OnFailure"
    expression: str = ""
    backoff: float = 0.0
    factor: float = 1.0
    max_duration: float | None = None


@dataclass(frozen=True)
class Pod:
    """One resolved container invocation: what a Kubernetes pod would run."""

    node: str
    """The node's path, e.g. ``madbench.ingest(1)`` or ``madbench.ingest-merge``."""
    template: str
    image: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str | SecretRef], ...]
    mounts: tuple[VolumeMount, ...]
    user: int
    group: int
    memory_limit: int | None = None
    memory_request: int | None = None
    cpu_request: float | None = None
    gpu: int = 0
    deadline: float | None = None
    retry: Retry | None = None
    labels: tuple[tuple[str, str], ...] = ()

    def describe(self) -> dict[str, Any]:
        """JSON-able view for dry runs and logs; secrets appear as references only."""
        env = {k: (v if isinstance(v, str) else
                   f"secretKeyRef:{v.secret}/{v.key}{'?' if v.optional else ''}")
               for k, v in self.env}
        return {"node": self.node, "template": self.template, "image": self.image,
                "argv": list(self.argv), "env": env,
                "mounts": [{"path": m.path, "volume": m.name, "kind": m.kind,
                            "claim": m.claim, "read_only": m.read_only} for m in self.mounts],
                "user": f"{self.user}:{self.group}", "memory_limit": self.memory_limit,
                "cpu_request": self.cpu_request, "gpu": self.gpu, "deadline": self.deadline,
                "retry": None if self.retry is None else vars(self.retry).copy(),
                "labels": dict(self.labels)}

    def identity(self) -> str:
        """What the pod runs (image, argv, env with secret names, mounts) as a digest."""
        d = self.describe()
        keep = {k: d[k] for k in ("image", "argv", "env", "mounts", "user")}
        return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class PodResult:
    """One attempt's outcome: ``Succeeded``, ``Failed`` (non-zero exit) or ``Error``."""

    phase: str
    exit_code: int | None = None
    message: str = ""
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


class Runner(Protocol):
    """Starts pods. ``prepare`` may make the pod's image available (and rebind lazy
    parameters); ``run`` runs one attempt and must stop when ``cancel`` is set."""

    def prepare(self, pod: Pod) -> None: ...

    def run(self, pod: Pod, attempt: int, cancel: threading.Event) -> PodResult: ...


class Memo(Protocol):
    """Pods that finished before with the same key (a resumed execution skips them)."""

    def done(self, key: str, pod: Pod) -> bool: ...

    def record(self, key: str, pod: Pod, result: PodResult) -> None: ...

    def entry(self, key: str, pod: Pod) -> dict[str, Any]:
        """What the earlier run of a pod that is :meth:`done` measured (``seconds``,
        ``peak_rss_bytes``, ...; whatever :meth:`record` kept), for the skipped node."""
        ...


# ------------------------------------------------------------------ workflow model

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it: the rendered full.yaml (0.3 MB) loads in about
0.4 s instead of 2.4 s (the same document; the rehearsal and its tests load it often)."""
_SPEC_KEYS = {"entrypoint", "arguments", "templates", "onExit", "volumes", "securityContext",
              "activeDeadlineSeconds", "parallelism"}
_TEMPLATE_KEYS = {"name", "dag", "container", "inputs", "retryStrategy",
                  "activeDeadlineSeconds", "parallelism"}
_TASK_KEYS = {"name", "template", "dependencies", "depends", "arguments", "withSequence"}
_CONTAINER_KEYS = {"image", "command", "args", "env", "volumeMounts", "resources",
                   "securityContext"}
_CSC_KEYS = {"allowPrivilegeEscalation", "readOnlyRootFilesystem", "runAsNonRoot",
             "capabilities", "runAsUser", "runAsGroup"}
_PSC_KEYS = {"runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile"}
"""Honoured by the pod runner; ``seccompProfile`` only as ``RuntimeDefault`` (the engine's
default profile, which the buildah path applies to every pod)."""
_RETRY_KEYS = {"limit", "retryPolicy", "expression", "backoff"}
_POLICIES = {"Always", "OnFailure", "OnError"}

CLUSTER_ONLY: dict[str, str] = {
    "spec.archiveLogs": "log archiving to Argo's artifact repository (pod logs stay in the "
                        "rehearsal's work folder)",
    "spec.podGC": "garbage collection of finished pods",
    "spec.ttlStrategy": "deletion of the finished Workflow object",
    "spec.serviceAccountName": "the pods' RBAC identity",
    "spec.podPriorityClassName": "scheduling priority and preemption",
    "spec.podMetadata": "pod labels the cluster's network policies select on",
    "spec.securityContext.fsGroup": "group ownership of mounted volumes (local volumes are "
                                    "owned by the pod user already)",
    "template.metadata": "pod labels and annotations (the API egress label selects a "
                         "network policy; the local sandbox lets every pod reach the stub)",
    "template.nodeSelector": "scheduling onto a node pool",
    "template.tolerations": "scheduling onto tainted GPU nodes",
    "template.affinity": "scheduling onto nodes with enough GPU memory",
    "container.imagePullPolicy": "image pulls (images are local builds)",
    "resources.requests": "scheduling: cpu, memory, nvidia.com/gpu and ephemeral-storage "
                          "requests reserve node capacity",
    "resources.limits.ephemeral-storage": "kubelet eviction on local disk use",
    "volume.emptyDir.sizeLimit": "kubelet eviction on scratch use",
}
"""Fields the local executor accepts without honouring them, each with what it does on a
cluster. Nothing else is accepted unless honoured: an unknown or unhonoured field is an
:class:`UnsupportedConstruct` when the workflow is loaded. (``resources.limits.memory`` is
honoured: a memory cgroup; ``resources.limits.nvidia.com/gpu`` is not a cluster-only
field but a rehearsal relaxation: :mod:`madbench_common.cluster.relaxations`.)"""

POD_UID = 10001
"""The one user the local engine runs pods as (madbench_common.build.containers.USER)."""


def _check_keys(obj: Any, allowed: set[str], where: str, kind: str = "") -> dict[str, Any]:
    """``obj`` holds only fields this executor honours, or ``kind``'s cluster-only ones
    (:data:`CLUSTER_ONLY`, e.g. kind ``template``: ``nodeSelector``)."""
    if not isinstance(obj, dict):
        raise UnsupportedConstruct(f"{where}: expected a mapping, got {type(obj).__name__}")
    cluster = {k[len(kind) + 1:] for k in CLUSTER_ONLY if kind and k.startswith(kind + ".")}
    if extra := set(obj) - allowed - cluster:
        raise UnsupportedConstruct(
            f"{where}: {', '.join(sorted(extra))} not supported by the local executor "
            f"(honoured: {', '.join(sorted(allowed))}; accepted as cluster-only: "
            f"{', '.join(sorted(cluster)) or 'none'})")
    return obj


_ENUM = frozenset({"enum"})  # workflow parameters only: the values argo submit accepts


def _params_list(obj: Any, where: str, extra: frozenset[str] = frozenset()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in (obj or {}).get("parameters", []) or []:
        _check_keys(p, {"name", "value", "default", "description"} | extra, where)
        out[str(p["name"])] = p
    return out


@dataclass
class Workflow:
    """A parsed, checked workflow document."""

    doc: dict[str, Any]
    path: str = "<workflow>"
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> Workflow:
        doc = yaml.load(Path(path).read_text(), Loader=_LOADER)
        return cls.from_doc(doc, str(path))

    @classmethod
    def from_doc(cls, doc: Any, path: str = "<workflow>") -> Workflow:
        wf = cls(doc, path)
        wf._check()
        return wf

    # -- checks
    def _check(self) -> None:
        doc = self.doc
        if not isinstance(doc, dict) or doc.get("kind") != "Workflow" or \
                doc.get("apiVersion") != "argoproj.io/v1alpha1":
            raise UnsupportedConstruct(f"{self.path}: not an argoproj.io/v1alpha1 Workflow")
        # what Argo itself refuses, in its words, before what this executor does not do
        if problems := check_workflow(doc):
            raise ConfigError(f"{self.path}: Argo {ARGO_RELEASE} would refuse this workflow: "
                              + "; ".join(problems))
        spec = _check_keys(doc.get("spec"), _SPEC_KEYS, f"{self.path}: spec", "spec")
        for t in spec.get("templates") or []:
            name = str(t.get("name", ""))
            if not name or name in self.templates:
                raise ConfigError(f"{self.path}: template name {name!r} missing or repeated")
            self.templates[name] = t
        for name, t in self.templates.items():
            self._check_template(name, t)
        for ref in (spec.get("entrypoint"), spec.get("onExit")):
            if ref is not None and ref not in self.templates:
                raise ConfigError(f"{self.path}: template {ref!r} does not exist")
        if "entrypoint" not in spec:
            raise ConfigError(f"{self.path}: spec.entrypoint missing")
        self.volumes()
        _check_keys(spec.get("securityContext") or {}, _PSC_KEYS, f"{self.path}: securityContext",
                    "spec.securityContext")
        seccomp = (spec.get("securityContext") or {}).get("seccompProfile")
        if seccomp is not None and (seccomp or {}).get("type") != "RuntimeDefault":
            raise UnsupportedConstruct(f"{self.path}: securityContext.seccompProfile "
                                       f"{seccomp!r}: only RuntimeDefault is applied locally")
        _params_list(spec.get("arguments"), f"{self.path}: spec.arguments", _ENUM)

    def _check_template(self, name: str, t: dict[str, Any]) -> None:
        where = f"{self.path}: template {name}"
        _check_keys(t, _TEMPLATE_KEYS, where, "template")
        kinds = [k for k in ("dag", "container") if k in t]
        if len(kinds) != 1:
            raise UnsupportedConstruct(f"{where}: needs exactly one of dag, container "
                                       "(steps, script, resource, … are not supported)")
        _params_list(t.get("inputs"), f"{where}: inputs")
        _check_keys(t.get("inputs") or {}, {"parameters"}, f"{where}: inputs")
        if "retryStrategy" in t:
            rs = _check_keys(t["retryStrategy"], _RETRY_KEYS, f"{where}: retryStrategy")
            _check_keys(rs.get("backoff") or {}, {"duration", "factor", "maxDuration"},
                        f"{where}: retryStrategy.backoff")
            if rs.get("retryPolicy", "OnFailure") not in _POLICIES:
                raise UnsupportedConstruct(f"{where}: retryPolicy {rs['retryPolicy']!r} "
                                           f"(supported: {', '.join(sorted(_POLICIES))})")
        if "dag" in t:
            dag = _check_keys(t["dag"], {"tasks", "failFast", "target"}, f"{where}: dag")
            names = set()
            for task in dag.get("tasks") or []:
                _check_keys(task, _TASK_KEYS, f"{where}: task {task.get('name')}")
                if task.get("template") not in self.templates:
                    raise ConfigError(f"{where}: task {task.get('name')} refers to missing "
                                      f"template {task.get('template')!r}")
                if task["name"] in names:
                    raise ConfigError(f"{where}: task {task['name']} repeated")
                names.add(task["name"])
                if "withSequence" in task:
                    _check_keys(task["withSequence"], {"count", "start", "end"},
                                f"{where}: task {task['name']} withSequence")
                _params_list(task.get("arguments"), f"{where}: task {task['name']} arguments")
                _check_keys(task.get("arguments") or {}, {"parameters"},
                            f"{where}: task {task['name']} arguments")
            for task in dag.get("tasks") or []:
                for dep in _deps_of(task):
                    if dep not in names:
                        raise ConfigError(f"{where}: task {task['name']} depends on unknown "
                                          f"task {dep!r}")
            _toposort(dag.get("tasks") or [], where)
        else:
            c = _check_keys(t["container"], _CONTAINER_KEYS, f"{where}: container", "container")
            if not c.get("command"):
                raise UnsupportedConstruct(f"{where}: a container without command (the "
                                           "image's entrypoint) is not supported")
            for e in c.get("env") or []:
                _check_keys(e, {"name", "value", "valueFrom"}, f"{where}: env {e.get('name')}")
                if "valueFrom" in e:
                    vf = _check_keys(e["valueFrom"], {"secretKeyRef"},
                                     f"{where}: env {e['name']} valueFrom")
                    _check_keys(vf["secretKeyRef"], {"name", "key", "optional"},
                                f"{where}: env {e['name']} secretKeyRef")
            for vm in c.get("volumeMounts") or []:
                _check_keys(vm, {"name", "mountPath", "readOnly"}, f"{where}: volumeMount")
            res = c.get("resources") or {}
            _check_keys(res, {"limits"}, f"{where}: resources", "resources")
            _check_keys(res.get("limits") or {}, {"memory", "nvidia.com/gpu"},
                        f"{where}: resources.limits", "resources.limits")
            sc = _check_keys(c.get("securityContext") or {}, _CSC_KEYS,
                             f"{where}: securityContext")
            _check_keys(sc.get("capabilities") or {}, {"drop"}, f"{where}: capabilities")

    # -- accessors
    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.doc["spec"])

    @property
    def name_prefix(self) -> str:
        meta = self.doc.get("metadata") or {}
        return str(meta.get("name") or meta.get("generateName") or "workflow-")

    def parameters(self) -> dict[str, str]:
        """Declared workflow parameters and their default values."""
        return {k: str(p.get("value", p.get("default", "")))
                for k, p in _params_list(self.spec.get("arguments"), self.path, _ENUM).items()}

    def enums(self) -> dict[str, list[str]]:
        """The allowed values of the workflow parameters that declare an ``enum``."""
        return {k: [str(v) for v in p["enum"]]
                for k, p in _params_list(self.spec.get("arguments"), self.path, _ENUM).items()
                if p.get("enum") is not None}

    def volumes(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for v in self.spec.get("volumes") or []:
            _check_keys(v, {"name", "emptyDir", "persistentVolumeClaim"},
                        f"{self.path}: volume {v.get('name')}")
            if "emptyDir" in v:
                _check_keys(v["emptyDir"] or {}, set(), f"{self.path}: volume {v['name']} emptyDir",
                            "volume.emptyDir")
                out[v["name"]] = {"kind": "emptyDir"}
            elif "persistentVolumeClaim" in v:
                pvc = _check_keys(v["persistentVolumeClaim"], {"claimName", "readOnly"},
                                  f"{self.path}: volume {v['name']}")
                out[v["name"]] = {"kind": "persistentVolumeClaim",
                                  "claim": pvc["claimName"],
                                  "read_only": bool(pvc.get("readOnly", False))}
            else:
                raise UnsupportedConstruct(f"{self.path}: volume {v.get('name')}: only "
                                           "emptyDir and persistentVolumeClaim are supported")
        return out


def _deps_of(task: dict[str, Any]) -> list[str]:
    """The tasks ``task`` waits on, read as Argo reads them (GetTaskDependencies)."""
    return sorted(depends_names(task))


def _toposort(tasks: Sequence[dict[str, Any]], where: str) -> list[str]:
    deps = {t["name"]: _deps_of(t) for t in tasks}
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, path: tuple[str, ...]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            raise ConfigError(f"{where}: dependency cycle {' -> '.join((*path, n))}")
        state[n] = 1
        for d in deps[n]:
            visit(d, (*path, n))
        state[n] = 2
        order.append(n)

    for t in tasks:
        visit(t["name"], ())
    return order


_BARE = ("Succeeded", "Skipped", "Daemoned")
"""What a bare task name (or a ``dependencies`` entry) accepts: expandDependency,
workflow/common/ancestry.go:123-136 (no ``continueOn`` here)."""


def _depends_ok(task: dict[str, Any], tasks: Mapping[str, _Task]) -> bool:
    """Whether a task whose dependencies are all complete runs: evaluateDependsLogic
    (workflow/controller/dag.go:965-1023). ``Errored`` is a node in phase ``Error``;
    ``Daemoned`` is never true here (no daemon templates); ``AnySucceeded`` and
    ``AllFailed`` look at a fan-out task's children (dag.go:986-1003)."""
    if "depends" not in task:
        return all(any(_result(tasks[d], r) for r in _BARE) for d in _deps_of(task))

    def value(node: Any) -> bool:
        op = node[0]
        if op == "name":
            dep = tasks[node[1]]
            return any(_result(dep, r) for r in _BARE) if node[2] is None \
                else _result(dep, node[2])
        if op == "not":
            return not value(node[1])
        if op == "and":
            return value(node[1]) and value(node[2])
        return value(node[1]) or value(node[2])

    return value(parse_depends(str(task["depends"])))


def _result(task: _Task, result: str) -> bool:
    phase = task.phase
    if result == "AnySucceeded":
        return any(c.phase == "Succeeded" for c in task.children)
    if result == "AllFailed":
        return bool(task.children) and all(c.phase == "Failed" for c in task.children)
    if result == "Daemoned":
        return False
    return phase == ("Error" if result == "Errored" else result)


# ------------------------------------------------------------------ execution state


@dataclass
class _PodNode:
    path: str
    template: str
    inputs: dict[str, str]
    chain: str
    phase: str = "Pending"
    attempts: list[PodResult] = field(default_factory=list)
    running: bool = False
    not_before: float = 0.0
    first_start: float | None = None
    key: str = ""
    memo: bool = False
    earlier: dict[str, Any] = field(default_factory=dict)
    pod: Pod | None = None

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed", "Error", "Skipped", "Omitted")


@dataclass
class _Task:
    spec: dict[str, Any]
    phase: str = "Pending"
    children: list[_PodNode | _DagNode] = field(default_factory=list)
    expanded: bool = False
    chain: str = ""


@dataclass
class _DagNode:
    path: str
    template: str
    inputs: dict[str, str]
    chain: str
    parallelism: int | None
    fail_fast: bool
    tasks: dict[str, _Task] = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)
    """The tasks whose phases decide the DAG's: ``dag.target``, or the leaves."""
    wanted: set[str] = field(default_factory=set)
    """The tasks that run at all: the targets and every task they wait on."""
    phase: str = "Running"
    started: bool = False

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed", "Error", "Skipped", "Omitted")


_Node = Union[_PodNode, _DagNode]
_FINAL = ("Succeeded", "Failed", "Error", "Skipped", "Omitted")


def _h(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


@dataclass
class WorkflowResult:
    """How an execution ended, every pod node's outcome and the exit handler's."""

    name: str
    phase: str
    seconds: float
    nodes: dict[str, dict[str, Any]]
    failures: list[dict[str, Any]]
    exit_handler: dict[str, Any] | None = None


class Executor:
    """Executes one workflow with ``runner``; ``dry_run()`` resolves every pod instead."""

    def __init__(self, workflow: Workflow, params: Mapping[str, ParamValue] | None = None, *,
                 runner: Runner | None = None, workers: int = 2, name: str | None = None,
                 stop_on_failure: bool = False, memo: Memo | None = None,
                 backoff_scale: float = 1.0,
                 on_event: Callable[[str, dict[str, Any]], None] | None = None,
                 rank: Callable[[Pod], int] | None = None,
                 pod_identity: Callable[[Pod], str] | None = None) -> None:
        self.wf = workflow
        declared = workflow.parameters()
        given = dict(params or {})
        if unknown := sorted(set(given) - set(declared)):
            raise ConfigError(f"{workflow.path}: no workflow parameter {', '.join(unknown)} "
                              "(argo submit -p refuses it too)")
        for key, allowed in workflow.enums().items():
            value = given.get(key)
            if isinstance(value, str) and value not in allowed:
                raise ConfigError(f"{workflow.path}: parameter {key}={value!r} is not one of "
                                  f"{allowed} (argo submit refuses it too)")
        self.params: dict[str, ParamValue] = {**declared, **given}
        self.runner = runner
        self.workers = max(1, workers)
        suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        self.name: str = name or f"{workflow.name_prefix}{suffix}"
        self.stop_on_failure = stop_on_failure
        self.memo = memo
        self.backoff_scale = backoff_scale
        self.on_event = on_event or (lambda kind, data: None)
        self.rank = rank or (lambda pod: 0)
        # what a pod's memo key (and through the chain every later pod's) holds of it; a
        # rehearsal puts its image's build inputs in place of a rebuilt image's new id
        self.pod_identity: Callable[[Pod], str] = pod_identity or Pod.identity
        self.cancel = threading.Event()
        self.volumes = workflow.volumes()
        spec = workflow.spec
        self.pod_security = spec.get("securityContext") or {}
        self.global_parallelism = spec.get("parallelism")
        self.deadline = float(spec["activeDeadlineSeconds"]) \
            if "activeDeadlineSeconds" in spec else None
        self._futures: dict[Future[PodResult], _PodNode] = {}
        self._root: _Node | None = None
        self._handler: _Node | None = None

    # -- scopes
    def _scope(self, inputs: Mapping[str, str], extra: Mapping[str, ParamValue] | None = None
               ) -> dict[str, ParamValue]:
        scope: dict[str, ParamValue] = {f"workflow.parameters.{k}": v
                                        for k, v in self.params.items()}
        scope["workflow.name"] = self.name
        scope.update({f"inputs.parameters.{k}": v for k, v in inputs.items()})
        scope.update(extra or {})
        return scope

    def _inputs(self, template: str, given: Mapping[str, str]) -> dict[str, str]:
        t = self.wf.templates[template]
        declared = _params_list(t.get("inputs"), template)
        if unknown := sorted(set(given) - set(declared)):
            raise ConfigError(f"template {template}: no input parameter {', '.join(unknown)}")
        out = {}
        for name, p in declared.items():
            if name in given:
                out[name] = given[name]
            elif "value" in p or "default" in p:
                out[name] = str(p.get("value", p.get("default")))
            else:
                raise ConfigError(f"template {template}: input parameter {name!r} not given")
        return out

    # -- pod resolution
    def resolve_pod(self, path: str, template: str, inputs: Mapping[str, str],
                    extra: Mapping[str, ParamValue] | None = None) -> Pod:
        """The pod a container template invocation runs, every tag substituted."""
        t = self.wf.templates[template]
        where = f"template {template}"
        scope = self._scope(inputs, extra)
        c = _subst_tree(t["container"], scope, where)
        env: list[tuple[str, str | SecretRef]] = []
        for e in c.get("env") or []:
            if "valueFrom" in e:
                ref = e["valueFrom"]["secretKeyRef"]
                env.append((e["name"], SecretRef(ref["name"], ref["key"],
                                                 bool(ref.get("optional", False)))))
            else:
                env.append((e["name"], str(e.get("value", ""))))
        mounts = []
        for vm in c.get("volumeMounts") or []:
            vol = self.volumes.get(vm["name"])
            if vol is None:
                raise ConfigError(f"{where}: volumeMount of unknown volume {vm['name']!r}")
            ro = bool(vm.get("readOnly", False)) or bool(vol.get("read_only", False))
            mounts.append(VolumeMount(vm["name"], vm["mountPath"], ro, vol["kind"],
                                      vol.get("claim", "")))
        user, group = self._security(c.get("securityContext") or {}, where)
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        gpu = int(parse_quantity(limits.get("nvidia.com/gpu", requests.get("nvidia.com/gpu",
                                                                          0))))
        deadline = t.get("activeDeadlineSeconds")
        return Pod(
            node=path, template=template, image=str(c["image"]),
            argv=tuple(str(a) for a in [*c["command"], *(c.get("args") or [])]),
            env=tuple(env), mounts=tuple(mounts), user=user, group=group,
            memory_limit=int(parse_quantity(limits["memory"])) if "memory" in limits else None,
            memory_request=(int(parse_quantity(requests["memory"]))
                            if "memory" in requests else None),
            cpu_request=parse_quantity(requests["cpu"]) if "cpu" in requests else None,
            gpu=gpu,
            deadline=float(substitute(str(deadline), scope, where)) if deadline else None,
            retry=self._retry(t, scope, where),
            labels=tuple(sorted(((t.get("metadata") or {}).get("labels") or {}).items())),
        )

    def _security(self, sc: dict[str, Any], where: str) -> tuple[int, int]:
        """Check the pod policy is one the local engine enforces; returns uid, gid."""
        pod = self.pod_security
        user = int(sc.get("runAsUser", pod.get("runAsUser", POD_UID)))
        group = int(sc.get("runAsGroup", pod.get("runAsGroup", user)))
        problems = []
        if (user, group) != (POD_UID, POD_UID):
            problems.append(f"runs as {user}:{group} (the local engine runs every pod as "
                            f"{POD_UID}:{POD_UID})")
        if not (sc.get("runAsNonRoot") or pod.get("runAsNonRoot")):
            problems.append("runAsNonRoot is not set")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append("readOnlyRootFilesystem is not true (the local engine mounts "
                            "every root read-only)")
        if sc.get("allowPrivilegeEscalation", True) is not False:
            problems.append("allowPrivilegeEscalation is not false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            problems.append("capabilities.drop lacks ALL")
        if problems:
            raise UnsupportedConstruct(f"{where}: securityContext: {'; '.join(problems)}")
        return user, group

    def _retry(self, t: dict[str, Any], scope: Mapping[str, ParamValue], where: str
               ) -> Retry | None:
        rs = t.get("retryStrategy")
        if rs is None:
            return None
        backoff = rs.get("backoff") or {}
        return Retry(
            limit=int(substitute(str(rs.get("limit", 0)), scope, where)),
            policy=str(rs.get("retryPolicy", "OnFailure")),
            expression=str(rs.get("expression", "")),
            backoff=parse_duration(backoff["duration"]) if "duration" in backoff else 0.0,
            factor=float(parse_quantity(backoff.get("factor", 1))),
            max_duration=(parse_duration(backoff["maxDuration"])
                          if "maxDuration" in backoff else None))

    def _items(self, task: dict[str, Any], scope: Mapping[str, ParamValue]) -> list[str] | None:
        seq = task.get("withSequence")
        if seq is None:
            return None
        where = f"task {task['name']} withSequence"
        values = {k: int(substitute(str(v), scope, where)) for k, v in seq.items()}
        if "count" in values:
            if "start" in values or "end" in values:
                raise UnsupportedConstruct(f"{where}: count with start/end")
            return [str(i) for i in range(values["count"])]
        start, end = values.get("start", 0), values.get("end", 0)
        step = 1 if end >= start else -1
        return [str(i) for i in range(start, end + step, step)]

    def _args(self, task: dict[str, Any], scope: Mapping[str, ParamValue]) -> dict[str, str]:
        where = f"task {task['name']} arguments"
        return {k: substitute(str(p.get("value", "")), scope, where)
                for k, p in _params_list(task.get("arguments"), where).items()}

    # -- dry run
    def dry_run(self) -> list[Pod]:
        """Every pod of the workflow, resolved in execution order (DAG order within each
        DAG, every fan-out item, then the exit handler), without running anything."""
        pods: list[Pod] = []
        self._dry(self.wf.spec["entrypoint"], {}, self.name, pods, 0)
        on_exit = self.wf.spec.get("onExit")
        if on_exit:
            extra = {"workflow.status": "Succeeded", "workflow.duration": "0",
                     "workflow.failures": json.dumps("null")}
            self._dry(on_exit, {}, f"{self.name}.onExit", pods, 0, extra)
        return pods

    def _dry(self, template: str, given: Mapping[str, str], path: str, out: list[Pod],
             depth: int, extra: Mapping[str, ParamValue] | None = None) -> None:
        if depth > 20:
            raise ConfigError(f"{path}: templates nest deeper than 20 levels")
        inputs = self._inputs(template, given)
        t = self.wf.templates[template]
        if "container" in t:
            out.append(self.resolve_pod(path, template, inputs, extra))
            return
        tasks = {x["name"]: x for x in t["dag"].get("tasks") or []}
        for name in _toposort(list(tasks.values()), template):
            task = tasks[name]
            scope = self._scope(inputs, extra)
            items = self._items(task, scope)
            for item in (items if items is not None else [None]):
                item_scope = dict(scope)
                if item is not None:
                    item_scope["item"] = item
                args = self._args(task, item_scope)
                child = f"{path}.{name}" + (f"({item})" if item is not None else "")
                self._dry(task["template"], args, child, out, depth + 1, extra)

    # -- execution
    def run(self) -> WorkflowResult:
        """Execute the workflow; returns when the DAG and the exit handler are done."""
        if self.runner is None:
            raise ConfigError("Executor.run needs a runner")
        start = time.monotonic()
        root = self._node(self.wf.spec["entrypoint"], {}, self.name, _h(self.wf.path))
        self._root = root
        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="pod")
        try:
            self._loop(root, pool, start)
            phase = root.phase if root.phase in _FINAL else "Error"
            failures = self._failures(root)
            exit_info = None
            on_exit = self.wf.spec.get("onExit")
            if on_exit:
                self.cancel.clear()  # Argo runs the exit handler after a deadline too
                extra = {"workflow.status": phase,
                         "workflow.duration": f"{time.monotonic() - start:.3f}",
                         "workflow.failures": json.dumps(json.dumps(failures or None))}
                handler = self._node(on_exit, {}, f"{self.name}.onExit", _h(root.chain, "exit"),
                                     extra)
                self._handler = handler
                self._loop(handler, pool, time.monotonic(), extra)
                exit_info = self._node_info(handler)
                if handler.phase != "Succeeded" and phase == "Succeeded":
                    phase = "Failed"
        except BaseException:
            self.cancel.set()  # running pods are stopped by their runner
            raise
        finally:
            pool.shutdown(wait=True)
        result = self.snapshot(phase, time.monotonic() - start, exit_info)
        self.on_event("workflow_done", {"name": self.name, "phase": phase})
        return result

    def snapshot(self, phase: str, seconds: float,
                 exit_info: dict[str, Any] | None = None) -> WorkflowResult:
        """Every pod node's outcome so far (done, skipped, stopped or never started) and
        the failures, as a result of ``phase``: what :meth:`run` returns at its end, and
        what a run stopped by a signal had done (the rehearsal records it)."""
        nodes: dict[str, dict[str, Any]] = {}
        failures: list[dict[str, Any]] = []
        if self._root is not None:
            self._collect(self._root, nodes)
            failures = self._failures(self._root)
        if self._handler is not None:
            failures += self._failures(self._handler)
        return WorkflowResult(self.name, phase, seconds, nodes, failures, exit_info)

    def _node(self, template: str, given: Mapping[str, str], path: str, chain: str,
              extra: Mapping[str, ParamValue] | None = None) -> _Node:
        inputs = self._inputs(template, given)
        t = self.wf.templates[template]
        if "container" in t:
            return _PodNode(path, template, inputs, chain)
        dag = t["dag"]
        par = t.get("parallelism")
        node = _DagNode(path, template, inputs, chain, int(par) if par is not None else None,
                        bool(dag.get("failFast", True)))
        for task in dag.get("tasks") or []:
            node.tasks[task["name"]] = _Task(task)
        deps = {n: _deps_of(t.spec) for n, t in node.tasks.items()}
        if dag.get("target"):
            node.targets = str(dag["target"]).split()
        else:  # findLeafTaskNames, workflow/controller/dag.go:874-896
            waited = {d for ds in deps.values() for d in ds}
            node.targets = sorted(n for n in node.tasks if n not in waited)
        stack = list(node.targets)
        while stack:
            n = stack.pop()
            if n not in node.wanted:
                node.wanted.add(n)
                stack += deps[n]
        return node

    def _loop(self, root: _Node, pool: ThreadPoolExecutor, start: float,
              extra: Mapping[str, ParamValue] | None = None) -> None:
        while True:
            if self.cancel.is_set() and not self._futures:
                self._cancel_pending(root)
            self._advance(root, extra)
            if root.done:
                return
            if self.deadline is not None and time.monotonic() - start > self.deadline:
                self.cancel.set()
            candidates = sorted(self._pending(root), key=lambda pn: self._rank(pn, extra))
            now = time.monotonic()
            for pn in candidates:
                if len(self._futures) >= self.workers or self.cancel.is_set():
                    break
                if self.global_parallelism and len(self._futures) >= int(
                        self.global_parallelism):
                    break
                if pn.not_before > now or not self._room(root, pn):
                    continue
                if self._skip_by_memo(pn, extra):
                    continue
                pn.running = True
                pn.phase = "Running"
                pn.first_start = pn.first_start or time.time()
                fut = pool.submit(self._attempt, pn, extra)
                self._futures[fut] = pn
            if not self._futures:
                waiting = [pn.not_before for pn in self._pending(root)]
                if not waiting:  # pods skipped by the memo may have readied new tasks
                    self._advance(root, extra)
                    if root.done:
                        return
                    if next(self._pending(root), None) is not None:
                        continue
                    raise ConfigError(f"{root.path}: no runnable pod and not done (a bug)")
                time.sleep(max(0.0, min(min(waiting) - time.monotonic(), 5.0)))
                continue
            done, _ = wait(list(self._futures), timeout=5.0, return_when=FIRST_COMPLETED)
            for fut in done:
                pn = self._futures.pop(fut)
                self._finish(pn, fut)

    def _rank(self, pn: _PodNode, extra: Mapping[str, ParamValue] | None) -> int:
        if pn.pod is None:
            try:
                pn.pod = self.resolve_pod(pn.path, pn.template, pn.inputs, extra)
            except ConfigError:
                return 0
        return self.rank(pn.pod)

    def pending_images(self) -> set[str]:
        """Images of every pod that has yet to finish: running, pending, in tasks not
        expanded yet, and the exit handler (call it from ``on_event``)."""
        out: set[str] = set()
        if self._root is not None:
            self._images_in(self._root, out)
        on_exit = self.wf.spec.get("onExit")
        if on_exit and (self._handler is None or not self._handler.done):
            extra = {"workflow.status": "Running", "workflow.duration": "0",
                     "workflow.failures": json.dumps("null")}
            pods: list[Pod] = []
            self._dry(on_exit, {}, f"{self.name}.onExit", pods, 0, extra)
            out.update(p.image for p in pods)
        return out

    def _images_in(self, node: _Node, out: set[str]) -> None:
        if isinstance(node, _PodNode):
            if not node.done:
                out.add(self.resolve_pod(node.path, node.template, node.inputs).image)
            return
        for name, task in node.tasks.items():
            if task.expanded:
                for child in task.children:
                    self._images_in(child, out)
            elif task.phase not in _FINAL:
                scope = self._scope(node.inputs)
                items = self._items(task.spec, scope)
                for item in (items if items is not None else [None]):
                    item_scope = dict(scope)
                    if item is not None:
                        item_scope["item"] = item
                    pods: list[Pod] = []
                    self._dry(task.spec["template"], self._args(task.spec, item_scope),
                              f"{node.path}.{name}", pods, 1)
                    out.update(p.image for p in pods)

    def _skip_by_memo(self, pn: _PodNode, extra: Mapping[str, ParamValue] | None) -> bool:
        if self.memo is None:
            return False
        try:
            pod = self.resolve_pod(pn.path, pn.template, pn.inputs, extra)
        except ConfigError:
            return False
        key = _h(pn.chain, self.pod_identity(pod))
        if self.memo.done(key, pod):
            pn.pod, pn.key, pn.memo, pn.phase = pod, key, True, "Succeeded"
            pn.earlier = self.memo.entry(key, pod)
            self.on_event("pod_skipped", {"node": pn.path, "pod": pod.describe()})
            return True
        return False

    def _attempt(self, pn: _PodNode, extra: Mapping[str, ParamValue] | None) -> PodResult:
        assert self.runner is not None
        try:
            pod = self.resolve_pod(pn.path, pn.template, pn.inputs, extra)
            self.runner.prepare(pod)
            pod = self.resolve_pod(pn.path, pn.template, pn.inputs, extra)
        except ConfigError as exc:
            return PodResult("Error", None, f"cannot start: {exc}", 0.0, {"no_retry": True})
        pn.pod = pod
        pn.key = _h(pn.chain, self.pod_identity(pod))
        attempt = len(pn.attempts)
        self.on_event("pod_start", {"node": pn.path, "attempt": attempt, "image": pod.image})
        result = self.runner.run(pod, attempt, self.cancel)
        return result

    def _finish(self, pn: _PodNode, fut: Future[PodResult]) -> None:
        pn.running = False
        try:
            result = fut.result()
        except Exception as exc:  # a runner bug must not hang the workflow
            result = PodResult("Error", None, f"runner failed: {exc!r}", 0.0,
                               {"no_retry": True})
        pn.attempts.append(result)
        retry: float | None = None
        if result.phase == "Succeeded":
            pn.phase = "Succeeded"
            if self.memo is not None and pn.pod is not None:
                self.memo.record(pn.key, pn.pod, result)
        else:
            delay = self._retry_delay(pn, result)
            if delay is None or self.cancel.is_set():
                pn.phase = result.phase
            else:
                retry = delay * self.backoff_scale
                pn.phase = "Pending"
                pn.not_before = time.monotonic() + retry
        self.on_event("pod_done", {"node": pn.path, "attempt": len(pn.attempts) - 1,
                                   "phase": result.phase, "exit_code": result.exit_code,
                                   "message": result.message[-2000:],
                                   "seconds": result.seconds, "info": result.info})
        if retry is not None:
            self.on_event("pod_retry", {"node": pn.path, "in_seconds": retry})

    def _retry_delay(self, pn: _PodNode, result: PodResult) -> float | None:
        """Seconds until the next attempt, or ``None`` when the pod is not retried."""
        retry = pn.pod.retry if pn.pod is not None else None
        if retry is None or result.info.get("no_retry"):
            return None
        retries_done = len(pn.attempts) - 1
        if retries_done >= retry.limit:
            return None
        allowed = {"Always": ("Failed", "Error"), "OnFailure": ("Failed",),
                   "OnError": ("Error",)}[retry.policy]
        if result.phase not in allowed:
            return None
        if retry.expression:
            scope = {"lastRetry.exitCode": "" if result.exit_code is None
                     else str(result.exit_code),
                     "lastRetry.status": result.phase,
                     "lastRetry.duration": f"{result.seconds:.0f}",
                     "lastRetry.message": result.message[-500:]}
            if not truth(evaluate(retry.expression, lambda n: _scoped(scope, n))):
                return None
        if retry.max_duration is not None and pn.first_start is not None and \
                time.time() - pn.first_start > retry.max_duration:
            return None
        return retry.backoff * retry.factor ** retries_done

    # -- tree walking
    def _pending(self, node: _Node) -> Iterator[_PodNode]:
        if isinstance(node, _PodNode):
            if node.phase == "Pending" and not node.running:
                yield node
            return
        for task in node.tasks.values():
            for child in task.children:
                yield from self._pending(child)

    def _running_under(self, node: _Node) -> int:
        if isinstance(node, _PodNode):
            return int(node.running)
        return sum(self._running_under(c) for t in node.tasks.values() for c in t.children)

    def _room(self, root: _Node, pn: _PodNode) -> bool:
        """Whether every DAG above ``pn`` has parallelism to spare."""
        for dag in self._ancestors(root, pn):
            if dag.parallelism is not None and self._running_under(dag) >= dag.parallelism:
                return False
        return True

    def _ancestors(self, node: _Node, target: _PodNode) -> list[_DagNode]:
        if node is target:
            return []
        if isinstance(node, _PodNode):
            return []
        for task in node.tasks.values():
            for child in task.children:
                if child is target or (isinstance(child, _DagNode) and
                                       self._contains(child, target)):
                    return [node, *self._ancestors(child, target)]
        return []

    def _contains(self, node: _Node, target: _PodNode) -> bool:
        if node is target:
            return True
        if isinstance(node, _PodNode):
            return False
        return any(self._contains(c, target) for t in node.tasks.values() for c in t.children)

    def _advance(self, node: _Node, extra: Mapping[str, ParamValue] | None) -> None:
        """Expand ready tasks, omit impossible ones and settle finished nodes' phases.

        As Argo's executeDAG (workflow/controller/dag.go:266-437): every task whose
        dependencies have finished is evaluated and runs or is Omitted, whatever failed
        elsewhere — Argo's ``failFast`` (on by default) does not stop scheduling while any
        node of the DAG still runs (dag.go:137-246 returns Running first;
        argoproj/argo-workflows#10312). ``stop_on_failure`` is stricter than Argo: after
        the first failure in a DAG, no new task of it starts."""
        if isinstance(node, _PodNode) or node.done:
            return
        failed = False
        for task in node.tasks.values():
            for child in task.children:
                self._advance(child, extra)
            if task.expanded and task.phase not in _FINAL:
                task.phase = self._group_phase(task)
            failed |= task.phase in ("Failed", "Error")
        for name, task in node.tasks.items():
            if task.expanded or task.phase in _FINAL or name not in node.wanted:
                continue
            if any(node.tasks[d].phase not in _FINAL for d in _deps_of(task.spec)):
                continue
            if (failed and self.stop_on_failure) or self.cancel.is_set():
                task.phase = "Omitted"
                continue
            if not _depends_ok(task.spec, node.tasks):
                task.phase = "Omitted"
                continue
            self._expand(node, name, task, extra)
        phase = self._assess(node)
        if phase != "Running":
            node.phase = phase

    def _assess(self, node: _DagNode) -> str:
        """The DAG's phase as Argo's assessDAGPhase (workflow/controller/dag.go:137-246):
        Running while any task it started runs; then each target task's branch phase —
        its own phase if it ran (Succeeded, Failed, Error), else (Skipped, Omitted) the
        phases reaching it from the tasks it waits on, a failure preferred (a task with no
        dependencies starts from Succeeded); Failed or Error when a target's branch is,
        else Succeeded. With ``failFast`` the first failed target decides at once; without
        it every target must have been reached. A failure that every path "handles" (a
        task that ran on its ``.Failed``) therefore leaves the DAG Succeeded."""
        wanted = [t for n, t in node.tasks.items() if n in node.wanted]
        if any(t.phase not in _FINAL and t.expanded for t in wanted):
            return "Running"
        branch: dict[str, str] = {}

        def deduce(name: str) -> str:
            if name not in branch:
                task = node.tasks[name]
                if task.phase in ("Succeeded", "Failed", "Error"):
                    branch[name] = task.phase
                elif task.phase in ("Skipped", "Omitted"):
                    parents = [deduce(d) for d in _deps_of(task.spec)] or ["Succeeded"]
                    bad = [p for p in parents if p in ("Failed", "Error")]
                    branch[name] = bad[0] if bad else "Succeeded"
                else:
                    branch[name] = ""  # not reached yet
            return branch[name]

        result = "Succeeded"
        for target in node.targets:
            phase = deduce(target)
            if phase == "":
                result = "Running"
                if not node.fail_fast:
                    break
            elif phase in ("Failed", "Error"):
                result = phase
                if node.fail_fast:
                    break
        return result

    def _cancel_pending(self, node: _Node) -> None:
        if isinstance(node, _PodNode):
            if node.phase == "Pending" and not node.running:
                node.phase = "Failed"
                node.attempts.append(PodResult("Failed", None, "cancelled"))
            return
        for task in node.tasks.values():
            for child in task.children:
                self._cancel_pending(child)

    def _group_phase(self, task: _Task) -> str:
        phases = [c.phase for c in task.children]
        if not all(p in _FINAL for p in phases):
            return "Running"
        if not phases:
            return "Skipped"
        if "Failed" in phases:
            return "Failed"
        if "Error" in phases:
            return "Error"
        return "Succeeded"

    def _expand(self, node: _DagNode, name: str, task: _Task,
                extra: Mapping[str, ParamValue] | None) -> None:
        spec = task.spec
        dep_keys = sorted(self._result_key(node.tasks[d]) for d in _deps_of(spec))
        task.chain = _h(node.chain, name, *dep_keys)
        scope = self._scope(node.inputs, extra)
        items = self._items(spec, scope)
        for item in (items if items is not None else [None]):
            item_scope = dict(scope)
            if item is not None:
                item_scope["item"] = item
            args = self._args(spec, item_scope)
            path = f"{node.path}.{name}" + (f"({item})" if item is not None else "")
            child = self._node(spec["template"], args, path, _h(task.chain, item or ""), extra)
            task.children.append(child)
        task.expanded = True
        task.phase = "Running" if task.children else "Skipped"
        for child in task.children:
            self._advance(child, extra)

    def _result_key(self, task: _Task) -> str:
        keys = []
        for child in task.children:
            if isinstance(child, _PodNode):
                keys.append(child.key or child.phase)
            else:
                keys.append(_h(*(self._result_key(t) for t in child.tasks.values())))
        return _h(task.phase, *keys)

    def _failures(self, node: _Node) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if isinstance(node, _PodNode):
            if node.phase in ("Failed", "Error"):
                last = node.attempts[-1] if node.attempts else PodResult(node.phase)
                out.append({"displayName": node.path.rsplit(".", 1)[-1], "message":
                            last.message[-500:], "templateName": node.template,
                            "phase": node.phase, "podName": node.path,
                            "exitCode": last.exit_code})
            return out
        for task in node.tasks.values():
            for child in task.children:
                out += self._failures(child)
        return out

    def _node_info(self, node: _Node) -> dict[str, Any]:
        out: dict[str, dict[str, Any]] = {}
        self._collect(node, out)
        return {"phase": node.phase, "nodes": out}

    def _collect(self, node: _Node, out: dict[str, dict[str, Any]]) -> None:
        if isinstance(node, _PodNode):
            out[node.path] = {
                "phase": node.phase, "template": node.template, "memo": node.memo,
                **({"earlier": node.earlier} if node.memo else {}),
                "image": node.pod.image if node.pod else None,
                "gpu": node.pod.gpu if node.pod else 0,
                "attempts": [{"phase": a.phase, "exit_code": a.exit_code,
                              "message": a.message[-1000:], "seconds": round(a.seconds, 3),
                              **a.info} for a in node.attempts]}
            return
        for name, task in node.tasks.items():
            if not task.children:
                out[f"{node.path}.{name}"] = {"phase": task.phase, "template":
                                              task.spec["template"], "attempts": []}
            for child in task.children:
                self._collect(child, out)


def _scoped(scope: Mapping[str, str], name: str) -> str:
    if name not in scope:
        raise UnsupportedConstruct(f"retry expression: unknown variable {name!r} "
                                   f"(known: {', '.join(sorted(scope))})")
    return scope[name]
