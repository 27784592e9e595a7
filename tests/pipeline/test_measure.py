"""measure: run logs + markers → throughput rows that plan can load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from madbench_common.core.store import FileStore, RunStore
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.measure import measure_run, throughput_csv, update_peaks
from madbench_common.pipeline.plan import load_throughput


def _graph() -> Graph:
    return Graph([Stage(name=n, role="core", target="m:C", gpu=int(n == "gen"))
                  for n in ("ingest", "split", "gen", "assemble")])


def _marker(run: RunStore, stage: str, rows: int, rejected: int, payload: int) -> None:
    prefix = f"{stage}/abc"
    run.put_bytes(f"{prefix}/data.bin", b"x" * payload)
    run.put_bytes(f"{stage}/_SUCCESS", json.dumps(
        {"prefix": prefix, "rows": rows, "rejected": rejected}).encode())


def test_measure_normalises_per_planned_unit(tmp_path: Path) -> None:
    run = RunStore(FileStore(tmp_path), "r")
    _marker(run, "ingest", 10, 2, 800)
    _marker(run, "split", 4, 0, 40)
    _marker(run, "gen", 4, 0, 400)
    _marker(run, "assemble", 16, 0, 1600)
    stages = [{"stage": "ingest", "seconds": 4.0, "skipped": False},
              {"stage": "split", "seconds": 1.0, "skipped": False},
              {"stage": "gen", "seconds": 2.0, "skipped": False},
              {"stage": "assemble", "seconds": 8.0, "skipped": False}]
    run.put_bytes("_logs/run-1.json", json.dumps({"workers": 2, "stages": stages}).encode())
    rows = {r.stage: r for r in measure_run(run, _graph(), "test box")}
    assert rows["ingest"].unit == "clip" and rows["ingest"].seconds_per_item == pytest.approx(1.0)
    assert rows["ingest"].bytes_per_item == 100  # 8 accepted source clips
    assert rows["split"].seconds_per_item == pytest.approx(0.5)  # per eligible clip
    assert rows["gen"].basis == "measured-cpu-ref" and "CPU reference" in rows["gen"].source
    assert rows["assemble"].unit == "sample" and rows["assemble"].seconds_per_item == 1.0
    out = tmp_path / "t.csv"
    out.write_text(throughput_csv(list(rows.values())))
    assert load_throughput(out) == rows


def test_peak_rss_from_run_logs_updates_only_that_column(tmp_path: Path) -> None:
    run = RunStore(FileStore(tmp_path), "r")
    _marker(run, "ingest", 10, 0, 800)
    stages = [{"stage": "ingest", "seconds": 4.0, "skipped": False, "peak_rss": 300 << 20},
              {"stage": "split", "seconds": 1.0, "skipped": True, "peak_rss": 0}]
    run.put_bytes("_logs/run-1.json", json.dumps({"workers": 2, "stages": stages}).encode())
    run.put_bytes("_logs/stage/ingest/run-0-x.json", json.dumps({"peak_rss": 1}).encode())
    measured = measure_run(run, _graph(), "box")
    assert measured[0].peak_rss_mb == 300
    table = load_throughput()
    updated = {r.stage: r for r in update_peaks(table, measured)}
    assert updated["ingest"].peak_rss_mb == 300
    assert updated["ingest"].seconds_per_item == table["ingest"].seconds_per_item
    assert updated["separate"] == table["separate"]
