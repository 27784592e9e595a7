"""Argo limits at the paper's scale and memory requests from measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.pipeline import argo
from madbench_common.pipeline.argo_limits import ETCD_LIMIT_BYTES, node_bytes, workflow_limits
from madbench_common.pipeline.graph import Stage
from madbench_common.pipeline.plan import (
    DEADLINE_MARGIN,
    MEMORY_MARGIN,
    PAPER_CLIPS,
    SHARD_TIMEOUT_SHARE,
    Throughput,
    plan_run,
)
from tests.yaml_docs import load_yaml

ROOT = Path(__file__).resolve().parents[2]


def _full() -> dict[str, Any]:
    doc: dict[str, Any] = load_yaml(ROOT / "workflows" / "full.yaml")
    return doc


def test_full_workflow_at_paper_scale_fits_etcd() -> None:
    graph = build_graph()
    limits = workflow_limits(_full(), graph, {})
    by = {s.stage: s for s in limits.stages}
    assert by["separate"].pods == graph["separate"].shards + 1 and by["split"].pods == 2
    assert limits.pods == sum(s.pods for s in limits.stages) + 1  # + the exit handler
    assert limits.object_bytes < 0.5 * ETCD_LIMIT_BYTES  # room for retried pods
    assert limits.max_concurrent_pods >= 12  # the twelve generator stages overlap
    raised = {s.stage for s in limits.stages if s.shards > graph[s.stage].shards}
    full_gpu = {s.name for s in graph.profiled("full") if s.gpu}  # e.g. scene: Qwen2.5-VL-32B
    assert raised and raised <= full_gpu  # slow GPU stages only
    templates = {t["name"]: t for t in _full()["spec"]["templates"]}
    for stage in plan_run(graph.profiled("full"), PAPER_CLIPS).stages:
        seconds = stage.compute_hours * 3600 / by[stage.stage.name].shards
        shard = templates[f"{stage.stage.name.replace('_', '-')}-shard"]
        deadline = int(shard["activeDeadlineSeconds"])
        assert deadline == stage.deadline, stage.stage.name
        margin = DEADLINE_MARGIN.get(stage.figure_status, 1 / SHARD_TIMEOUT_SHARE)
        assert margin * seconds <= deadline, stage.stage.name  # no shard near its deadline
        if stage.figure_status:  # a GPU stage sized from its figure: a GPU that holds it
            assert stage.gpu is not None and stage.gpu_memory_gib * 2**30 >= \
                stage.gpu.memory_gb * 1e9 * MEMORY_MARGIN[stage.figure_status]


def test_smoke_workflow_keeps_the_stages_shard_counts() -> None:
    doc = load_yaml(ROOT / "workflows" / "smoke.yaml")
    limits = workflow_limits(doc, build_graph(), {})
    assert all(s.shards == (build_graph()[s.stage].shards if build_graph()[s.stage].sharded
                            else 1) for s in limits.stages)


def test_many_shards_outgrow_etcd_without_compression() -> None:
    """Why shard counts stay modest: at 64 shards a stage the node status alone passes
    etcd's limit (Argo must then compress or offload it)."""
    graph = build_graph()
    many = workflow_limits(_full(), graph, {s.name: 64 for s in graph if s.sharded})
    assert many.object_bytes > ETCD_LIMIT_BYTES
    assert 300 < node_bytes("speech_tts_same_a", 12, "Pod") < 1500


def test_memory_requests_come_from_the_measured_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    row = Throughput("s", "clip", "cpu", 1.0, 1, "measured", "test", peak_rss_mb=700)
    monkeypatch.setattr(argo, "_measured", lambda: {"s": row})
    stage = Stage(name="s", role="core", target="x:Y", memory="8Gi")
    assert argo.memory_request(stage, argo.VARIANTS["smoke"]) == "1280Mi"  # 1050 → 1280
    # full runs the paper's scale: a peak measured on the demo never sets its requests,
    # on the reference image (here) or a model's
    assert argo.memory_request(stage, argo.VARIANTS["full"]) == "8Gi"
    gpu = Stage(name="s", role="core", target="x:Y", memory="8Gi", image="tts-f5")
    assert argo.memory_request(gpu, argo.VARIANTS["full"]) == "8Gi"
    small = Throughput("s", "clip", "cpu", 1.0, 1, "measured", "test", peak_rss_mb=90)
    assert argo.memory_request(stage, argo.VARIANTS["smoke"], {"s": small}) == "512Mi"
    assert argo.memory_request(stage, argo.VARIANTS["smoke"], {}) == "8Gi"  # not measured


def test_rendered_requests_match_the_table() -> None:
    table = argo._measured()
    for variant in ("full", "smoke"):
        doc = load_yaml(ROOT / "workflows" / f"{variant}.yaml")
        templates = {t["name"]: t for t in doc["spec"]["templates"]}
        graph = build_graph().profiled("full") if variant == "full" else build_graph()
        for stage in graph:
            shard = templates[f"{stage.name.replace('_', '-')}-shard"]
            memory = shard["container"]["resources"]["requests"]["memory"]
            assert memory == argo.memory_request(stage, argo.VARIANTS[variant]), stage.name
            if variant == "smoke" and table.get(stage.name) and table[stage.name].peak_rss_mb:
                assert memory.endswith("Mi"), stage.name
