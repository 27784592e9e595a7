"""Tests for `madbench plan`: task counts, estimates and their sources."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from madbench_common import cli_cluster
from madbench_common.errors import ConfigError
from madbench_common.pipeline.definition import build_graph
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.plan import (
    PAPER_CLIPS,
    PAPER_SAMPLES,
    Throughput,
    format_plan,
    load_throughput,
    plan_run,
)

ROOT = Path(__file__).resolve().parents[1]


def test_paper_scale_defaults_samples() -> None:
    plan = plan_run(build_graph(), PAPER_CLIPS)
    assert plan.samples == PAPER_SAMPLES


def test_tasks_per_stage_are_shards_plus_merge() -> None:
    plan = plan_run(build_graph(), 100)
    for s in plan.stages:
        assert s.tasks == s.stage.shards + 1
    assert plan.tasks == sum(s.shards + 1 for s in build_graph())


def test_throughput_table_has_sources_and_known_stages() -> None:
    table = load_throughput()
    names = {s.name for s in build_graph()}
    for row in table.values():
        assert row.source.strip() and row.basis in {
            "measured", "measured-cpu-ref", "assumed", "derived", "paper"}
        assert row.stage in names, f"throughput row for unknown stage {row.stage}"


def test_estimates_scale_and_count_gpu_hours() -> None:
    graph = Graph([Stage(name="a", role="core", target="m:A"),
                   Stage(name="g", role="x", target="m:G", inputs=("a",), gpu=2, shards=4)])
    table = {"a": Throughput("a", "clip", "cpu", 3.6, 10, "assumed", "s"),
             "g": Throughput("g", "sample", "gpu", 36.0, 100, "measured", "s")}
    plan = plan_run(graph, 1000, 2000, table)
    assert plan.cpu_hours == pytest.approx(1.0)
    assert plan.gpu_hours == pytest.approx(2000 * 36 / 3600 * 2)
    assert plan.storage_bytes == 1000 * 10 + 2000 * 100


def test_stage_without_row_is_reported_not_guessed() -> None:
    plan = plan_run(build_graph(), 10, table={})
    assert plan.unknown == [s.name for s in build_graph()]
    assert plan.gpu_hours == 0 and plan.storage_bytes == 0
    assert "not estimated" in format_plan(plan)


def test_bad_inputs_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        plan_run(build_graph(), 0)
    bad = tmp_path / "t.csv"
    bad.write_text("stage,unit,device,seconds_per_item,bytes_per_item,basis,source\n"
                   "ingest,frame,cpu,1,1,assumed,x\n")
    with pytest.raises(ConfigError, match="unit"):
        load_throughput(bad)


def test_cli_plan_prints_table_and_sources(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    cli_cluster.add_commands(parser.add_subparsers())
    args = parser.parse_args(["plan", "--clips", str(PAPER_CLIPS)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"{PAPER_CLIPS} eligible clips, {PAPER_SAMPLES} samples" in out
    assert "sources:" in out and "total" in out


def test_readme_shows_the_current_paper_scale_plan() -> None:
    """Golden: the README's plan is exactly what the current graph and table print."""
    from madbench_common.plan import format_plan, plan_run

    doc = (ROOT / "README.md").read_text()
    assert f"$ madbench plan --clips {PAPER_CLIPS}\n" in doc
    assert format_plan(plan_run(build_graph(), PAPER_CLIPS)) in doc, (
        "README plan is stale: paste the output of `madbench plan --clips 1892`")
