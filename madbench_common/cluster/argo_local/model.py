"""The local executor's workflow model: a parsed, checked workflow (:class:`Workflow`) and
the values that pass between it, the executor and a :class:`Runner` (pods, attempts'
results, retries, mounts, secret references).

Loading refuses first what Argo refuses
(:func:`madbench_common.pipeline.argo_rules.check_workflow`), then every field this
executor does not honour unless it is cluster-only (:data:`CLUSTER_ONLY`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from madbench_common.cluster.argo_local.expressions import deps_of, toposort
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.argo_expr import UnsupportedConstruct
from madbench_common.pipeline.argo_rules import ARGO_RELEASE, check_workflow

__all__ = ["CLUSTER_ONLY", "POD_UID", "Memo", "Pod", "PodResult", "Retry", "Runner",
           "SecretRef", "VolumeMount", "Workflow", "WorkflowResult", "params_list"]


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
"""The one user the local engine runs pods as (madbench_common.imagefactory.containers.USER)."""


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


def params_list(obj: Any, where: str, extra: frozenset[str] = frozenset()) -> dict[str, Any]:
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
        params_list(spec.get("arguments"), f"{self.path}: spec.arguments", _ENUM)

    def _check_template(self, name: str, t: dict[str, Any]) -> None:
        where = f"{self.path}: template {name}"
        _check_keys(t, _TEMPLATE_KEYS, where, "template")
        kinds = [k for k in ("dag", "container") if k in t]
        if len(kinds) != 1:
            raise UnsupportedConstruct(f"{where}: needs exactly one of dag, container "
                                       "(steps, script, resource, … are not supported)")
        params_list(t.get("inputs"), f"{where}: inputs")
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
                params_list(task.get("arguments"), f"{where}: task {task['name']} arguments")
                _check_keys(task.get("arguments") or {}, {"parameters"},
                            f"{where}: task {task['name']} arguments")
            for task in dag.get("tasks") or []:
                for dep in deps_of(task):
                    if dep not in names:
                        raise ConfigError(f"{where}: task {task['name']} depends on unknown "
                                          f"task {dep!r}")
            toposort(dag.get("tasks") or [], where)
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
                for k, p in params_list(self.spec.get("arguments"), self.path, _ENUM).items()}

    def enums(self) -> dict[str, list[str]]:
        """The allowed values of the workflow parameters that declare an ``enum``."""
        return {k: [str(v) for v in p["enum"]]
                for k, p in params_list(self.spec.get("arguments"), self.path, _ENUM).items()
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


@dataclass
class WorkflowResult:
    """How an execution ended, every pod node's outcome and the exit handler's."""

    name: str
    phase: str
    seconds: float
    nodes: dict[str, dict[str, Any]]
    failures: list[dict[str, Any]]
    exit_handler: dict[str, Any] | None = None
