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

The package's modules: :mod:`.model` (the parsed workflow, pods, results, the runner and
memo protocols), :mod:`.expressions` (tag substitution, quantities, durations, the tasks
a task waits on), :mod:`.resolve` (a template invocation resolved into a pod; the dry
run) and :mod:`.executor` (scheduling, retries, phases, the exit handler).
"""

from madbench_common.cluster.argo_local.executor import Executor
from madbench_common.cluster.argo_local.expressions import (
    ParamValue,
    parse_duration,
    parse_quantity,
    substitute,
)
from madbench_common.cluster.argo_local.model import (
    CLUSTER_ONLY,
    POD_UID,
    Memo,
    Pod,
    PodResult,
    Retry,
    Runner,
    SecretRef,
    VolumeMount,
    Workflow,
    WorkflowResult,
)
from madbench_common.cluster.argo_local.resolve import PodResolver
from madbench_common.pipeline.argo_expr import UnsupportedConstruct, evaluate

__all__ = [
    "CLUSTER_ONLY",
    "POD_UID",
    "Executor",
    "Memo",
    "ParamValue",
    "Pod",
    "PodResolver",
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
