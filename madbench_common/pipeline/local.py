"""Local backend: run the graph on one machine, stage by stage, shards in parallel.

The embedded default runs each stage in-process (``--workers N`` worker processes
for shards). With a :class:`~madbench_common.pipeline.container.ContainerEngine`
(``madbench run --engine podman|docker|buildah``) every shard and merge runs in the
stage's image instead, ``--workers`` containers at a time. Completed shards and stages
are skipped by their markers, so a killed run resumes where it stopped and produces
the same manifests.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import (
    ShardResult,
    make_context,
    merge_stage,
    run_shard,
    stage_done,
)
from madbench_common.store import RunStore, open_store

if TYPE_CHECKING:
    from madbench_common.pipeline.container import ContainerEngine
    from madbench_common.pipeline.interpreter import InterpreterEngine

__all__ = ["LocalRunner", "RunOptions", "StageReport"]

log = logging.getLogger("madbench")
EMBEDDED_IMAGE = "embedded"
_UNSUPPORTED_LOCAL = ("gpu", "memory", "cpu", "parallelism", "retries", "timeout")


@dataclass
class RunOptions:
    """What the user chose for one local run."""

    store: str
    run_id: str
    until: str | None = None
    workers: int = 1
    seed: int = 0
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    shards: dict[str, int] = field(default_factory=dict)
    """Per-stage shard count override; by default ``max(stage.shards, workers)``."""
    progress: bool = True


@dataclass
class StageReport:
    """One stage's outcome in a run log."""

    stage: str
    skipped: bool
    shards: int
    shards_skipped: int
    rows: int
    rejected: int
    seconds: float


def _init_worker(threads: int) -> None:
    """Cap intra-op threads so ``workers × threads`` matches the cores.

    Set through the environment so a worker that never needs torch never imports it;
    if torch is already imported (in-process runs) its pool is resized directly.
    """
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


def _shard_job(
    store_uri: str, run_id: str, graph_factory: Callable[[], Graph], stage: str,
    params: dict[str, Any], seed: int, shard: int, num_shards: int,
) -> ShardResult:
    run = RunStore(open_store(store_uri), run_id)
    ctx = make_context(run, graph_factory(), stage, params, EMBEDDED_IMAGE, seed)
    return run_shard(ctx, shard, num_shards)


class LocalRunner:
    """Topological run of a :class:`Graph` against a store."""

    def __init__(self, graph_factory: Callable[[], Graph], options: RunOptions,
                 engine: ContainerEngine | None = None,
                 stage_engines: dict[str, InterpreterEngine] | None = None) -> None:
        self.graph_factory = graph_factory
        self.graph = graph_factory()
        self.opts = options
        self.engine = engine
        self.stage_engines = stage_engines or {}
        """Stages run by another interpreter (``--python STAGE=PATH``), whatever ``engine``."""
        self.run = RunStore(open_store(options.store), options.run_id)
        self.reports: list[StageReport] = []

    def _warn_unsupported(self, stage: Stage) -> None:
        if stage.gpu and self.engine is None:
            log.warning("%s: requests %d GPU(s); the embedded backend runs it on the CPU",
                        stage.name, stage.gpu)
        if stage.retries:
            log.debug("%s: retries=%d is an Argo knob; locally a failure stops the run "
                      "and a rerun resumes", stage.name, stage.retries)

    def num_shards(self, stage: Stage) -> int:
        if stage.name in self.opts.shards:
            return max(1, self.opts.shards[stage.name])
        return max(stage.shards, self.opts.workers) if stage.sharded else 1

    def execute(self) -> list[StageReport]:
        """Run every stage up to ``until``; return per-stage reports and write the run log."""
        started = datetime.now(timezone.utc)
        threads = max(1, (os.cpu_count() or 1) // max(1, self.opts.workers))
        pool = None
        if self.opts.workers > 1 and self.engine is None:
            pool = ProcessPoolExecutor(self.opts.workers, initializer=_init_worker,
                                       initargs=(threads,))
        else:
            _init_worker(threads)
        try:
            with self._progress() as progress:
                for stage in self.graph.until(self.opts.until):
                    self.reports.append(self._run_stage(stage, pool, progress))
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
            self._write_log(started)
        return self.reports

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), disable=not self.opts.progress, transient=False,
        )

    def _run_stage(
        self, stage: Stage, pool: ProcessPoolExecutor | None, progress: Progress
    ) -> StageReport:
        params = self.opts.params.get(stage.name, {})
        engine = self.stage_engines.get(stage.name, self.engine)
        image = EMBEDDED_IMAGE if engine is None else engine.image_ref(stage)
        ctx = make_context(self.run, self.graph, stage.name, params, image, self.opts.seed)
        if stage_done(ctx):
            marker = json.loads(self.run.get_bytes(f"{stage.name}/_SUCCESS"))
            log.info("%s: done already (fingerprint %s), skipped", stage.name, ctx.fingerprint[:12])
            progress.add_task(f"{stage.name} ✓", total=1, completed=1)
            return StageReport(stage.name, True, 0, 0, marker["rows"], marker["rejected"], 0.0)
        self._warn_unsupported(stage)
        n = self.num_shards(stage)
        task = progress.add_task(stage.name, total=n)
        start = time.perf_counter()

        def tick() -> None:
            progress.advance(task)

        if engine is None:
            results = self._run_shards(stage, params, n, pool, tick)
            marker = merge_stage(ctx, n)
        else:
            results = engine.run_shards(stage, params, self.opts.seed, n, tick)
            marker = engine.merge(stage, params, self.opts.seed, n)
        seconds = time.perf_counter() - start
        log.info("%s: %d rows (%d rejected) in %.1fs", stage.name, marker["rows"],
                 marker["rejected"], seconds)
        return StageReport(stage.name, False, n, sum(r.skipped for r in results),
                           marker["rows"], marker["rejected"], seconds)

    def _run_shards(
        self, stage: Stage, params: dict[str, Any], n: int, pool: ProcessPoolExecutor | None,
        tick: Callable[[], None],
    ) -> list[ShardResult]:
        args = (self.opts.store, self.opts.run_id, self.graph_factory, stage.name, params,
                self.opts.seed)
        if pool is None or n == 1:
            results = []
            for shard in range(n):
                results.append(_shard_job(*args, shard, n))
                tick()
            return results
        futures: list[Future[ShardResult]] = [pool.submit(_shard_job, *args, i, n)
                                              for i in range(n)]
        for fut in futures:
            fut.add_done_callback(lambda _f: tick())
        return [f.result() for f in futures]

    def _write_log(self, started: datetime) -> None:
        stamp = started.strftime("%Y%m%dT%H%M%S.%fZ")
        record = {
            "run_id": self.opts.run_id,
            "started": started.isoformat(),
            "finished": datetime.now(timezone.utc).isoformat(),
            "backend": "local" if self.engine is None else f"local-{self.engine.engine}",
            "workers": self.opts.workers,
            "seed": self.opts.seed,
            "until": self.opts.until,
            "stages": [asdict(r) for r in self.reports],
        }
        self.run.put_bytes(f"_logs/run-{stamp}.json", json.dumps(record, indent=1).encode())
