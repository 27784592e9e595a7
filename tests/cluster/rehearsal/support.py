"""What the rehearsal's tests share: the checkout's rendered workflows, resolved in a dry run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from madbench_common.cluster.argo_local import Executor, Pod, Workflow

ROOT = Path(__file__).resolve().parents[3]
WORKFLOWS = ROOT / "workflows"


def dry(name: str, **params: Any) -> list[Pod]:
    return Executor(Workflow.load(WORKFLOWS / f"{name}.yaml"), params, name="w").dry_run()
