"""Stage profiles: references by default, the paper's models in the ``full`` workflow."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.argo import (
    VARIANTS,
    ClusterProfile,
    ImageLock,
    compile_workflow,
    workflow_yaml,
)
from madbench_common.pipeline.graph import Graph, Stage
from tests.paths import LOCK


def _graph() -> Graph:
    return Graph([
        Stage(name="ingest", role="core", target="x:Ingest"),
        Stage(name="qc", role="vad+asr", target="x:QC", inputs=("ingest",),
              model="ref-silero-vad+ref-pocketsphinx", memory="4Gi",
              params={"vad": "ref-silero-vad", "asr": "ref-pocketsphinx", "min": 0.3},
              full={"image": "base-py311", "gpu": 1, "memory": "16Gi",
                    "model": "qc-silero-vad+qc-whisper",
                    "params": {"vad": "qc-silero-vad", "asr": "qc-whisper"}}),
        Stage(name="sep", role="separator", target="x:Sep", inputs=("ingest",),
              model="ref-deepfilternet3", full={"model": "sep-x", "image": "base-py311"}),
    ])


def _doc(variant: str) -> dict[str, Any]:
    wf = compile_workflow(_graph(), VARIANTS[variant], ImageLock.load(LOCK), ClusterProfile())
    data: dict[str, Any] = yaml.safe_load(workflow_yaml(wf))
    return data


def _params_json(doc: dict[str, Any], template: str) -> dict[str, Any]:
    args = {t["name"]: t for t in doc["spec"]["templates"]}[template]["container"]["args"]
    raw = args[args.index("--params-json") + 1]
    return dict(json.loads(raw))


def test_in_profile_merges_params_and_keeps_the_embedded_defaults() -> None:
    qc = _graph()["qc"]
    full = qc.in_profile("full")
    assert (full.image, full.gpu, full.memory) == ("base-py311", 1, "16Gi")
    assert full.params == {"vad": "qc-silero-vad", "asr": "qc-whisper", "min": 0.3}
    assert qc.in_profile("embedded") is qc
    assert qc.params["asr"] == "ref-pocketsphinx" and qc.image == "reference-cpu"
    images = [s.image for s in _graph().profiled("full")]
    assert images == ["reference-cpu", "base-py311", "base-py311"]


def test_profile_rejects_wiring_overrides_and_unknown_profiles() -> None:
    with pytest.raises(ConfigError, match="cannot set"):
        Graph([Stage(name="a", role="core", target="x:Y", full={"inputs": ("b",)})])
    with pytest.raises(ConfigError, match="unknown profile"):
        _graph()["qc"].in_profile("gpu")


def test_full_workflow_runs_the_profile_and_smoke_the_references() -> None:
    lock = ImageLock.load(LOCK)
    full, smoke = _doc("full"), _doc("smoke")
    values = {v: {p["name"]: p["value"] for p in d["spec"]["arguments"]["parameters"]}
              for v, d in (("full", full), ("smoke", smoke))}
    assert values["full"]["qc_image"] == lock.ref("base-py311")
    assert values["full"]["sep_model"] == "sep-x"
    assert values["smoke"]["qc_image"] == lock.ref("reference-cpu")
    assert values["smoke"]["sep_model"] == "ref-deepfilternet3"
    # the pod's embedded graph holds the reference params: the full workflow passes its own
    assert _params_json(full, "qc-shard") == {"asr": "qc-whisper", "vad": "qc-silero-vad"}
    assert "--params-json" not in {t["name"]: t for t in smoke["spec"]["templates"]}[
        "qc-shard"]["container"]["args"]
    shard = {t["name"]: t for t in full["spec"]["templates"]}["qc-shard"]
    assert shard["container"]["resources"]["limits"] == {"memory": "16Gi",
                                                          "nvidia.com/gpu": "1"}


def test_madbench_full_profile_runs_registered_models_on_their_images() -> None:
    from madbench_common.benchmarks.madbench.graph import build_graph
    from madbench_common.models.registry import REGISTRY

    embedded, full = build_graph(), build_graph().profiled("full")
    assert full["separate"].model == "separator-mossformer2"
    assert full["source_qc"].params["asr"] == "qc-whisper"
    assert full["component_qc"].params["speaker"] == "qc-ecapa"
    for stage in full:
        slugs = [s for s in stage.model.split("+") if s]
        slugs += [stage.params[k] for k in ("vad", "asr", "speaker", "tagger", "prompt_model")
                  if stage.params.get(k)]
        for slug in slugs:
            assert REGISTRY[slug].image == stage.image, (stage.name, slug)
    for stage in embedded:  # the embedded run and smoke.yaml stay on the CPU references
        slugs = [s for s in stage.model.split("+") if s]
        assert all(REGISTRY[s].reference for s in slugs), stage.name
        assert stage.image == "reference-cpu"
