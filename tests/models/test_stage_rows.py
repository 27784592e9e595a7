"""The fixture the adapter venvs run their model stages on (``stage_rows``), checked in the
main venv: CI cannot run those venvs, and a model stage that gained an input (the feature
stages came to read ``perturb``) failed there unseen."""

from __future__ import annotations

from pathlib import Path

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.pipeline.stage import read_marker

from .stage_rows import assembled_run


def test_the_fixture_finishes_every_input_of_the_model_stages(tmp_path: Path) -> None:
    run = assembled_run(tmp_path, clips=(2,))
    graph = build_graph()
    model_stages = [s for name, s in graph.stages.items()
                    if name.startswith(("features_", "omni_"))]
    assert len(model_stages) > 10
    for stage in model_stages:
        missing = [d for d in stage.inputs
                   if d not in stage.optional_inputs and read_marker(run, d) is None]
        assert not missing, f"{stage.name} needs {missing}: stage_rows.assembled_run must " \
                            "write them"
    assert read_marker(run, "assemble")["rows"] == 1  # type: ignore[index]
    assert read_marker(run, "perturb")["rejected"] == 0  # type: ignore[index]
