"""Compile ``workflows/weights.yaml``: the one-off Argo workflow that fills the weights volume.

It runs ``madbench weights fetch --image <slug> --dest /weights`` once per chosen image,
with the ``madbench-weights`` volume read-write. Its pods are the only ones with egress to
the hub (the label ``madbench.io/egress: hub``); stage pods mount the volume read-only and
offline. A gated repo's token comes from the optional Secret ``madbench-hf``. The fetch
pods run the base image, which ships every ``weights.yaml``: after changing one, rebuild
the bases first. The data workflow (:mod:`.argo_data`) is built by the same functions.
"""

from __future__ import annotations

import json
from pathlib import Path

from hera.workflows import models as m

from madbench_common.models.weights import weights_images
from madbench_common.pipeline.argo import ClusterProfile, ImageLock, pod_rules, workflow_yaml

__all__ = ["EGRESS_LABEL", "HF_SECRET", "compile_weights_workflow", "fetch_parameters",
           "fetch_template", "fetch_workflow", "render_weights_workflow", "weights_images",
           "write_workflow"]

EGRESS_LABEL = {"madbench.io/egress": "hub"}
"""The label that k8s/base/networkpolicy.yaml allows out to the hub (HTTPS)."""
HF_SECRET = "madbench-hf"
_WEIGHTS = "/weights"
_SCRATCH = "/tmp"


def _env() -> list[m.EnvVar]:
    plain = {"HOME": _SCRATCH, "TMPDIR": _SCRATCH, "XDG_CACHE_HOME": f"{_SCRATCH}/.cache",
             "MADBENCH_WEIGHTS": _WEIGHTS, "HF_HOME": f"{_WEIGHTS}/huggingface",
             "HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", "PYTHONUNBUFFERED": "1"}
    env = [m.EnvVar(name=k, value=v) for k, v in plain.items()]
    token = m.SecretKeySelector(name=HF_SECRET, key="HF_TOKEN", optional=True)
    return [*env, m.EnvVar(name="HF_TOKEN", value_from=m.EnvVarSource(secret_key_ref=token))]


def fetch_template(verb: str, item: str, env: list[m.EnvVar], volume: str, mount: str,
                   memory: tuple[str, str]) -> m.Template:
    """The ``fetch`` pod of a one-off fetch workflow: ``madbench <verb> fetch --<item>
    {{item}} --dest <mount>`` on the fetch image, writing the ``volume`` mounted at ``mount``
    (``memory``: request and limit) with a read-only root, no capabilities and the label
    that lets it out to the hub."""
    args = [verb, "fetch", f"--{item}", f"{{{{inputs.parameters.{item}}}}}", "--dest", mount,
            "--allow-unpinned={{workflow.parameters.allow_unpinned}}"]
    return m.Template(
        name="fetch",
        metadata=m.Metadata(labels={**EGRESS_LABEL, "madbench.io/stage": verb}),
        inputs=m.Inputs(parameters=[m.Parameter(name=item)]),
        container=m.Container(
            image="{{workflow.parameters.fetch_image}}", image_pull_policy="IfNotPresent",
            command=["madbench"], args=args, env=env,
            volume_mounts=[m.VolumeMount(name="scratch", mount_path=_SCRATCH),
                           m.VolumeMount(name=volume, mount_path=mount)],
            resources=m.ResourceRequirements(
                requests={"cpu": m.Quantity("1"), "memory": m.Quantity(memory[0])},
                limits={"memory": m.Quantity(memory[1])}),
            security_context=m.SecurityContext(
                allow_privilege_escalation=False, read_only_root_filesystem=True,
                run_as_non_root=True, capabilities=m.Capabilities(drop=["ALL"])),
        ),
        active_deadline_seconds=m.IntOrString(str(6 * 3600)),
        # waits of 1, 2 and 4 minutes; exit 3 (a mismatch, an unpinned entry) is never
        # retried. No backoff.cap: it needs Argo v3.7 (the workflows support v3.5,
        # madbench_common.pipeline.argo_rules.VERSION_GATES) and 3 retries never reach one
        retry_strategy=m.RetryStrategy(
            limit=m.IntOrString("3"), retry_policy="Always",
            expression='lastRetry.exitCode != "3"',
            backoff=m.Backoff(duration="1m", factor=m.IntOrString("2"))),
    )


def compile_weights_workflow(lock: ImageLock, profile: ClusterProfile,
                             images: list[str] | None = None) -> m.Workflow:
    """The weights workflow (``images``: the default of its ``images`` parameter)."""
    chosen = weights_images() if images is None else images
    params = fetch_parameters(
        lock, "weights", "weights.yaml",
        m.Parameter(name="images", value=json.dumps(chosen),
                    description="JSON list of image slugs whose weights.yaml to fetch"),
        "true: fetch unpinned weights.yaml entries at their revision's current commit "
        "(recorded in each image's weights lock); false: refuse them (exit 3)")
    return fetch_workflow(
        "weights", "one-off: fill the madbench-weights volume from the hub", params,
        fetch_template("weights", "image", _env(), "weights", _WEIGHTS, ("2Gi", "4Gi")),
        profile, profile.weights_claim, scratch_gib=20)


def fetch_parameters(lock: ImageLock, verb: str, ships: str, items: m.Parameter,
                     unpinned: str) -> list[m.Parameter]:
    """A fetch workflow's parameters: ``items`` (the JSON list the pods fan out over), the
    base image that runs ``madbench <verb> fetch`` (it ships the ``ships`` spec) and
    ``allow_unpinned`` (``unpinned``: what true and false do)."""
    return [items,
            m.Parameter(name="fetch_image", value=lock.ref("base-py311"),
                        description=f"Image that runs madbench {verb} fetch (ships {ships})"),
            m.Parameter(name="allow_unpinned", value="false", enum=["false", "true"],
                        description=unpinned)]


def fetch_workflow(name: str, description: str, params: list[m.Parameter],
                   fetch: m.Template, profile: ClusterProfile, claim: str,
                   scratch_gib: int) -> m.Workflow:
    """A one-off workflow that fills the volume of ``claim`` (mounted as ``name``): one
    ``fetch`` pod per element of the list parameter ``params[0]``, under the pods' rules
    (non-root uid, runtime-default seccomp, GC and TTL). ``weights.yaml`` and ``data.yaml``
    are both this."""
    item = ((fetch.inputs.parameters or []) if fetch.inputs else [])[0].name  # its one input
    task = m.DAGTask(name="fetch", template="fetch",
                     with_param=f"{{{{workflow.parameters.{params[0].name}}}}}",
                     arguments=m.Arguments(parameters=[m.Parameter(name=item,
                                                                   value="{{item}}")]))
    return m.Workflow(
        api_version="argoproj.io/v1alpha1", kind="Workflow",
        metadata=m.ObjectMeta(
            generate_name=f"madbench-{name}-",
            labels={"app.kubernetes.io/name": "madbench", "madbench.io/variant": name},
            annotations={"workflows.argoproj.io/description": description}),
        spec=m.WorkflowSpec(
            entrypoint=name, arguments=m.Arguments(parameters=params),
            templates=[m.Template(name=name, dag=m.DAGTemplate(tasks=[task])), fetch],
            parallelism=2,
            **pod_rules(profile),
            volumes=[m.Volume(name="scratch", empty_dir=m.EmptyDirVolumeSource(
                         size_limit=m.Quantity(f"{scratch_gib}Gi"))),
                     m.Volume(name=name, persistent_volume_claim=(
                         m.PersistentVolumeClaimVolumeSource(claim_name=claim)))],
            pod_gc=m.PodGC(strategy="OnPodSuccess", delete_delay_duration="10m"),
            ttl_strategy=m.TTLStrategy(seconds_after_success=86400,
                                       seconds_after_failure=7 * 86400),
            archive_logs=True,
            active_deadline_seconds=24 * 3600,
        ),
    )


def render_weights_workflow(lock: ImageLock, profile: ClusterProfile, out_dir: str | Path,
                            check: bool = False) -> list[Path]:
    """Write (or, with ``check``, compare) ``<out_dir>/weights.yaml``; returns it if changed."""
    return write_workflow(Path(out_dir) / "weights.yaml",
                          workflow_yaml(compile_weights_workflow(lock, profile),
                                        "madbench_common/pipeline/argo_weights.py"), check)


def write_workflow(path: Path, text: str, check: bool) -> list[Path]:
    """Write ``text`` to ``path`` (with ``check``, only compare); ``[path]`` if it changed."""
    if path.exists() and path.read_text() == text:
        return []
    if not check:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return [path]
