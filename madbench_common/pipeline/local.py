"""Local backend: run the graph on one machine, stage by stage, shards in parallel.

The embedded default runs each stage in-process (``--workers N`` worker processes for
shards); with a :class:`~madbench_common.pipeline.container.ContainerEngine` every shard and
merge runs in the stage's image. Completed shards and stages are skipped by their markers,
so a killed run resumes where it stopped; one runner holds a run at a time
(:class:`~madbench_common.pipeline.lease.RunLease`); a damaged object has its shard
recomputed (:func:`~madbench_common.pipeline.repair.invalidate`). The run log
(``_logs/run-*.json``) records per stage the shards executed, their peak RSS and S3 retries.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from madbench_common.core.compat import zip_strict
from madbench_common.core.errors import ChecksumError, ConfigError
from madbench_common.core.orphans import die_with_parent
from madbench_common.core.s3client import retries_since, retry_stats
from madbench_common.core.store import RunStore, open_store
from madbench_common.core.usage import peak_rss_bytes, reset_peak_rss
from madbench_common.pipeline.failures import stage_failure
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.lease import RunLease
from madbench_common.pipeline.preflight import Where, check_run, gpu_models, pending_stages
from madbench_common.pipeline.repair import invalidate, stage_done
from madbench_common.pipeline.stage import (
    ShardResult,
    StageContext,
    make_context,
    merge_stage,
    read_marker,
    run_shard,
)
from madbench_common.pipeline.threads import pin_threads

if TYPE_CHECKING:
    from madbench_common.pipeline.container import ContainerEngine
    from madbench_common.pipeline.interpreter import InterpreterEngine

__all__ = ["LocalRunner", "RunOptions", "StageReport"]

log = logging.getLogger("madbench")
EMBEDDED_IMAGE = "embedded"
_UNSUPPORTED_LOCAL = ("gpu", "memory", "cpu", "parallelism", "retries", "timeout")
MAX_REPAIRS = 8
"""Damaged objects recomputed in one run before it gives up."""


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
    lock_wait: float = 0.0
    """Seconds to wait for another runner's lease on the run (0: fail at once)."""
    isolate: bool = False
    """Run every shard in a fresh process (as a pod does): slower, but each shard's peak
    RSS is its own, which is what ``madbench measure`` turns into memory requests."""


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
    executed: list[int] = field(default_factory=list)
    """Shard indices this run computed (the others were done already)."""
    peak_rss: int = 0
    """Largest peak RSS of one shard (or of the merge) in bytes."""
    merge_seconds: float = 0.0
    retries: dict[str, int] = field(default_factory=dict)


def _init_worker(runner: int) -> None:
    """A shard worker: dies with the runner (``runner``: its pid), math threads pinned.

    The thread count is the same whatever ``--workers`` or the CPU count
    (:func:`~madbench_common.pipeline.threads.pin_threads`), so results are too.
    """
    die_with_parent(runner)
    pin_threads()


@lru_cache(maxsize=4)
def _open_run(store_uri: str, run_id: str, _endpoint: str) -> RunStore:
    """One store client per worker process and endpoint (an S3 client is costly to build)."""
    return RunStore(open_store(store_uri), run_id)


def _shard_job(
    store_uri: str, run_id: str, graph_factory: Callable[[], Graph], stage: str,
    params: Mapping[str, Any], seed: int, shard: int, num_shards: int,
) -> ShardResult:
    before = retry_stats()
    try:  # what escapes a worker is one line with its exit code, as from run_shard
        run = _open_run(store_uri, run_id, os.environ.get("AWS_ENDPOINT_URL", ""))
        ctx = make_context(run, graph_factory(), stage, params, EMBEDDED_IMAGE, seed)
    except Exception as exc:
        failure = stage_failure(exc, f"stage {stage} shard {shard + 1}/{num_shards}")
        if failure is exc:
            raise
        raise failure from exc
    result = run_shard(ctx, shard, num_shards)
    return dataclasses.replace(result, retries=retries_since(before))  # context reads too


def _sum(counts: list[dict[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return dict(total)


class LocalRunner:
    """Topological run of a :class:`Graph` against a store."""

    def __init__(self, graph_factory: Callable[[], Graph], options: RunOptions,
                 engine: ContainerEngine | None = None,
                 stage_engines: dict[str, InterpreterEngine] | None = None) -> None:
        self._retries_before = retry_stats()  # the run's S3 retries include the preflight's
        self.graph_factory = graph_factory
        self.graph = graph_factory()
        self.opts = options
        self.engine = engine
        self.stage_engines = stage_engines or {}
        """Stages run by another interpreter (``--python STAGE=PATH``), whatever ``engine``."""
        self.run = RunStore(open_store(options.store), options.run_id)
        self.reports: list[StageReport] = []

    def where(self, stage: Stage) -> Where:
        """How ``stage`` runs here: in process, in another interpreter, or a container."""
        engine = self.stage_engines.get(stage.name, self.engine)
        if engine is None:
            return Where()
        python = getattr(engine, "python", "")
        if python:
            return Where(python=str(python))
        weights = getattr(engine, "weights", None)
        return Where(container=True, weights_root=str(weights) if weights else None)

    def _image_of(self, stage: Stage) -> str:
        engine = self.stage_engines.get(stage.name, self.engine)
        return EMBEDDED_IMAGE if engine is None else engine.image_ref(stage)

    def preflight(self) -> None:
        """Before the first stage: every key, tool, module, weight and image the stages
        still to run need, all missing ones in one error (exit 3; pipeline.preflight)."""
        stages = pending_stages(self.run, self.graph, self.opts.until, self.opts.params,
                                self._image_of, self.opts.seed)
        check_run(stages, self.opts.params, self.where, images=self._image_of)

    def _warn_unsupported(self, stage: Stage) -> None:
        """Warn where a model that needs a GPU runs on the CPU here: never for the CPU
        references (their stages' ``gpu`` is what the paper's models would ask for)."""
        models = gpu_models(stage, self.opts.params.get(stage.name, {})) \
            if self.engine is None else []
        if models:
            log.warning("%s: %s needs a GPU; the embedded backend runs it on the CPU",
                        stage.name, "+".join(models))
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
        pool = None
        self._worker_retries: list[dict[str, int]] = []
        me = os.getpid()
        with RunLease(self.run, wait=self.opts.lock_wait) as lease:
            if self.engine is not None:
                pin_threads()
            elif self.opts.isolate:  # every shard in a fresh process, as in a pod
                if sys.version_info < (3, 11):
                    raise ConfigError("--isolate-shards needs Python 3.11 or later")
                pool = ProcessPoolExecutor(self.opts.workers, initializer=_init_worker,
                                           initargs=(me,), max_tasks_per_child=1,
                                           mp_context=multiprocessing.get_context("spawn"))
            elif self.opts.workers > 1:
                pool = ProcessPoolExecutor(self.opts.workers, initializer=_init_worker,
                                           initargs=(me,))
            else:
                pin_threads()
            try:
                with self._progress() as progress:
                    self._passes(pool, progress, lease)
            except BaseException:
                self._shutdown(pool)
                self._write_log_quietly(started)  # the run's own error is the one to see
                raise
            self._shutdown(pool)
            self._write_log(started)
        return self.reports

    @staticmethod
    def _shutdown(pool: ProcessPoolExecutor | None) -> None:
        if pool is not None:
            pool.shutdown(cancel_futures=True)

    def _write_log_quietly(self, started: datetime) -> None:
        try:
            self._write_log(started)
        except Exception as exc:
            log.warning("run log not written: %s", exc)

    def _passes(self, pool: ProcessPoolExecutor | None, progress: Progress,
                lease: RunLease) -> None:
        """Run the stages; after a damaged object, recompute its shard and go again."""
        repaired: set[str] = set()
        while True:
            try:
                for stage in self.graph.until(self.opts.until):
                    self._record(self._stage(stage, pool, progress, lease))
                return
            except ChecksumError as exc:
                if exc.key in repaired or len(repaired) >= MAX_REPAIRS or not exc.key:
                    raise
                repaired.add(exc.key)
                what = invalidate(self.run, exc.key)
                log.warning("%s; recomputing %s", exc, what)

    def _stage(self, stage: Stage, pool: ProcessPoolExecutor | None, progress: Progress,
               lease: RunLease) -> StageReport:
        """:meth:`_run_stage`; anything but a madbench error (a store reply nobody expected,
        a worker that died) becomes one, one line naming stage and cause, never a
        traceback (:func:`~madbench_common.pipeline.failures.stage_failure`)."""
        try:
            return self._run_stage(stage, pool, progress, lease)
        except Exception as exc:
            failure = stage_failure(exc, f"stage {stage.name}")
            if failure is exc:
                raise
            raise failure from exc

    def _record(self, report: StageReport) -> None:
        """Keep one report per stage; a repair pass's skip does not hide the work done."""
        for i, old in enumerate(self.reports):
            if old.stage == report.stage:
                if not report.skipped:
                    report.executed = sorted({*old.executed, *report.executed})
                    self.reports[i] = report
                return
        self.reports.append(report)

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), disable=not self.opts.progress, transient=False,
        )

    def _run_stage(
        self, stage: Stage, pool: ProcessPoolExecutor | None, progress: Progress,
        lease: RunLease,
    ) -> StageReport:
        params = self.opts.params.get(stage.name, {})
        engine = self.stage_engines.get(stage.name, self.engine)
        image = EMBEDDED_IMAGE if engine is None else engine.image_ref(stage)
        ctx = make_context(self.run, self.graph, stage.name, params, image, self.opts.seed)
        marker = read_marker(self.run, stage.name) if stage_done(ctx) else None
        if marker is not None:
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
            lease.check()
            marker, merge_s, merge_rss, merge_retries = self._merge(ctx, n)
        else:
            results = engine.run_shards(stage, params, self.opts.seed, n, tick)
            lease.check()
            merge_start = time.perf_counter()
            marker = engine.merge(stage, params, self.opts.seed, n)
            merge_s, merge_rss, merge_retries = time.perf_counter() - merge_start, 0, {}
            self._worker_retries.extend(r.retries for r in results)
        seconds = time.perf_counter() - start
        log.info("%s: %d rows (%d rejected) in %.1fs", stage.name, marker["rows"],
                 marker["rejected"], seconds)
        if marker["rejected"]:
            _log_rejections(self.run, stage, marker)
        return StageReport(
            stage.name, False, n, sum(r.skipped for r in results), marker["rows"],
            marker["rejected"], seconds, [r.shard for r in results if not r.skipped],
            max([merge_rss, *(r.peak_rss for r in results)]), merge_s,
            _sum([*(r.retries for r in results), merge_retries]))

    @staticmethod
    def _merge(ctx: StageContext, n: int) -> tuple[dict[str, Any], float, int, dict[str, int]]:
        before = retry_stats()
        reset_peak_rss()
        start = time.perf_counter()
        marker = merge_stage(ctx, n)
        return marker, time.perf_counter() - start, peak_rss_bytes(), retries_since(before)

    def _run_shards(
        self, stage: Stage, params: Mapping[str, Any], n: int, pool: ProcessPoolExecutor | None,
        tick: Callable[[], None],
    ) -> list[ShardResult]:
        args = (self.opts.store, self.opts.run_id, self.graph_factory, stage.name, params,
                self.opts.seed)
        if pool is None or (n == 1 and not self.opts.isolate):
            results = []
            for shard in range(n):
                results.append(_shard_job(*args, shard, n))
                tick()
            return results
        futures: list[Future[ShardResult]] = [pool.submit(_shard_job, *args, i, n)
                                              for i in range(n)]
        for fut in futures:
            fut.add_done_callback(lambda _f: tick())
        results = [f.result() for f in futures]
        self._worker_retries.extend(r.retries for r in results)
        return results

    def _run_retries(self) -> dict[str, int]:
        """Transient S3 replies of the whole run: this process's, plus its workers'."""
        return _sum([retries_since(self._retries_before), *self._worker_retries])

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
            "s3_retries": self._run_retries(),
        }
        self.run.put_bytes(f"_logs/run-{stamp}.json", json.dumps(record, indent=1).encode())


def _guess_key(names: list[str]) -> str:
    """The item field of a manifest whose marker predates ``key``: the most specific
    ``*_id`` column (the runner does not import stage code)."""
    ids: list[str] = [n for n in ("sample_id", "component_id", "pair_id") if n in names]
    own = [n for n in names if n not in ("status", "reason", "detail")]  # after the base's
    return (ids or [n for n in own if n.endswith("_id")] or own or names)[0]


def _log_rejections(run: RunStore, stage: Stage, marker: dict[str, Any]) -> None:
    """One warning per rejection reason of a finished stage: its count and a few items
    (``madbench -v`` lists every row; ``madbench status --details`` too)."""
    import io

    import pyarrow.parquet as pq

    data = run.get_bytes(f"{stage.name}/manifest.parquet", marker["manifest_sha256"])
    id_field = marker.get("key") or _guess_key(pq.read_schema(io.BytesIO(data)).names)
    table = pq.read_table(io.BytesIO(data), columns=[id_field, "status", "reason"])
    items: dict[str, list[str]] = {}
    for item, status, reason in zip_strict(*(table.column(c).to_pylist()
                                             for c in (id_field, "status", "reason"))):
        if status != "ok":
            items.setdefault(reason or "unknown", []).append(str(item))
    for reason, ids in sorted(items.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        log.warning("%s: %d rejected: %s (e.g. %s)%s", stage.name, len(ids), reason,
                    ", ".join(i[:60] for i in ids[:3]), "; -v lists each" if len(ids) > 3
                    else "")
