"""What the environment stages pass to a generator and record from it: the
negative prompt, the model's own frame request, the generator seed and its settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import ComponentRow
from madbench_common.benchmarks.madbench.stages.clips import component_seed
from madbench_common.benchmarks.madbench.stages.env_gen import EnvGenStage
from madbench_common.core.store import RunStore, open_store
from madbench_common.models.env_common import FrameRequest
from madbench_common.models.taxonomy import build_prompt
from madbench_common.pipeline.stage import StageContext


class RecordingT2A:
    """A text-to-audio generator that keeps the call it got (a test double of the role)."""

    slug, version, reference, paradigm = "test-recording-t2a", "1", False, "t2a"
    frame_request = FrameRequest(fps=25.0, size=384, max_frames=325)

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.last_settings: dict[str, Any] = {}

    def generate(self, **kw: Any) -> np.ndarray:
        self.calls.append(kw)
        n = round(kw["duration"] * kw["sample_rate"])
        self.last_settings = {"seed": kw["seed"], "fit": "exact", "steps": 3}
        return np.zeros(n, np.float32)


def _stage(tmp_path: Path, name: str, model: Any) -> EnvGenStage:
    graph = build_graph()
    run = RunStore(open_store(str(tmp_path)), "t")
    ctx = StageContext(run, graph[name], graph, dict(graph[name].params), "fp", "img", 7)
    stage = EnvGenStage(ctx)
    stage.__dict__["model"] = model
    return stage


def test_negative_prompt_seed_and_settings_reach_the_row(tmp_path: Path) -> None:
    model = RecordingT2A()
    stage = _stage(tmp_path, "env_t2a_a", model)
    prompt = build_prompt("forest", 2.0)
    plan = ComponentRow(component_id="c1.env_t2a_a", clip_id="c1", component="env",
                        branch="t2a", setting="env_t2a_a", prompt=prompt.text,
                        negative_prompt=prompt.negative, duration=2.0, sample_rate=16000)
    stage.__dict__["planned"] = {plan.component_id: plan}
    stage.__dict__["clips"] = {"c1": None}  # text-to-audio reads no clip inputs
    row = stage.run_item(plan.component_id)
    (call,) = model.calls
    assert call["negative_prompt"] == prompt.negative and call["prompt"] == prompt.text
    assert call["seed"] == component_seed(stage.ctx, plan.component_id) == row.gen_seed
    assert json.loads(row.gen_settings) == {"seed": row.gen_seed, "fit": "exact", "steps": 3}
    assert row.generator == model.slug and row.duration == 2.0


def test_video_stages_take_the_models_frame_request(tmp_path: Path) -> None:
    stage = _stage(tmp_path, "env_v2a_a", RecordingT2A())
    assert stage._frame_request() == (25.0, 384, 325)
    del RecordingT2A.frame_request
    try:
        p = stage.ctx.params
        assert stage._frame_request() == (p["frame_fps"], p["frame_size"], p["max_frames"])
    finally:
        RecordingT2A.frame_request = FrameRequest(fps=25.0, size=384, max_frames=325)
