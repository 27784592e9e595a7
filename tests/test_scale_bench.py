"""The scale benchmark's synthetic graph stays the real graph's shape."""

from __future__ import annotations

import functools
from pathlib import Path

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.stage import load_impl, read_marker
from perf.bench_scale import FLAT_RATIO, merge_in_fresh_process, merge_memory_ratio
from perf.synthstages import PAPER_SAMPLE_ROWS, paper_counts, synthetic_graph

ROOT = Path(__file__).resolve().parents[1]


def test_counts_follow_the_paper_and_the_full_graph() -> None:
    full = build_graph().profiled("full")
    counts = paper_counts(full)
    assert set(counts) == set(full.order)
    assert counts["ingest"] == 1892 and counts["assemble"] == PAPER_SAMPLE_ROWS == 49_608
    speech = sum(counts[s.name] for s in full if s.role == "speech_generator")
    env = sum(counts[s.name] for s in full if s.role == "env_generator")
    assert (speech, env) == (34_056 - 34_056 % 6, 22_987 - 22_987 % 6)  # Table 1, per setting
    assert counts["features_enc_imagebind"] == 3 * PAPER_SAMPLE_ROWS  # A, AV paired, shuffled
    assert counts["features_enc_msclap"] == PAPER_SAMPLE_ROWS  # audio only
    assert counts["scores_det_df_arena"] == counts["features_det_df_arena"]


def test_synthetic_graph_mirrors_the_real_one() -> None:
    real = build_graph().profiled("full")
    synth = synthetic_graph(real, scale=0.001)
    assert synth.order == real.order
    for stage in real:
        twin = synth[stage.name]
        assert (twin.inputs, twin.shards) == (stage.inputs, stage.shards)
        assert load_impl(twin.target).row_type is load_impl(stage.target).row_type


def _tiny() -> Graph:
    return synthetic_graph(build_graph().profiled("full"), scale=0.001)


def test_synthetic_graph_runs_through_the_runner(tmp_path: Path) -> None:
    opts = RunOptions(store=str(tmp_path), run_id="s", progress=False, until="plan_components")
    reports = LocalRunner(functools.partial(_tiny), opts).execute()
    assert [r.stage for r in reports] == [s.name for s in build_graph().until("plan_components")]
    run = RunStore(open_store(str(tmp_path)), "s")
    marker = read_marker(run, "plan_components")
    assert marker is not None and marker["rows"] == round(57_043 * 0.001)
    rows = read_manifest_bytes(load_impl(_tiny()["plan_components"].target).row_type,
                               run.get_bytes("plan_components/manifest.parquet"))
    assert all(r.uri and not r.uri.startswith(("file:", "s3:", "/")) for r in rows)


def test_the_merge_memory_figure_is_the_merge_s_own(tmp_path: Path) -> None:
    """The shard sweep measures a merge in a process of its own (not the runner's peak):
    the same manifest, byte for byte, and its growth apart from where it started."""
    opts = RunOptions(store=str(tmp_path), run_id="s", progress=False, until="assemble",
                      shards={"assemble": 3})
    LocalRunner(_tiny, opts).execute()
    marker = read_marker(RunStore(open_store(str(tmp_path)), "s"), "assemble")
    alone = merge_in_fresh_process(str(tmp_path), "s", _tiny, "assemble", 3)
    assert marker is not None and alone.sha256 == marker["manifest_sha256"]
    assert 0 < alone.own_mb < alone.start_mb < alone.peak_mb
    flat, steep = [{"merge_own_mb": 100.0}, {"merge_own_mb": 110.0}], [{"merge_own_mb": 130.0}]
    assert merge_memory_ratio(flat) <= FLAT_RATIO < merge_memory_ratio(flat + steep)
