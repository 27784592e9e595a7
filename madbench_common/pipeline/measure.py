"""Measure a finished local run into throughput rows for ``madbench plan``.

:func:`measure_run` turns the run log into per-item costs, bytes and peak memory per stage.
Rows are labelled with where and how they were measured; generator stages run their CPU
references here, so their figures say nothing about the real models' GPU time.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import platform
from datetime import date

from madbench_common.core.store import RunStore
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.plan import Throughput
from madbench_common.pipeline.stage import read_marker

__all__ = ["measure_run", "throughput_csv", "update_peaks"]

_PER_SOURCE = ("ingest", "separate", "source_qc")
_PER_SAMPLE = ("assemble", "features", "evaluate")
_FIELDS = ("stage", "unit", "device", "seconds_per_item", "bytes_per_item", "basis", "source",
           "peak_rss_mb")


def _stage_seconds(run: RunStore) -> tuple[dict[str, float], dict[str, int], int]:
    """Core-seconds and peak RSS per stage over every run log (first non-skipped record
    wins), and the worker count."""
    seconds: dict[str, float] = {}
    peaks: dict[str, int] = {}
    workers = 1
    for key in run.list("_logs"):
        if not key.startswith("_logs/run-"):
            continue  # per-pod logs of Argo runs (_logs/stage/...) have no worker count
        record = json.loads(run.get_bytes(key))
        workers = max(workers, int(record["workers"]))
        for s in record["stages"]:
            if not s["skipped"] and s["stage"] not in seconds:
                seconds[s["stage"]] = float(s["seconds"]) * int(record["workers"])
                peaks[s["stage"]] = int(s.get("peak_rss", 0))
    return seconds, peaks, workers


def _bytes_written(run: RunStore, stage: str) -> int:
    marker = read_marker(run, stage)
    if marker is None:
        return 0
    return sum(len(run.get_bytes(k)) for k in run.list(marker["prefix"]))


def _denominators(run: RunStore) -> dict[str, int]:
    counts = {}
    for stage in ("ingest", "split", "assemble"):
        marker = read_marker(run, stage)
        counts[stage] = 0 if marker is None else int(marker["rows"]) - int(marker["rejected"])
    return counts


def measure_run(run: RunStore, graph: Graph, where: str = "") -> list[Throughput]:
    """Throughput rows for every stage of ``graph`` that ran in ``run``.

    A stage's cost is its wall time from the run log times the worker count
    (core-seconds), divided by the items it is planned per: source clips before the split,
    eligible clips after it, and benchmark samples from assembly on. Bytes are what the
    stage wrote under its prefix. ``peak_rss_mb`` is the largest peak resident memory of
    one of its shards or its merge (measure a run made with ``--isolate-shards`` so each
    shard's peak is its own)."""
    seconds, peaks, workers = _stage_seconds(run)
    counts = _denominators(run)
    where = where or f"{platform.machine()} CPU"
    rows = []
    for stage in graph:
        if stage.name not in seconds:
            continue
        unit, n = _unit(stage.name, counts)
        if n == 0:
            continue
        ref = " with the CPU reference model" if stage.gpu else ""
        source = (f"measured {date.today().isoformat()}: run {run.run_id}, {n} {unit}s, "
                  f"{workers} workers on {where}{ref}; core-seconds = wall x workers")
        rows.append(Throughput(stage.name, unit, "cpu", round(seconds[stage.name] / n, 4),
                               _bytes_written(run, stage.name) // n,
                               "measured-cpu-ref" if stage.gpu else "measured", source,
                               -(-peaks.get(stage.name, 0) // 2**20)))
    return rows


def _unit(stage: str, counts: dict[str, int]) -> tuple[str, int]:
    if stage in _PER_SOURCE:
        return "clip", counts["ingest"]
    if stage in _PER_SAMPLE:
        return "sample", counts["assemble"]
    return "clip", counts["split"]


def throughput_csv(rows: list[Throughput]) -> str:
    """The rows in the committed table's CSV format."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({f: getattr(r, f) for f in _FIELDS})
    return buf.getvalue()


def update_peaks(table: dict[str, Throughput], measured: list[Throughput]) -> list[Throughput]:
    """``table`` with each stage's ``peak_rss_mb`` from ``measured`` (other columns kept:
    timings measured on a quiet machine stay valid while memory is re-measured)."""
    peaks = {r.stage: r.peak_rss_mb for r in measured if r.peak_rss_mb}
    return [dataclasses.replace(row, peak_rss_mb=peaks.get(row.stage, row.peak_rss_mb))
            for row in table.values()]
