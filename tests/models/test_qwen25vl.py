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
from tests.models.device import DEVICE, expected_dtype
from tests.models.envdata import demo_frames
from tests.models.tiny import tiny_root


@pytest.fixture(scope="module")
def labeller(tmp_path_factory: pytest.TempPathFactory) -> Qwen25VLSceneLabeller:
    root = tiny_root(tmp_path_factory, install_tiny)
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


def test_label_scores_log_softmax_only_the_label_positions(
        labeller: Qwen25VLSceneLabeller, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mean label log-probs equal the whole-sequence log-softmax's (1e-6), but only
    (labels, label tokens, vocab) logits go to float32 and the log-softmax."""
    import torch

    _, model = labeller._load()
    head, tails = [5, 9, 17, 3, 11], [[21, 4], [8], [30, 2, 6]]
    ids = torch.full((3, 8), 0, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, tail in enumerate(tails):
        ids[row, :len(head) + len(tail)] = torch.tensor(head + tail)
        mask[row, :len(head) + len(tail)] = 1
    with torch.inference_mode():
        full = torch.log_softmax(model(input_ids=ids.to(model.device), attention_mask=mask.to(
            model.device)).logits.float()[:, :-1], dim=-1).cpu()
    want = [float(full[r, torch.arange(4, 4 + len(t)), torch.tensor(t)].mean())
            for r, t in enumerate(tails)]
    shapes: list[tuple[int, ...]] = []
    log_softmax = torch.log_softmax

    def spy(x: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        shapes.append(tuple(x.shape))
        return log_softmax(x, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch, "log_softmax", spy)
    got = Qwen25VLSceneLabeller._mean_logprobs(model, head, tails, 0)
    assert got == pytest.approx(want, abs=1e-6)
    assert shapes == [(3, 3, full.shape[-1])]  # not (3, 7, vocab)


def test_loads_in_the_cards_dtype(labeller: Qwen25VLSceneLabeller) -> None:
    """float32 on the CPU; on a GPU the dtype the catalog card declares (bf16)."""
    _, model = labeller._load()
    assert str(model.dtype) == f"torch.{expected_dtype(labeller.slug)}"
