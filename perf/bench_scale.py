"""Scale benchmark: the real runner and stores at the paper's scale.

The synthetic graph (``perf/synthstages.py``) has the stages, shard counts and row
types of ``workflows/full.yaml`` (33 stages: every paper model), with cheap bodies and
the paper's counts: 1,892 clips, 57,043 generated components, 16,536 × 3 = 49,608 sample
rows (3× Table 1's total), their feature rows per model and input group, and the
evaluation's score rows (~1.8 M rows in all). Measured:

* the whole graph through :class:`LocalRunner` on the file store (and on SeaweedFS):
  wall time, tasks, seconds per task (the scheduling overhead per shard);
* the ``assemble`` merge (49,608 rows): time and peak RSS, with 4 to 256 shards
  (memory must stay flat in the number of shards);
* ``madbench status`` on that run;
* orchestration as a share of the real stages' time at that scale (``madbench plan``
  from the measured throughput table): goal < 5 %.

Results: ``.bench/scale.json``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cli.pipeline import print_status
from madbench_common.core.store import RunStore, open_store
from madbench_common.core.usage import peak_rss_bytes, reset_peak_rss
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.plan import PAPER_CLIPS, plan_run
from madbench_common.pipeline.status import collect_status
from madbench_common.testing import SeaweedS3
from perf.results import save
from perf.synthstages import paper_counts, paper_graph

REPO = Path(__file__).resolve().parents[1]

WORKERS = int(os.environ.get("MADBENCH_BENCH_WORKERS", "2"))
SWEEP = tuple(int(n) for n in os.environ.get("MADBENCH_SCALE_SHARDS", "4,16,64,256").split(","))
GOAL_PCT = 5.0


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


def _shard_sweep(store: str) -> list[dict[str, object]]:
    """The assemble stage (49,608 rows) again with each shard count: merge time and memory."""
    run = RunStore(open_store(store), "scale")
    out = []
    for n in SWEEP:
        for key in run.list("assemble"):  # every shard runs again, the default count too
            run.delete(key)
        reset_peak_rss()
        _, reports = _run(store, "scale", until="assemble", shards={"assemble": n})
        rep = next(r for r in reports if r.stage == "assemble")
        out.append({"shards": n, "stage_s": round(rep.seconds, 2),
                    "merge_s": round(rep.merge_seconds, 2),
                    "merge_peak_rss_mb": round(rep.peak_rss / 2**20),
                    "runner_peak_rss_mb": round(peak_rss_bytes() / 2**20),
                    "s_per_shard": round(rep.seconds / n, 3)})
    return out


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
    real = _real_seconds()
    orchestration = float(files["wall_s"]) * WORKERS  # type: ignore[arg-type]
    result = {
        "counts": paper_counts(build_graph().profiled("full")),
        "workers": WORKERS, "file": files, "s3": s3_run, "assemble_shard_sweep": sweep,
        "status_file": status, "status_s3": s3_status,
        "real_stage_core_s": round(real), "orchestration_core_s": round(orchestration),
        "overhead_pct": round(100 * orchestration / real, 2), "goal_pct": GOAL_PCT,
        "overhead_pct_s3": round(100 * float(s3_run["wall_s"]) * WORKERS / real, 2),  # type: ignore[arg-type]
        "merge_memory_flat": max(s["merge_peak_rss_mb"] for s in sweep)  # type: ignore[type-var]
        <= 1.25 * min(s["merge_peak_rss_mb"] for s in sweep),  # type: ignore[type-var]
    }
    return save("scale", result)


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
