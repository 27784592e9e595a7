"""Pod resolution: a template invocation (its inputs, the workflow's parameters, a fan-out
item) becomes the :class:`~madbench_common.cluster.argo_local.model.Pod` that a Kubernetes
pod would run, every tag substituted and the security context checked against what the
local engine enforces.

:class:`PodResolver` is the part of the executor that runs nothing: its
:meth:`~PodResolver.dry_run` resolves every pod of a workflow (``madbench lint``, the
rehearsal's dry run), and :class:`~madbench_common.cluster.argo_local.executor.Executor`
builds on it.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Mapping
from typing import Any

from madbench_common.cluster.argo_local.expressions import (
    ParamValue,
    parse_duration,
    parse_quantity,
    subst_tree,
    substitute,
    toposort,
)
from madbench_common.cluster.argo_local.model import (
    POD_UID,
    Pod,
    Retry,
    SecretRef,
    VolumeMount,
    Workflow,
    params_list,
)
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.argo_expr import UnsupportedConstruct

__all__ = ["PodResolver"]


class PodResolver:
    """Resolves one workflow's pods: the workflow parameters (``params`` overriding the
    declared values, as ``argo submit -p``), the scopes of tags, template inputs and task
    arguments, fan-out items; :meth:`dry_run` resolves every pod in execution order."""

    def __init__(self, workflow: Workflow, params: Mapping[str, ParamValue] | None = None,
                 name: str | None = None) -> None:
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
        suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        self.name: str = name or f"{workflow.name_prefix}{suffix}"
        self.volumes = workflow.volumes()
        self.pod_security = workflow.spec.get("securityContext") or {}

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
        declared = params_list(t.get("inputs"), template)
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
        c = subst_tree(t["container"], scope, where)
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
                for k, p in params_list(task.get("arguments"), where).items()}

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
        for name in toposort(list(tasks.values()), template):
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
