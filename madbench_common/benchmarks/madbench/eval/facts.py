"""What a report's summary says about its run: pipeline, sources, code, images, quarantine.

:func:`run_facts` reads them from the run's store (stage markers, merged manifests and
the quarantine, through :func:`~madbench_common.pipeline.status.collect_status`) when the
``evaluate`` stage writes its report; ``report.json`` keeps them under ``run``, so
``madbench compare`` and a re-render show the same summary. Every value is plain JSON
(strings, numbers, lists, dicts); the renderers escape every string of it.

The counts are the paper's Table 1 quantities (§3.5): source clips and their split,
samples per protocol (train / val / test) and scene-consistency samples.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

from madbench_common.benchmarks.madbench import DESCRIPTION
from madbench_common.core.errors import MadbenchError
from madbench_common.core.store import RunStore
from madbench_common.pipeline.graph import Graph

__all__ = ["code_revision", "run_facts"]

Facts = dict[str, Any]
_SPLITS = ("train", "val", "test")
_PROTOCOLS = ("balanced", "scene_matched", "scene_mismatched")


def code_revision() -> str:
    """The code that wrote the report: ``$MADBENCH_REVISION``, else the git commit of the
    checkout ``madbench_common`` is imported from (``-dirty`` with local changes), else the
    package version."""
    if rev := os.environ.get("MADBENCH_REVISION", "").strip():
        return rev
    here = str(Path(__file__).resolve().parent)
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)
        if head.returncode == 0 and head.stdout.strip():
            dirty = subprocess.run(["git", "-C", here, "status", "--porcelain",
                                    "--untracked-files=no"], capture_output=True, text=True,
                                   timeout=30, check=False)
            return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return f"madbench-common {metadata.version('madbench-common')} (no git checkout)"
    except metadata.PackageNotFoundError:
        return "unknown"


def _images(run: RunStore, graph: Graph, writing: str, image: str | None
            ) -> dict[str, list[str]]:
    """Image → the stages that ran in it (``embedded``: in-process, no container). The
    stage ``writing`` the report, when it gives its ``image``, counts under that one: a
    marker it left in an earlier run must not change the report."""
    from madbench_common.pipeline.stage import read_marker

    out: dict[str, list[str]] = {}
    for stage in graph:
        if stage.name == writing and image is not None:
            out.setdefault(image, []).append(stage.name)
        elif (marker := read_marker(run, stage.name)) is not None:
            out.setdefault(str(marker.get("image") or "unknown"), []).append(stage.name)
    return out


def run_facts(run: RunStore, graph: Graph, pipeline: str = "madbench",
              writing: str = "evaluate", image: str | None = None) -> Facts:
    """The summary facts of ``run`` (every finished stage of ``graph``; ``writing``, the
    stage writing the report, counts as done, and as run in ``image`` when given)."""
    from madbench_common.pipeline.status import collect_status

    try:
        status = collect_status(run, graph)
    except (MadbenchError, ImportError, KeyError, ValueError, OSError) as exc:
        # a stage whose rows this image cannot read, or a marker of another layout: the
        # summary says so and the report is written all the same
        return {"run_id": run.run_id, "store": run.store.uri(run.run_id), "pipeline": pipeline,
                "commit": code_revision(), "images": _images(run, graph, writing, image),
                "unavailable": f"the run's status could not be read here: {exc}"}
    counts = {s.stage: s.counts for s in status.stages if s.done}
    rows = {s.stage: (s.rows, s.rejected) for s in status.stages if s.done}
    sam = counts.get("assemble", {})
    samples = {p: {"total": int(sam.get(p, 0)),
                   **{s: int(sam.get(f"{p}/{s}", 0)) for s in _SPLITS}} for p in _PROTOCOLS}
    sc = {c: int(sam.get(f"scene_consistency/{c}/consistent", 0))
          + int(sam.get(f"scene_consistency/{c}/inconsistent", 0)) for c in ("D-R", "S-R", "D-S")}
    by_reason = Counter(e.reason for e in status.quarantine)
    by_stage = Counter((e.stage, e.reason) for e in status.quarantine)
    examples: dict[tuple[str, str], list[str]] = {}
    for e in status.quarantine:
        examples.setdefault((e.stage, e.reason), []).append(e.item)
    conditions = counts.get("perturb", {})
    return {
        "run_id": run.run_id,
        "store": run.store.uri(run.run_id),
        "pipeline": pipeline,
        "pipeline_description": DESCRIPTION if pipeline == "madbench" else "",
        "commit": code_revision(),
        "images": _images(run, graph, writing, image),
        "stages_done": sum(s.done or s.stage == writing for s in status.stages),
        "stages": len(status.stages),
        "clips": {
            "ingested": rows.get("ingest", (0, 0))[0] - rows.get("ingest", (0, 0))[1],
            "eligible": counts.get("source_qc", {}).get("eligible"),
            "in_samples": int(sam.get("clips", 0)),
            **{s: int(sam.get(f"clips_{s}", 0)) for s in _SPLITS},
        },
        "samples": samples,
        "scene_consistency": sc,
        "robustness_conditions": sorted(k for k in conditions if k != "clips"),
        "quarantine": {
            "total": len(status.quarantine),
            "by_reason": dict(by_reason.most_common()),
            "by_stage": [{"stage": st, "reason": why, "count": n,
                          "examples": examples[(st, why)][:3]}
                         for (st, why), n in by_stage.most_common()],
        },
    }
