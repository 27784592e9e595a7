"""``workflows/deaf.yaml``: the DEAF graph's ``full`` profile, compiled by ``madbench render``.

The paper's seven models (§3.1) each get an answer stage: the three hosted APIs on
``reference-cpu`` with their keys, the four open models on GPU images; SIC voices from
ElevenLabs and DeepSeek-R1 as the judge (§2.4). Pods run ``madbench deaf stage run|merge``
and the exit handler ``madbench deaf exit-summary``. API keys reach only the pods of
stages that declare them (``Stage.secrets``), by ``secretKeyRef`` into the cluster
profile's ``apiSecret`` (default ``madbench-api-keys``); no key value is ever in the YAML.
"""

from __future__ import annotations

from pathlib import Path

from madbench_common.benchmarks.deaf.graph import build_deaf_graph
from madbench_common.pipeline.argo import ClusterProfile, ImageLock, render_workflows

__all__ = ["deaf_lock", "render_deaf_workflow"]


def deaf_lock(lock: ImageLock) -> ImageLock:
    """``lock`` with planned slots for the DEAF images it does not list yet.

    Images the lock does not list yet (``deaf-tf5``, ``deaf-salmonn`` until their build
    records land in ``images/images.lock.yaml``) default to a ``planned`` tag
    ``ghcr.io/madbench/<slug>:0.1.0`` (:meth:`ImageLock.with_slots`); a lock entry wins as
    soon as it exists. ``argo submit -p <stage>_image=…`` swaps one without re-rendering."""
    graph = build_deaf_graph().profiled("full")
    return lock.with_slots(sorted({s.image for s in graph}))


def render_deaf_workflow(lock: ImageLock, profile: ClusterProfile, out_dir: str | Path,
                         check: bool = False) -> list[Path]:
    """Write (or, with ``check``, compare) ``<out_dir>/deaf.yaml``; returns changed files."""
    return render_workflows(build_deaf_graph(), deaf_lock(lock), profile, out_dir,
                            check=check, variants=("deaf",),
                            source="madbench_common/benchmarks/deaf/graph.py")
