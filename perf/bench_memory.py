"""Per-stage peak memory: the demo with every shard in a fresh process.

Runs the whole graph on the demo corpus with ``isolate`` (one fresh process per shard
and merge, as pods run), takes each stage's largest peak RSS from the run log
(:func:`~madbench_common.pipeline.measure.measure_run`), writes it into the throughput table's
``peak_rss_mb`` column (its other, timed columns are kept) and re-renders the
workflows, whose memory requests derive from that column
(:func:`~madbench_common.pipeline.argo.memory_request`). Commit the table and the
workflows together. Results: ``.bench/memory.json`` (per stage: peak MB, and the
request before and after).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.measure import measure_run, throughput_csv, update_peaks
from madbench_common.pipeline.plan import load_throughput
from perf.results import save

REPO = Path(__file__).resolve().parents[1]

TABLE = REPO / "madbench_common" / "data" / "throughput.csv"
SOURCES = REPO / "data" / "demo" / "sources.csv"
WORKERS = int(os.environ.get("MADBENCH_BENCH_WORKERS", "2"))


def _requests() -> dict[str, str]:
    doc = yaml.safe_load((REPO / "workflows" / "smoke.yaml").read_text())
    return {t["name"].removesuffix("-shard"): t["container"]["resources"]["requests"]["memory"]
            for t in doc["spec"]["templates"] if t["name"].endswith("-shard")}


def _render() -> None:
    """``madbench render`` in a fresh process (it reads the updated table)."""
    code = "import sys; from madbench_common.cli import main; sys.exit(main(['render']))"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})


def main() -> dict[str, Any]:
    before = _requests()
    with tempfile.TemporaryDirectory(prefix="mb-memory-") as tmp:
        opts = RunOptions(store=tmp, run_id="mem", workers=WORKERS, progress=False,
                          isolate=True, params={"ingest": {"sources": str(SOURCES)}})
        start = time.perf_counter()
        LocalRunner(build_graph, opts).execute()
        wall = time.perf_counter() - start
        measured = measure_run(RunStore(open_store(tmp), "mem"), build_graph())
    TABLE.write_text(throughput_csv(update_peaks(load_throughput(str(TABLE)), measured)))
    _render()
    after = _requests()
    stages = {r.stage: {"peak_rss_mb": r.peak_rss_mb,
                        "request_before": before.get(r.stage.replace("_", "-")),
                        "request_after": after.get(r.stage.replace("_", "-"))}
              for r in measured}
    result = {"clips": sum(1 for _ in SOURCES.open()) - 1, "workers": WORKERS,
              "isolated_run_s": round(wall, 1), "stages": stages,
              "largest_peak_mb": max(r.peak_rss_mb for r in measured)}
    return save("memory", result)


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
