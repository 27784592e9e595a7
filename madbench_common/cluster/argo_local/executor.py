"""Running a workflow: the local executor's scheduler.

:class:`Executor` expands a DAG's tasks as their dependencies finish, runs each pod with a
:class:`~madbench_common.cluster.argo_local.model.Runner` (retries, backoff, deadlines,
parallelism, a memo that skips pods a resumed execution finished before), settles task
and DAG phases as Argo's controller does (``depends``, ``failFast``, targets; see
:meth:`Executor._advance` and :meth:`Executor._assess`) and runs the exit handler.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Union

from madbench_common.cluster.argo_local.expressions import ParamValue, deps_of
from madbench_common.cluster.argo_local.model import (
    Memo,
    Pod,
    PodResult,
    Runner,
    Workflow,
    WorkflowResult,
)
from madbench_common.cluster.argo_local.resolve import PodResolver
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.argo_expr import (
    UnsupportedConstruct,
    evaluate,
    parse_depends,
    truth,
)

__all__ = ["Executor"]


_BARE = ("Succeeded", "Skipped", "Daemoned")
"""What a bare task name (or a ``dependencies`` entry) accepts: expandDependency,
workflow/common/ancestry.go:123-136 (no ``continueOn`` here)."""


def _depends_ok(task: dict[str, Any], tasks: Mapping[str, _Task]) -> bool:
    """Whether a task whose dependencies are all complete runs: evaluateDependsLogic
    (workflow/controller/dag.go:965-1023). ``Errored`` is a node in phase ``Error``;
    ``Daemoned`` is never true here (no daemon templates); ``AnySucceeded`` and
    ``AllFailed`` look at a fan-out task's children (dag.go:986-1003)."""
    if "depends" not in task:
        return all(any(_result(tasks[d], r) for r in _BARE) for d in deps_of(task))

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


class Executor(PodResolver):
    """Executes one workflow with ``runner``; ``dry_run()`` resolves every pod instead."""

    def __init__(self, workflow: Workflow, params: Mapping[str, ParamValue] | None = None, *,
                 runner: Runner | None = None, workers: int = 2, name: str | None = None,
                 stop_on_failure: bool = False, memo: Memo | None = None,
                 backoff_scale: float = 1.0,
                 on_event: Callable[[str, dict[str, Any]], None] | None = None,
                 rank: Callable[[Pod], int] | None = None,
                 pod_identity: Callable[[Pod], str] | None = None) -> None:
        super().__init__(workflow, params, name)
        self.runner = runner
        self.workers = max(1, workers)
        self.stop_on_failure = stop_on_failure
        self.memo = memo
        self.backoff_scale = backoff_scale
        self.on_event = on_event or (lambda kind, data: None)
        self.rank = rank or (lambda pod: 0)
        # what a pod's memo key (and through the chain every later pod's) holds of it; a
        # rehearsal puts its image's build inputs in place of a rebuilt image's new id
        self.pod_identity: Callable[[Pod], str] = pod_identity or Pod.identity
        self.cancel = threading.Event()
        spec = workflow.spec
        self.global_parallelism = spec.get("parallelism")
        self.deadline = float(spec["activeDeadlineSeconds"]) \
            if "activeDeadlineSeconds" in spec else None
        self._futures: dict[Future[PodResult], _PodNode] = {}
        self._root: _Node | None = None
        self._handler: _Node | None = None

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
        deps = {n: deps_of(t.spec) for n, t in node.tasks.items()}
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
            if any(node.tasks[d].phase not in _FINAL for d in deps_of(task.spec)):
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
                    parents = [deduce(d) for d in deps_of(task.spec)] or ["Succeeded"]
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
        dep_keys = sorted(self._result_key(node.tasks[d]) for d in deps_of(spec))
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
