"""Gemma 4 adapter on a tiny random Gemma4ForConditionalGeneration: real processor, forward
and generate, A and A-V.

Runs in ``.venvs/omni-qwen25omni`` (``make adapter-test IMAGE=omni-qwen25omni``: Gemma 4
shares that image); the checkpoint is built by
:func:`madbench_common.models.tiny.omni.install_tiny_gemma4`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torchvision", reason="run make adapter-test IMAGE=omni-qwen25omni")
torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers", reason="run make adapter-test IMAGE=omni-qwen25omni")
if not hasattr(tf, "Gemma4ForConditionalGeneration"):
    pytest.skip("transformers < 5.5 has no Gemma 4: run make adapter-test IMAGE=omni-qwen25omni",
                allow_module_level=True)

from madbench_common.core.errors import ConfigError  # noqa: E402
from madbench_common.models.adapters.gemma4 import Gemma4Omni  # noqa: E402
from madbench_common.models.tiny.omni import install_tiny_gemma4  # noqa: E402

from ._omni import (  # noqa: E402
    BIN,
    SC,
    check_answer_position,
    check_cache,
    check_four_way_and_scene,
    check_parsed_never_guessed,
    check_sanity,
    clip,
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Gemma4Omni:
    root = tmp_path_factory.mktemp("weights")
    install_tiny_gemma4(root)
    return Gemma4Omni(device="cpu", root=root)


def test_chat_puts_media_before_the_question_in_a_user_turn(model: Gemma4Omni) -> None:
    text = model.processor.apply_chat_template(model.conversation(BIN.full_text, True),
                                               add_generation_prompt=True, tokenize=False,
                                               enable_thinking=False)
    assert text.index("<|video|>") < text.index("<audio_soft_token>") < text.index("Is the")
    assert text.endswith("<start_of_turn>model\n")


def test_audio_soft_tokens_follow_the_duration(model: Gemma4Omni) -> None:
    tok = model.processor.tokenizer
    short = model.inputs(BIN.full_text, clip(0, 2.0).audio, 22050)
    long = model.inputs(BIN.full_text, clip(0, 31.0).audio, 22050)
    n_short = int((short["input_ids"] == tok.audio_token_id).sum())
    n_long = int((long["input_ids"] == tok.audio_token_id).sum())
    assert 40 <= n_short <= 55  # ~2 s / 40 ms
    assert n_long == 750  # cut at 30 s: Gemma 4's cap of 750 soft tokens


def test_frames_reach_the_vision_tower_with_timestamps(model: Gemma4Omni) -> None:
    m = clip(1, video=True, frames=3)
    batch = model.inputs(SC.full_text, m.audio, m.sample_rate, m.frames, m.fps)
    assert int(batch["pixel_values_videos"].shape[0]) == 3  # not padded, not resampled
    text = model.processor.tokenizer.decode(batch["input_ids"][0])
    assert "00:00" in text and "00:01" in text  # frames at 0, 0.5, 1.0 s


def test_answer_position(model: Gemma4Omni) -> None:
    check_answer_position(model)


def test_four_way_and_scene(model: Gemma4Omni) -> None:
    check_four_way_and_scene(model)


def test_generated_text_is_parsed_never_guessed(model: Gemma4Omni) -> None:
    check_parsed_never_guessed(model)


def test_cache_serves_a_rerun(model: Gemma4Omni, tmp_path: Path) -> None:
    check_cache(model, tmp_path)


def test_modality_sanity_silence_noise_and_shuffled_video(model: Gemma4Omni) -> None:
    check_sanity(model)


def test_missing_weights_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="madbench weights fetch --image omni-qwen25omni"):
        Gemma4Omni(device="cpu", root=tmp_path)
