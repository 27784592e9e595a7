"""A local interpreter of the Argo Workflows subset that ``madbench render`` emits.

It executes the rendered YAML itself, pod by pod, with the containers started by a
:class:`Runner` (the rehearsal runs each pod in its image under the pod policy; tests use
in-memory runners), so what runs is what ``argo submit`` would run. A workflow Argo would
refuse is refused first, in Argo's words (:mod:`madbench_common.pipeline.argo_rules`); a
construct this executor does not honour fails loudly (:class:`UnsupportedConstruct`, exit
3) unless it is a cluster-only field (:data:`CLUSTER_ONLY`). The subset is listed in the
README (Rehearsal, "The interpreter"). Modules: :mod:`.model` (workflow, pods, results,
runner and memo protocols), :mod:`.expressions` (tags, quantities, durations, task
dependencies), :mod:`.resolve` (invocations resolved into pods; the dry run) and
:mod:`.executor` (scheduling, retries, phases, the exit handler). One simplification: a
pod that cannot start (image or secret key missing) is an ``Error`` at once, not pending.
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
