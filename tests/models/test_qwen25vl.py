"""Qwen2.5-VL scene labeller on a tiny random model with an offline-built processor
(``make adapter-test IMAGE=scene-qwen25vl``): real loading, video processor, generation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torchvision", reason="run make adapter-test IMAGE=scene-qwen25vl")
pytest.importorskip("transformers", reason="run make adapter-test IMAGE=scene-qwen25vl")

from madbench_common.benchmarks.madbench.stages.scene import label_scene
from madbench_common.models.adapters.qwen25vl import Qwen25VLSceneLabeller
from madbench_common.models.taxonomy import assign_label, load_taxonomy
from madbench_common.models.tiny.qwen25vl import install_tiny
from madbench_common.models.weights import WeightsMissing
from tests.models.device import DEVICE
from tests.models.envdata import demo_frames


@pytest.fixture(scope="module")
def labeller(tmp_path_factory: pytest.TempPathFactory) -> Qwen25VLSceneLabeller:
    root = tmp_path_factory.mktemp("weights")
    install_tiny(root)
    return Qwen25VLSceneLabeller(root=str(root), device=DEVICE, max_new_tokens=8)


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    model = Qwen25VLSceneLabeller(root=str(tmp_path), device=DEVICE)
    frames, fps = demo_frames(max_frames=2)
    with pytest.raises(WeightsMissing, match="--image scene-qwen25vl"):
        model.describe(frames, fps)


def test_describe_runs_the_video_processor_and_generates(labeller: Qwen25VLSceneLabeller,
                                                          ) -> None:
    frames, fps = demo_frames("demo_001", fps=1.0, size=112, max_frames=5)  # odd: padded to 6
    processor, _ = labeller._load()
    inputs = processor(text=["<|vision_start|><|video_pad|><|vision_end|>x"],
                       videos=[np.concatenate([frames, frames[-1:]])], return_tensors="pt",
                       videos_kwargs={"fps": fps, "do_sample_frames": False})
    t, h, w = inputs["video_grid_thw"][0].tolist()
    assert t == 3 and h * w > 0 and inputs["pixel_values_videos"].shape[0] == t * h * w
    first = labeller.describe(frames, fps)
    assert isinstance(first, str) and first == labeller.describe(frames, fps)  # greedy


def test_assign_falls_back_to_constrained_scoring(labeller: Qwen25VLSceneLabeller) -> None:
    caption = "A narrow path through a dense conifer forest with birdsong in the trees."
    label = labeller.assign(caption)
    how = labeller.last_assignment
    assert label in load_taxonomy().fine and how["label"] == label
    assert how["method"] in {"prompt", "loglik"} and "raw" in how


def test_assign_takes_a_parsable_answer(labeller: Qwen25VLSceneLabeller,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(labeller, "_generate", lambda *a, **k: "Forest.")
    assert labeller.assign("trees") == "forest"
    assert labeller.last_assignment == {"label": "forest", "method": "prompt", "raw": "Forest."}


def test_keyword_method_and_scene_row_fields(tmp_path: Path) -> None:
    model = Qwen25VLSceneLabeller(root=str(tmp_path), assign_method="keyword")
    caption = "Cars and buses pass on a busy city street."
    fields = label_scene(model, caption, 6.0, seed=1)
    assert fields["scene_label"] == assign_label(caption)
    assert (fields["label_method"], fields["label_raw"]) == ("keyword", "")
