"""evaluate reads every features and scores stage of the graph, whoever declares them."""

from __future__ import annotations

from madbench_common.pipeline.definition import _wire_evaluate, build_graph
from madbench_common.pipeline.graph import Stage


def test_evaluate_depends_on_every_model_stage() -> None:
    graph = build_graph()
    assert graph.stages["evaluate"].inputs == ("assemble", "features")
    extra = [Stage("features_pe_av", "encoder", "x:Y", ("assemble",), ("features",)),
             Stage("omni_qwen", "omni", "x:Y", ("assemble",), ("scores",)),
             Stage("component_qc", "core", "x:Y", (), ("components",))]
    stages = _wire_evaluate([*graph.stages.values(), *extra])
    evaluate = next(s for s in stages if s.name == "evaluate")
    assert evaluate.inputs == ("assemble", "features", "features_pe_av", "omni_qwen")
