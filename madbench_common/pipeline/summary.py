"""The workflows' exit handler: ``<store>/<run_id>/_RUN_SUMMARY.json`` (``madbench
exit-summary``, ``madbench deaf exit-summary``).

Kept apart from the Argo compiler (:mod:`madbench_common.pipeline.argo`), which needs
Hera: the handler runs in the ``reference-cpu`` image, which has no Hera (a rehearsal of
the rendered workflows found the handler failing on that import).
"""

from __future__ import annotations

import json
from typing import Any

from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import read_marker

__all__ = ["parse_failures", "write_exit_summary"]


def parse_failures(failures: str) -> Any:
    """Decode ``{{workflow.failures}}`` into a list of failed nodes.

    Argo substitutes it JSON-quoted (``strconv.Quote`` of the JSON list): ``"null"``
    when nothing failed, ``"[{\\"displayName\\": …}]"`` otherwise. The quoted form is
    decoded twice; raw JSON once; empty or an unsubstituted tag gives ``[]``. Text that
    is not JSON at all is kept as one entry rather than lost.
    """
    value: Any = failures.strip()
    if not value or value.startswith("{{"):
        return []
    for _ in range(3):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [{"message": value}]
    if value is None or value == "":
        return []
    return value if isinstance(value, list) else [value]


def _stage_summary(run: RunStore, stage: Stage) -> dict[str, Any]:
    marker = read_marker(run, stage.name)
    if marker is None:
        return {"done": False}
    keep = ("rows", "rejected", "image", "fingerprint", "schema")
    return {"done": True, **{k: marker[k] for k in keep if k in marker}}


def write_exit_summary(
    graph: Graph, store: str, run_id: str, workflow: str, status: str,
    duration: str = "", failures: str = "",
) -> dict[str, Any]:
    """Write ``<store>/<run_id>/_RUN_SUMMARY.json`` (the workflow's ``onExit`` handler)."""
    run = RunStore(open_store(store), run_id)
    summary = {
        "workflow": workflow,
        "run_id": run_id,
        "status": status,
        "duration_seconds": duration,
        "failures": parse_failures(failures),
        "stages": {s.name: _stage_summary(run, s) for s in graph},
    }
    run.put_bytes("_RUN_SUMMARY.json", json.dumps(summary, indent=1, sort_keys=True).encode())
    return summary
