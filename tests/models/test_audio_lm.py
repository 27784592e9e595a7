"""DEAF's open audio LLMs on tiny random checkpoints of the real architectures (deaf-tf5).

Runs in ``.venvs/deaf-tf5`` (``make adapter-test IMAGE=deaf-tf5``): the real offline
loading, chat template, processor, forward and greedy generation of each adapter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("transformers", reason="run make adapter-test IMAGE=deaf-tf5")

from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters import audio_lm
from madbench_common.models.tiny import audio_lm as tiny
from tests.models.device import DEVICE, expected_dtype

QUESTION = "What emotion does the speaker express in this recording?"
CASES = [(audio_lm.Qwen2Audio, tiny.install_tiny_qwen2_audio),
         (audio_lm.AudioFlamingo3, tiny.install_tiny_af3),
         (audio_lm.Qwen3Omni, tiny.install_tiny_qwen3_omni)]


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("weights")
    for _, install in CASES:
        install(root)
    return root


def _tiny(cls: type[audio_lm.AudioLM]) -> type[audio_lm.AudioLM]:
    return type(f"Tiny{cls.__name__}", (cls,), {"tiny": True, "reference": True})


def _clip(kind: str, seconds: float = 2.0, sr: int = 22050) -> np.ndarray:
    n = int(seconds * sr)
    if kind == "silence":
        return np.zeros(n, np.float32)
    return (0.3 * np.random.default_rng(0).standard_normal(n)).astype(np.float32)


@pytest.mark.parametrize(("cls", "install"), CASES, ids=[c.__name__ for c, _ in CASES])
def test_greedy_answer_and_option_scores(cls: type[audio_lm.AudioLM], install: object,
                                         weights: Path) -> None:
    model = _tiny(cls)(device=DEVICE, root=weights)
    assert model.version.startswith(f"{cls.repo}@") and model.version.endswith("+tiny-random")
    noise = model.answer(QUESTION, _clip("noise"), 22050, choices=("happy", "sad"),
                         max_new_tokens=6)
    assert isinstance(noise.text, str) and noise.logits == "generate" and noise.seconds > 0
    assert [o.text for o in noise.options] == ["happy", "sad"]
    assert all(np.isfinite(o.logprob) and o.logprob < 0 for o in noise.options)
    again = model.answer(QUESTION, _clip("noise"), 22050, choices=("happy", "sad"),
                         max_new_tokens=6)
    assert again.text == noise.text and again.options == noise.options  # greedy: repeatable
    # the audio reaches the model: silence and noise give different answer-position logits
    silence = model.answer(QUESTION, _clip("silence"), 22050, choices=("happy", "sad"),
                           max_new_tokens=1)
    assert silence.options != noise.options
    with pytest.raises(ConfigError, match="audio-only"):
        model.answer(QUESTION, _clip("noise"), 22050, frames=np.zeros((2, 8, 8, 3), np.uint8))


def test_prompt_carries_the_clip_and_the_question(weights: Path) -> None:
    model = _tiny(audio_lm.Qwen2Audio)(device=DEVICE, root=weights)
    batch = model.inputs(QUESTION, _clip("noise"), 22050)
    ids = batch["input_ids"][0].tolist()
    audio_id = model.processor.tokenizer.convert_tokens_to_ids("<|AUDIO|>")
    assert ids.count(audio_id) > 10 and "input_features" in batch
    text = model.processor.tokenizer.decode(ids)
    assert text.index("<|AUDIO|>") < text.index(QUESTION)  # the clip comes first
    af3 = _tiny(audio_lm.AudioFlamingo3)(device=DEVICE, root=weights)
    text = af3.processor.tokenizer.decode(af3.inputs(QUESTION, _clip("noise"), 22050)
                                          ["input_ids"][0])
    assert text.index(QUESTION) < text.index("<sound>")  # AF3: text, then audio


def test_random_checkpoints_are_always_labelled(weights: Path) -> None:
    """The paper slug on a tiny checkpoint says so; the -tiny slug demands the marker."""
    assert audio_lm.Qwen2Audio(device=DEVICE, root=weights).version.endswith("+tiny-random")
    marker = next(m for m in weights.rglob(audio_lm.TINY_MARKER) if "Qwen2-Audio" in str(m))
    aside = weights / "marker.moved"
    marker.rename(aside)
    try:
        with pytest.raises(ConfigError, match="not a tiny random checkpoint"):
            audio_lm.Qwen2AudioTiny(device=DEVICE, root=weights)
    finally:
        aside.rename(marker)


@pytest.mark.parametrize(("cls", "install"), CASES, ids=[c.__name__ for c, _ in CASES])
def test_loads_straight_onto_the_device(cls: type[audio_lm.AudioLM], install: object,
                                        weights: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each model's ``from_pretrained`` gets the device (``device_map``), so the weights never
    sit in host memory as a whole model first."""
    import torch
    import transformers

    name = {audio_lm.Qwen2Audio: "Qwen2AudioForConditionalGeneration",
            audio_lm.AudioFlamingo3: "AudioFlamingo3ForConditionalGeneration",
            audio_lm.Qwen3Omni: "Qwen3OmniMoeForConditionalGeneration"}[cls]
    model_cls = getattr(transformers, name)
    seen: list[dict[str, Any]] = []
    load = model_cls.from_pretrained
    monkeypatch.setattr(model_cls, "from_pretrained",
                        lambda *a, **k: (seen.append(k), load(*a, **k))[1])
    model = _tiny(cls)(device=DEVICE, root=weights)
    assert seen and seen[0]["device_map"] == torch.device(DEVICE)
    assert {p.device.type for p in model.model.parameters()} == {model.device.type}
    assert str(model.model.dtype) == f"torch.{expected_dtype(cls.slug)}"  # the card's on a GPU
