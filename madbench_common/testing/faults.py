"""Fault-injection harness for the runner: kill it at random points, compare what reruns give.

Used by ``tests/pipeline/test_faults.py`` (a few seeds) and ``perf/bench_faults.py`` (the
full sweep of ``make bench`` / ``make faults``). Everything runs the real CLI in its own
process group against a real store (the file system or SeaweedFS), so ``SIGKILL`` takes
the runner and its workers down mid-write exactly as a preempted node would; a rerun must
pass :func:`check_resume`.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from madbench_common.benchmarks.madbench.robustness.conditions import builtin_conditions
from madbench_common.core.environ import environ
from madbench_common.core.errors import ConfigError
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.stage import read_marker, shard_key

__all__ = [
    "KillRecord",
    "check_resume",
    "count_markers",
    "demo_sources",
    "finished_markers",
    "kill_run",
    "last_run_log",
    "manifests",
    "run_cli",
    "sweep_seed",
    "write_sources",
]

_DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"
_SHARD_MARKER = re.compile(r"^[^/]+/[^/]+/shards/\d+-of-\d+\._SUCCESS$")
FAULT_CLIPS = ("demo_002", "demo_004", "demo_007")
"""Three demo clips that reach every stage (two eligible, samples assembled)."""


def demo_sources(dest: Path, clips: Sequence[str] | int = FAULT_CLIPS) -> Path:
    """A sources CSV in ``dest`` for ``clips`` of the demo corpus (ids, or the first
    ``clips``), the clips and stems copied beside it: sources are confined to the CSV's
    folder."""
    with open(_DEMO / "sources.csv", newline="") as fh:
        every = list(csv.DictReader(fh))
    rows = every[:clips] if isinstance(clips, int) else [r for r in every
                                                         if r["clip_id"] in clips]
    if not rows:
        raise ConfigError(f"{_DEMO / 'sources.csv'}: no demo clips among {clips!r}")
    dest.mkdir(parents=True, exist_ok=True)
    for row in rows:
        for col in ("path", "speech_stem", "env_stem"):
            if row.get(col):
                (dest / row[col]).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(_DEMO / row[col], dest / row[col])
    return write_sources(dest / "sources.csv", rows)


def write_sources(path: Path, rows: Sequence[Mapping[str, str]],
                  columns: Sequence[str] | None = None) -> Path:
    """Write a sources CSV at ``path``: the header ``columns`` (default: the first row's
    keys; a row may leave a column out) and ``rows``. Returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns or rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


ONE_CONDITION = [c for c in builtin_conditions() if c["name"] == "mp3_24k"]
"""One robustness condition of the packaged 14 (``perturb.conditions``), taken from them:
what whole-graph test runs perturb with, so the perturb stage runs without multiplying the
evaluation by 14."""

LIGHT_EVALUATION = (
    "--set", "plan_components.targets=1", "--set", "plan_components.mismatch_prompts=1",
    "--set", f"perturb.conditions={json.dumps(ONE_CONDITION)}",
    "--set", 'features_references.models=["ref-logmel-stats"]',
)
"""What every fault-suite run sets: the demo's candidate plan (6 speech and 8 environment
candidates per clip, ``make demo``'s ``DEMO_PLAN``, not the paper's 18 and 12), one
robustness condition (of 14) and one extra CPU reference (of 8). Every stage still runs,
is killed and resumes; the suite's many whole-graph runs are not each multiplied by the
paper's candidate counts and 14 × 8 evaluations (the clean run took 102 s with the
paper's plan, and component QC was a quarter of it)."""


def _argv(store: str, run_id: str, sources: Path, workers: int, extra: Sequence[str]
          ) -> list[str]:
    return [sys.executable, "-m", "madbench_common.cli", "run", "--sources", str(sources),
            "--store", store, "--run-id", run_id, "--workers", str(workers), "--no-progress",
            *LIGHT_EVALUATION, *extra]


def run_cli(store: str, run_id: str, sources: Path, env: Mapping[str, str] | None = None,
            workers: int = 2, extra: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """``madbench run`` to completion (or failure); output captured."""
    return subprocess.run(_argv(store, run_id, sources, workers, extra), text=True,
                          capture_output=True, env={**os.environ, **(env or {})})


def count_markers(run: RunStore, stages: Sequence[str] | None = None) -> int:
    """Shard and stage ``_SUCCESS`` markers written so far (of ``stages`` only, if given):
    how far a run has come."""
    return sum(k.endswith("_SUCCESS") and (stages is None or k.split("/")[0] in stages)
               for k in run.list())


def kill_run(store: str, run_id: str, sources: Path, markers: int, jitter: float,
             env: Mapping[str, str] | None = None, workers: int = 2,
             extra: Sequence[str] = (), when: str = "") -> bool:
    """Start ``madbench run``; once it has written ``markers`` markers (``0``: once it holds
    the run's lease, before any marker) and the key ``when`` exists (if given), wait
    ``jitter`` seconds and SIGKILL its whole process group (the runner and its workers).

    Kill points chosen by progress, not by time, land inside the run however fast the
    machine is. Returns whether the kill landed (``False``: the run had finished).
    """
    run = RunStore(_open(store, env), run_id)
    proc = subprocess.Popen(_argv(store, run_id, sources, workers, extra),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})}, start_new_session=True)
    while proc.poll() is None and count_markers(run) < markers:
        time.sleep(0.1)
    while proc.poll() is None and markers == 0 and not run.exists("_LOCK"):
        time.sleep(0.05)
    while proc.poll() is None and when and not run.exists(when):
        time.sleep(0.1)
    time.sleep(jitter)
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def manifests(run: RunStore, graph: Graph) -> dict[str, bytes]:
    """Every finished stage's merged manifest bytes (a stage whose marker or manifest is
    missing, even one removed while this reads, is not finished)."""
    out = {}
    for stage in graph:
        if read_marker(run, stage.name) is None:
            continue
        try:
            out[stage.name] = run.get_bytes(f"{stage.name}/manifest.parquet")
        except FileNotFoundError:
            continue
    return out


def finished_markers(run: RunStore) -> set[str]:
    """Shard markers present now (what a rerun must not compute again)."""
    return {k for k in run.list() if _SHARD_MARKER.match(k)}


def last_run_log(run: RunStore) -> dict[str, Any]:
    """The newest ``_logs/run-*.json`` record."""
    logs = sorted(k for k in run.list("_logs") if k.startswith("_logs/run-"))
    record: dict[str, Any] = json.loads(run.get_bytes(logs[-1]))
    return record


def executed_markers(run: RunStore, record: dict[str, Any]) -> set[str]:
    """Marker keys of the shards a run log says it computed.

    A stage whose ``_SUCCESS`` is missing (the run stopped before its merge, or a repair
    removed it) did not finish: its shards are found by their prefix in the store, so the
    marker's absence is "not done", never a ``FileNotFoundError``."""
    out = set()
    for stage in record["stages"]:
        if stage["skipped"] or not stage["executed"]:
            continue
        marker = read_marker(run, stage["stage"])
        prefixes = [marker["prefix"]] if marker is not None else sorted(
            {k.rsplit("/shards/", 1)[0] for k in run.list(stage["stage"])
             if _SHARD_MARKER.match(k)})
        out |= {shard_key(prefix, i, stage["shards"], "_SUCCESS")
                for prefix in prefixes for i in stage["executed"]}
    return out


def check_resume(run: RunStore, graph: Graph, clean: Mapping[str, bytes],
                 before: set[str]) -> list[str]:
    """Problems with a resumed run: differing manifests, finished shards computed again.

    Every manifest must be byte-identical to a clean run's, and no shard that had finished
    before the kill may be computed again (the rerun's run log lists the shards it
    executed; they must not be among the markers present after the kill)."""
    problems = []
    got = manifests(run, graph)
    for stage, data in clean.items():
        if got.get(stage) != data:
            problems.append(f"{stage}: manifest differs from the clean run's")
    redone = executed_markers(run, last_run_log(run)) & before
    problems += [f"finished shard computed again: {k}" for k in sorted(redone)]
    return problems


@dataclass
class KillRecord:
    """One seed of the sweep."""

    seed: int
    store: str
    markers: int
    """The kill came after this many markers (of the clean run's total) …"""
    jitter: float
    """… and this many seconds more."""
    killed: bool
    stages_done: int
    shards_done: int
    shards_redone: int
    rerun_seconds: float
    problems: list[str] = field(default_factory=list)


def sweep_seed(seed: int, store: str, sources: Path, graph: Graph, clean: Mapping[str, bytes],
               clean_markers: int, env: Mapping[str, str] | None = None,
               workers: int = 2, rerun_workers: int | None = None,
               until: str = "") -> KillRecord:
    """Kill a fresh run at a seeded point of its progress, rerun it (with
    ``rerun_workers``, default ``workers``), check the rerun.

    The point: after a uniform draw of 1 … ``clean_markers`` − 1 markers (the clean
    run wrote ``clean_markers``), plus a uniform 0–1 s, so kills also land mid-write.
    With ``until``, both runs stop after that stage (``madbench run --until``): then
    ``clean`` and ``clean_markers`` are those of the stages up to it.
    """
    rng = random.Random(seed)
    markers, jitter = rng.randint(1, clean_markers - 1), round(rng.uniform(0.0, 1.0), 2)
    run_id = f"kill-{seed}"
    extra = ("--until", until) if until else ()
    killed = kill_run(store, run_id, sources, markers, jitter, env, workers, extra)
    run = RunStore(_open(store, env), run_id)
    before = finished_markers(run)
    stages_done = len(manifests(run, graph))
    start = time.monotonic()
    done = run_cli(store, run_id, sources, env, rerun_workers or workers, extra)
    seconds = time.monotonic() - start
    record = KillRecord(seed, store, markers, jitter, killed, stages_done, len(before), 0,
                        round(seconds, 1))
    if done.returncode != 0:
        record.problems.append(f"rerun exited {done.returncode}: {done.stderr[-400:]}")
        return record
    record.shards_redone = len(executed_markers(run, last_run_log(run)) & before)
    record.problems += check_resume(run, graph, clean, before)
    if until and set(manifests(run, graph)) != set(clean):
        record.problems.append(f"stages finished {sorted(manifests(run, graph))}, the clean "
                               f"run's up to {until}: {sorted(clean)}")
    return record


def _open(store: str, env: Mapping[str, str] | None) -> Any:
    with environ(env or {}):
        return open_store(store)
