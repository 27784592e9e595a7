"""evaluate reads every features and scores stage of the graph, whoever declares them."""

from __future__ import annotations

from madbench_common.benchmarks.madbench.graph import _wire_evaluate, build_graph
from madbench_common.pipeline.graph import Stage


def test_evaluate_depends_on_every_model_stage() -> None:
    graph = build_graph()
    feeds = tuple(s.name for s in graph.stages.values()
                  if s.name != "evaluate" and s.outputs[:1] in (("features",), ("scores",)))
    assert "features" in feeds and "features_enc_tf5_pe_av_base" in feeds
    assert {"features_references", "scores_references"} <= set(feeds)
    # the clean samples, the robustness conditions' samples, every model
    assert graph.stages["evaluate"].inputs == ("assemble", "perturb", *feeds)
    assert all("perturb" in graph.stages[f].inputs for f in feeds if f.startswith("features"))
    extra = [Stage("features_pe_av", "encoder", "x:Y", ("assemble",), ("features",)),
             Stage("omni_qwen", "omni", "x:Y", ("assemble",), ("scores",)),
             Stage("component_qc", "core", "x:Y", (), ("components",))]
    stages = _wire_evaluate([*graph.stages.values(), *extra])
    evaluate = next(s for s in stages if s.name == "evaluate")
    assert evaluate.inputs == ("assemble", "perturb", *feeds, "features_pe_av", "omni_qwen")
