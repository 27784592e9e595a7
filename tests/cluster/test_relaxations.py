"""The departures from Argo a rehearsal applies (madbench_common.cluster.relaxations),
read from the rendered workflow and the parameters submitted with it."""

from __future__ import annotations

import json
from pathlib import Path

from madbench_common.cluster.argo_local import Workflow
from madbench_common.cluster.relaxations import relaxations

ROOT = Path(__file__).resolve().parents[2]


def test_full_yaml_as_the_rehearsal_submits_it() -> None:
    wf = Workflow.load(ROOT / "workflows" / "full.yaml")
    shards = {k: "2" for k in wf.parameters() if k.endswith("_shards")}
    params = {**shards, "stage_params": json.dumps({"source_qc": {"max_clip_fraction": 1.0}})}
    out = {r.name: r for r in relaxations(wf, params, cpu_deadline_scale=6, workers=2)}
    assert set(out) == {"shards", "gpu_on_cpu", "gpu_deadline_scale", "workers",
                        "stage_params", "cluster_only"}
    changed = out["shards"].detail["changed"]
    assert changed and all(v["local"] == "2" and v["workflow"] != "2" for v in changed.values())
    assert "separate-shard" in out["gpu_deadline_scale"].detail["templates"]
    assert out["gpu_deadline_scale"].detail["scale"] == 6
    assert out["stage_params"].detail == {"stages": ["source_qc"]}
    fields = out["cluster_only"].detail["fields"]
    assert {"template.nodeSelector", "spec.podGC", "spec.ttlStrategy",
            "resources.requests", "container.imagePullPolicy"} <= set(fields)
    assert all(isinstance(r.as_dict()["local"], str) for r in out.values())


def test_smoke_yaml_without_gpus_or_changes_states_only_what_applies() -> None:
    wf = Workflow.load(ROOT / "workflows" / "smoke.yaml")
    out = {r.name for r in relaxations(wf, {}, cpu_deadline_scale=6, stop_on_failure=True,
                                       backoff_scale=0.01)}
    assert out == {"stop_on_failure", "backoff_scale", "cluster_only"}
