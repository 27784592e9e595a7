"""What the rehearsal's tests share: the checkout's rendered workflows, resolved in a dry run,
and a pod memo with one omni shard pod."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from madbench_common.cluster.argo_local import Executor, Pod, Workflow

ROOT = Path(__file__).resolve().parents[3]
WORKFLOWS = ROOT / "workflows"


def dry(name: str, **params: Any) -> list[Pod]:
    return Executor(Workflow.load(WORKFLOWS / f"{name}.yaml"), params, name="w").dry_run()


def omni_memo(tmp_path: Path, gpu: int = 0) -> tuple[Any, Pod]:
    """A fresh full-profile pod memo (its state and image provider under ``tmp_path``) and
    the Baichuan-Omni shard pod it records (``gpu``: GPUs the pod requests)."""
    from madbench_common.cluster.rehearsal.images import ImageProvider
    from madbench_common.cluster.rehearsal.pods import StateMemo
    from madbench_common.cluster.rehearsal.state import State

    state = State(tmp_path / "state.json")
    memo = StateMemo(state, "full", ImageProvider(state, tmp_path), lambda: {"omni_baichuan15"})
    pod = Pod(node="w.omni-baichuan15.shard(0)", template="omni-baichuan15-shard",
              image="ghcr.io/madbench/omni-baichuan15:0.1.0",
              argv=("madbench", "stage", "run", "--stage", "omni_baichuan15"),
              env=(), mounts=(), user=10001, group=10001, gpu=gpu)
    return memo, pod
