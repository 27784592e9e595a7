"""Per-stage peak memory: the demo with every shard in a fresh process.

Runs the whole graph on the demo corpus with ``isolate`` (one fresh process per shard, as
pods run) and takes each stage's largest peak RSS from the run log
(:func:`~madbench_common.pipeline.measure.measure_run`). It writes under ``.bench/`` only:
``memory.json`` (per stage: peak MB, the smoke workflow's memory request now and the one
these peaks would give, :func:`~madbench_common.pipeline.argo.memory_request`) and
``throughput.csv`` (the packaged table with these peaks in its ``peak_rss_mb`` column,
its timed columns kept).

A benchmark edits no committed file. ``--write`` (``make measure-memory``), a
maintainer's deliberate step, also copies that table to
``madbench_common/data/throughput.csv`` and re-renders the workflows; commit them together
(``madbench render --check`` fails while they disagree).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.argo import VARIANTS, memory_request
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.measure import measure_run, throughput_csv, update_peaks
from madbench_common.pipeline.plan import load_throughput
from perf.results import OUT, save

REPO = Path(__file__).resolve().parents[1]

TABLE = REPO / "madbench_common" / "data" / "throughput.csv"
SOURCES = REPO / "data" / "demo" / "sources.csv"
WORKERS = int(os.environ.get("MADBENCH_BENCH_WORKERS", "2"))


def _render() -> None:
    """``madbench render`` in a fresh process (it reads the table just written)."""
    subprocess.run([sys.executable, "-m", "madbench_common.cli", "render"], cwd=REPO,
                   check=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def main(write: bool = False) -> dict[str, Any]:
    """Measure; keep the figures in ``.bench/``; with ``write``, update the committed
    table and workflows from them."""
    with tempfile.TemporaryDirectory(prefix="mb-memory-") as tmp:
        opts = RunOptions(store=tmp, run_id="mem", workers=WORKERS, progress=False,
                          isolate=True, params={"ingest": {"sources": str(SOURCES)}})
        start = time.perf_counter()
        LocalRunner(build_graph, opts).execute()
        wall = time.perf_counter() - start
        measured = measure_run(RunStore(open_store(tmp), "mem"), build_graph())
    table = update_peaks(load_throughput(TABLE), measured)
    OUT.mkdir(exist_ok=True)
    (OUT / "throughput.csv").write_text(throughput_csv(table))
    graph, smoke, proposed = build_graph(), VARIANTS["smoke"], {r.stage: r for r in table}
    stages = {r.stage: {"peak_rss_mb": r.peak_rss_mb,
                        "request_now": memory_request(graph[r.stage], smoke),
                        "request_measured": memory_request(graph[r.stage], smoke, proposed)}
              for r in measured}
    if write:
        shutil.copyfile(OUT / "throughput.csv", TABLE)
        _render()
    result = {"clips": sum(1 for _ in SOURCES.open()) - 1, "workers": WORKERS,
              "isolated_run_s": round(wall, 1), "stages": stages,
              "largest_peak_mb": max(r.peak_rss_mb for r in measured), "written": write}
    return save("memory", result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="per-stage peak memory of the demo")
    parser.add_argument("--write", action="store_true",
                        help="also write the peaks into madbench_common/data/throughput.csv "
                             "and re-render the workflows (commit both)")
    print(json.dumps(main(parser.parse_args().write), indent=1))
