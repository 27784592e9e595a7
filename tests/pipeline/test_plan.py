"""Tests for `madbench plan`: task counts, estimates and their sources."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cli import cluster as cli_cluster
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.plan import (
    PAPER_CLIPS,
    PAPER_SAMPLES,
    Plan,
    Throughput,
    format_plan,
    image_pull_line,
    load_throughput,
    plan_run,
)
from tests.readme_section import check_readme_section


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
    plan = plan_run(build_graph(), 10, table={}, gpu_table={})
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


def test_readme_shows_the_current_paper_scale_plan(tmp_path: Path) -> None:
    """The README's plan is generated between its markers (``madbench render``), and
    ``render --check`` reports it stale once the graph's plan differs."""
    from madbench_common.cli.cluster import PLAN_BEGIN, PLAN_END, readme_plan, render_readme_plan

    check_readme_section(tmp_path, render_readme_plan, PLAN_BEGIN, PLAN_END, readme_plan())


def test_every_model_stage_has_gpu_figures_and_no_question_marks() -> None:
    from madbench_common.pipeline.gpuplan import load_gpu_models

    gpu = load_gpu_models()
    names = {s.name for s in build_graph()}
    assert set(gpu) <= names, f"GPU rows for unknown stages: {set(gpu) - names}"
    for plan in (plan_run(build_graph(), PAPER_CLIPS),
                 plan_run(build_graph().profiled("full"), PAPER_CLIPS)):
        _check_gpu_figures(plan)


def _check_gpu_figures(plan: Plan) -> None:
    for s in plan.stages:
        if s.stage.model:
            assert s.gpu is not None, f"{s.stage.name}: no gpu figures on its cards"
            assert s.gpu.memory_gb > 1.5 and s.gpu.seconds_per_item > 0.5
            assert s.gpu.status in {"estimated", "measured"} and s.gpu.source.strip()
        if s.stage.gpu:
            assert s.gpu_hours > 0 and s.cpu_hours == 0
    text = format_plan(plan)
    assert "?" not in text.split("\nsources:")[0]
    assert "estimated" in text


def test_gpu_estimate_follows_size_and_steps(tmp_path: Path) -> None:
    from madbench_common.pipeline.gpuplan import load_gpu_models

    csv = tmp_path / "g.csv"
    head = ("model,stages,params_m,step_params_m,bytes_per_param,steps,passes,frames,status,"
            "gpu_mem_gb,gpu_s_per_item,source\n")
    csv.write_text(head + "M,a;b,1000,500,2,10,2,1000,estimated,,,s\n"
                          "N,c,10,10,4,1,1,1,measured,3.5,7.25,run\n")
    rows = load_gpu_models(csv)
    est = rows["a"].figure()
    assert rows["b"] is rows["a"]
    assert est.memory_gb == pytest.approx(1000e6 * 2 * 1.25 / 1e9 + 1.5)
    step = max(2e6 * 500 * 1000 * 2 / (312e12 * 0.25), 500e6 * 2 / (2.0e12 * 0.6))
    once = 2e6 * 500 * 1000 / (312e12 * 0.25)
    assert est.seconds_per_item == pytest.approx(10 * step + once + 0.5)
    more = rows["a"].__class__(**{**rows["a"].__dict__, "steps": 20}).figure()
    assert more.seconds_per_item > est.seconds_per_item
    measured = rows["c"].figure()
    assert (measured.memory_gb, measured.seconds_per_item, measured.status) == (3.5, 7.25,
                                                                                 "measured")
    for bad in ("M,a,10,20,2,1,1,1,estimated,,,s\n", "M,a,10,10,3,1,1,1,estimated,,,s\n",
                "M,a,10,10,2,1,1,1,measured,,,s\n", "M,a,10,10,2,1,1,1,estimated,,,\n",
                "M,a,10,10,2,1,1,1,estimated,,,s\nN,a,10,10,2,1,1,1,estimated,,,s\n"):
        csv.write_text(head + bad)
        with pytest.raises(ConfigError):
            load_gpu_models(csv)


def test_gpu_stage_time_is_gpu_time_in_the_plan() -> None:
    graph = Graph([Stage(name="a", role="core", target="m:A"),
                   Stage(name="g", role="x", target="m:G", inputs=("a",), gpu=1, model="m1")])
    from madbench_common.pipeline.gpuplan import GpuModel

    gpu = {"g": GpuModel("M", ("g",), 100, 100, 2, 1, 1, 1, "measured", 2.0, 36.0, "run")}
    table = {"g": Throughput("g", "clip", "cpu", 3600.0, 10, "measured-cpu-ref", "s")}
    plan = plan_run(graph, 100, table=table, gpu_table=gpu)
    g = plan.stages[1]
    assert g.gpu_hours == pytest.approx(1.0) and g.cpu_hours == 0
    assert plan.gpu_hours == pytest.approx(1.0)


def test_stage_without_row_after_assemble_counts_samples() -> None:
    from madbench_common.pipeline.gpuplan import GpuModel

    graph = Graph([Stage(name="assemble", role="core", target="m:A"),
                   Stage(name="f", role="x", target="m:F", inputs=("assemble",)),
                   Stage(name="o", role="x", target="m:O", inputs=("f",), gpu=1, model="m1"),
                   Stage(name="c", role="x", target="m:C", gpu=1, model="m2")])
    row = GpuModel("M", ("o", "c"), 100, 100, 2, 1, 1, 1, "measured", 2.0, 36.0, "run")
    plan = plan_run(graph, 100, 1000, table={}, gpu_table={"o": row, "c": row})
    by = {s.stage.name: s for s in plan.stages}
    assert (by["o"].items, by["o"].unit) == (1000, "sample")
    assert (by["c"].items, by["c"].unit) == (100, "clip")
    assert by["o"].gpu_hours == pytest.approx(10.0) and by["f"].gpu_hours == 0
    assert "1000 samples" in format_plan(plan)


def test_cli_plans_the_full_profile_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """The paper graph: every omni and per-model feature stage has GPU-hours (the CPU
    references' features_references stage is empty in the full profile)."""
    parser = argparse.ArgumentParser()
    cli_cluster.add_commands(parser.add_subparsers())
    full = plan_run(build_graph().profiled("full"), PAPER_CLIPS)
    for s in full.stages:
        if s.stage.name.startswith(("omni_", "features_")) and s.stage.name not in (
                "features", "features_references"):
            assert s.gpu is not None and s.gpu_hours > 0 and s.unit == "sample", s.stage.name
    for profile, plan in (("full", full), ("embedded", plan_run(build_graph(), PAPER_CLIPS))):
        args = parser.parse_args(["plan", "--clips", str(PAPER_CLIPS), "--profile", profile])
        assert args.func(args) == 0
        out = capsys.readouterr().out
        assert out.startswith(format_plan(plan))
        assert out.endswith(image_pull_line(plan_graph(profile)))


def plan_graph(profile: str) -> Graph:
    graph = build_graph()
    return graph.profiled(profile) if profile == "full" else graph


def test_pull_line_counts_shared_layers_once(tmp_path: Path) -> None:
    """What a node pulls: every distinct layer once; the sum of sizes counts each image's."""
    import yaml

    base = ["sha256:" + "a" * 64 + " 1000000000", "sha256:" + "b" * 64 + " 3000000000"]
    lock = {"version": 1, "images": {
        "m1": {"status": "built", "build": {"layers": [*base, "sha256:" + "c" * 64 + " 5"]}},
        "m2": {"status": "built", "build": {"layers": [*base, "sha256:" + "d" * 64 + " 7"]}},
        "m3": {"status": "tagged"}}}
    path = tmp_path / "images.lock.yaml"
    path.write_text(yaml.safe_dump(lock))
    graph = Graph([Stage(name=f"s{i}", role="core", target="m:S", image=f"m{i}")
                   for i in (1, 2, 3)])
    line = image_pull_line(graph, path)
    assert "pulls 4.0 GB" in line and "2 images whose sizes sum to 8.0 GB" in line
    assert "(50%;" in line and "not counted: m3" in line


def test_a_gpu_stage_is_sized_from_its_figure_with_the_stated_margins() -> None:
    from madbench_common.pipeline.plan import (
        DEADLINE_FLOOR,
        DEADLINE_MARGIN,
        MAX_SHARDS,
        SHARD_TIMEOUT_SHARE,
        START_SECONDS,
        size_stage,
    )

    stage = Stage(name="g", role="x", target="m:G", gpu=1, shards=2, timeout=3600,
                  gpu_memory_gib=10)
    room = 3600 - START_SECONDS
    shards, deadline, memory = size_stage(stage, 4 * room, "estimated", 20.0)
    assert shards == 4 * DEADLINE_MARGIN["estimated"]
    assert deadline == 3600 and memory == 19  # 20 GB = 18.6 GiB; at least the card's 10
    shards, deadline, _ = size_stage(stage, 4 * room, "measured", 20.0)
    assert shards == 6 and deadline <= 3600  # a measured figure needs less margin
    assert DEADLINE_MARGIN["measured"] * 4 * room / shards + START_SECONDS <= deadline
    assert size_stage(stage, 4 * room, "measured", 20.0)[2] == 23  # 20 GB x 1.2 = 22.4 GiB
    assert size_stage(stage, 60.0, "estimated", 1.0)[:2] == (2, DEADLINE_FLOOR)
    huge = size_stage(stage, 1000 * room, "estimated", None)
    assert huge[0] == MAX_SHARDS and huge[1] > stage.timeout and huge[2] == 10
    assert huge[1] >= DEADLINE_MARGIN["estimated"] * 1000 * room / MAX_SHARDS
    cpu = Stage(name="c", role="x", target="m:C", shards=2, timeout=3600)
    assert size_stage(cpu, 10 * 3600.0, "", None) == (
        math.ceil(10 / SHARD_TIMEOUT_SHARE), 3600, 0)


def test_the_paper_scale_plan_has_no_shard_over_its_deadline() -> None:
    plan = plan_run(build_graph().profiled("full"), PAPER_CLIPS)
    assert not [s.stage.name for s in plan.stages if s.over_deadline]
    # the derived deadline stays within the stage's timeout: no stage sits at the shard cap
    # with its shards past what its template allows
    assert not [(s.stage.name, s.deadline, s.stage.timeout) for s in plan.stages
                if s.deadline > s.stage.timeout]
    text = format_plan(plan)
    assert "over its deadline" not in text and "GPU-h by figure: measured" in text
    for s in plan.stages:
        if s.figure_status:
            assert s.tasks == s.shards + 1 and s.deadline >= s.shard_seconds
            assert f"  {s.stage.name:<28}{s.figure_status:<10}{s.shards:>6}" in text


def test_measured_and_estimated_figures_are_shown_apart() -> None:
    from madbench_common.pipeline.gpuplan import GpuModel

    graph = Graph([Stage(name="m", role="x", target="m:M", gpu=1, model="a"),
                   Stage(name="e", role="x", target="m:E", gpu=1, model="b")])
    gpu = {"m": GpuModel("A", ("m",), 100, 100, 2, 1, 1, 1, "measured", 2.0, 3.6, "run"),
           "e": GpuModel("B", ("e",), 100, 100, 2, 1, 1, 1, "estimated", None, 10.8, "size",
                         basis="an H200 run")}
    plan = plan_run(graph, 1000, table={}, gpu_table=gpu)
    text = format_plan(plan)
    assert "GPU-h by figure: measured 1.00 (1 stages), estimated 3.00 (1 stages); " \
           "measured share 25%." in text
    measured, estimated = text.index("  measured GPU figures:"), text.index(
        "  estimated GPU figures:")
    assert measured < text.index("  m GPU (A): run") < estimated < text.index(
        "  e GPU (B): size; basis: an H200 run")


def test_an_estimate_that_gives_its_figures_states_its_basis(tmp_path: Path) -> None:
    from madbench_common.pipeline.gpuplan import load_gpu_models

    csv = tmp_path / "g.csv"
    head = ("model,stages,params_m,step_params_m,bytes_per_param,steps,passes,frames,status,"
            "gpu_mem_gb,gpu_s_per_item,source,basis\n")
    csv.write_text(head + "M,a,1000,1000,2,1,1,1,estimated,,1.32,s,H200 x 1\n")
    figure = load_gpu_models(csv)["a"].figure()
    assert figure.seconds_per_item == 1.32 and figure.status == "estimated"
    assert figure.memory_gb == pytest.approx(1000e6 * 2 * 1.25 / 1e9 + 1.5)
    csv.write_text(head + "M,a,1000,1000,2,1,1,1,estimated,,1.32,s,\n")
    with pytest.raises(ConfigError, match="states its basis"):
        load_gpu_models(csv)
