"""Scale benchmark: the real runner and stores at the paper's scale.

The synthetic graph (``perf/synthstages.py``) has the stages, shard counts and row
types of ``workflows/full.yaml`` (33 stages: every paper model), with cheap bodies and
the paper's counts: 1,892 clips, 57,043 generated components, 16,536 × 3 = 49,608 sample
rows (3× Table 1's total), their feature rows per model and input group, and the
evaluation's score rows (~1.8 M rows in all). Measured:

* the whole graph through :class:`LocalRunner` on the file store (and on SeaweedFS):
  wall time, tasks, seconds per task (the scheduling overhead per shard);
* the ``assemble`` merge (49,608 rows) with 4 to 256 shards: its time, and its own memory
  (the merge again in a fresh process, as a merge pod runs it: the peak RSS over what
  that process held just before; it must stay flat in the number of shards), and that
  process's peak, which must fit a merge pod's memory (``MERGE_MEMORY``);
* ``madbench status`` on that run;
* orchestration as a share of the real stages' time at that scale (``madbench plan``
  from the measured throughput table): goal < 5 %.

Results: ``.bench/scale.json``.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cli.pipeline import print_status
from madbench_common.cluster.argo_local.expressions import parse_quantity
from madbench_common.core.store import RunStore, open_store
from madbench_common.core.usage import peak_rss_bytes, reset_peak_rss
from madbench_common.pipeline.argo import MERGE_MEMORY
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.local import EMBEDDED_IMAGE, LocalRunner, RunOptions
from madbench_common.pipeline.plan import PAPER_CLIPS, plan_run
from madbench_common.pipeline.stage import make_context, merge_stage, read_marker
from madbench_common.pipeline.status import collect_status
from madbench_common.testing import SeaweedS3
from perf.results import save
from perf.synthstages import paper_counts, paper_graph

REPO = Path(__file__).resolve().parents[1]

WORKERS = int(os.environ.get("MADBENCH_BENCH_WORKERS", "2"))
SWEEP = tuple(int(n) for n in os.environ.get("MADBENCH_SCALE_SHARDS", "4,16,64,256").split(","))
GOAL_PCT = 5.0
FLAT_RATIO = 1.25
"""Largest over smallest of the merge's own memory across the sweep, at most."""


def _run(store: str, run_id: str, **kw: object) -> tuple[float, list]:
    opts = RunOptions(store=store, run_id=run_id, workers=WORKERS, progress=False, **kw)
    start = time.perf_counter()
    reports = LocalRunner(paper_graph, opts).execute()
    return time.perf_counter() - start, reports


def _graph_run(store: str) -> dict[str, object]:
    wall, reports = _run(store, "scale")
    tasks = sum(r.shards + 1 for r in reports)
    return {"wall_s": round(wall, 1), "tasks": tasks, "s_per_task": round(wall / tasks, 3),
            "stages": {r.stage: {"rows": r.rows, "shards": r.shards,
                                 "seconds": round(r.seconds, 2),
                                 "merge_s": round(r.merge_seconds, 2),
                                 "peak_rss_mb": round(r.peak_rss / 2**20)} for r in reports}}


@dataclass(frozen=True)
class MergeMemory:
    """One merge in a process of its own: seconds, the RSS it started from and its peak
    RSS (MB), and the merged manifest's sha256."""

    seconds: float
    start_mb: float
    peak_mb: float
    sha256: str

    @property
    def own_mb(self) -> float:
        """What the merge itself added to the process."""
        return self.peak_mb - self.start_mb


def _merge_alone(store: str, run_id: str, graph_factory: Callable[[], Graph], stage: str,
                 num_shards: int) -> MergeMemory:
    """Merge ``stage``'s ``num_shards`` finished shards in this process (spawned for it),
    as the runner does (default parameters and seed)."""
    run = RunStore(open_store(store), run_id)
    ctx = make_context(run, graph_factory(), stage, {}, EMBEDDED_IMAGE, 0)
    if not reset_peak_rss():
        raise RuntimeError("cannot reset the peak RSS here (Linux /proc/self/clear_refs)")
    start_mb = peak_rss_bytes() / 2**20  # the reset sets the high-water mark to the RSS now
    start = time.perf_counter()
    marker = merge_stage(ctx, num_shards)
    return MergeMemory(time.perf_counter() - start, start_mb, peak_rss_bytes() / 2**20,
                       marker["manifest_sha256"])


def merge_in_fresh_process(store: str, run_id: str, graph_factory: Callable[[], Graph],
                           stage: str, num_shards: int) -> MergeMemory:
    """:func:`_merge_alone` in a spawned process: the runner's heap (the stages before,
    the shard scheduling) is not in the figure, as it is not in a merge pod."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_merge_alone, store, run_id, graph_factory, stage,
                           num_shards).result()


def _shard_sweep(store: str) -> list[dict[str, float]]:
    """The assemble stage (49,608 rows) again with each shard count: the runner's stage
    and merge time, then the same merge in a fresh process for its own memory (the
    manifest it writes must be the runner's, byte for byte)."""
    run = RunStore(open_store(store), "scale")
    out = []
    for n in SWEEP:
        for key in run.list("assemble"):  # every shard runs again, the default count too
            run.delete(key)
        _, reports = _run(store, "scale", until="assemble", shards={"assemble": n})
        rep = next(r for r in reports if r.stage == "assemble")
        merged = read_marker(run, "assemble")
        alone = merge_in_fresh_process(store, "scale", paper_graph, "assemble", n)
        if merged is None or alone.sha256 != merged["manifest_sha256"]:
            raise RuntimeError(f"assemble, {n} shards: the fresh merge wrote another manifest")
        out.append({"shards": n, "stage_s": round(rep.seconds, 2),
                    "merge_s": round(rep.merge_seconds, 2),
                    "merge_alone_s": round(alone.seconds, 2),
                    "merge_own_mb": round(alone.own_mb, 1),
                    "merge_process_peak_mb": round(alone.peak_mb),
                    "s_per_shard": round(rep.seconds / n, 3)})
    return out


def merge_memory_ratio(sweep: list[dict[str, float]]) -> float:
    """The merge's own memory, largest over smallest across the sweep: flat in the shard
    count while at most :data:`FLAT_RATIO`."""
    own = [s["merge_own_mb"] for s in sweep]
    return round(max(own) / min(own), 3)


def _status_time(store: str) -> dict[str, float]:
    run = RunStore(open_store(store), "scale")
    start = time.perf_counter()
    status = collect_status(run, paper_graph())
    collect = time.perf_counter() - start
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        print_status(status)
    return {"collect_s": round(collect, 2), "print_s": round(time.perf_counter() - start, 2)}


def _real_seconds() -> float:
    """Core-seconds of the real stages at the paper's scale (CPU references where no GPU
    figure exists), from the committed throughput table."""
    plan = plan_run(build_graph().profiled("full"), PAPER_CLIPS)
    return (plan.cpu_hours + plan.gpu_hours) * 3600


def main() -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="mb-scale-") as tmp:
        files = _graph_run(str(Path(tmp) / "store"))
        sweep = _shard_sweep(str(Path(tmp) / "store"))
        status = _status_time(str(Path(tmp) / "store"))
        with SeaweedS3() as s3:
            s3.create_bucket("madbench")
            os.environ.update(s3.env())
            s3_run = _graph_run("s3://madbench/scale")
            s3_status = _status_time("s3://madbench/scale")
    real, ratio = _real_seconds(), merge_memory_ratio(sweep)
    orchestration = float(files["wall_s"]) * WORKERS  # type: ignore[arg-type]
    result = {
        "counts": paper_counts(build_graph().profiled("full")),
        "workers": WORKERS, "file": files, "s3": s3_run, "assemble_shard_sweep": sweep,
        "status_file": status, "status_s3": s3_status,
        "real_stage_core_s": round(real), "orchestration_core_s": round(orchestration),
        "overhead_pct": round(100 * orchestration / real, 2), "goal_pct": GOAL_PCT,
        "overhead_pct_s3": round(100 * float(s3_run["wall_s"]) * WORKERS / real, 2),  # type: ignore[arg-type]
        "merge_memory_ratio": ratio, "flat_ratio": FLAT_RATIO,
        "merge_memory_flat": ratio <= FLAT_RATIO,
        "merge_process_peak_mb": max(s["merge_process_peak_mb"] for s in sweep),
        "merge_pod_memory_mb": round(parse_quantity(MERGE_MEMORY) / 2**20),
    }
    return save("scale", result)


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
