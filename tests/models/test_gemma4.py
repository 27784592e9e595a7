"""Gemma 4 adapter on a tiny random Gemma4ForConditionalGeneration: real processor, forward
and generate, A and A-V.

Runs in ``.venvs/omni-qwen25omni`` (``make adapter-test IMAGE=omni-qwen25omni``: Gemma 4
shares that image); the checkpoint is built by
:func:`madbench_common.models.tiny.omni.install_tiny_gemma4`.
"""

from __future__ import annotations

from ._omni import require_omni_image

require_omni_image("Gemma4ForConditionalGeneration", "Gemma 4 (5.5 or later)")

from madbench_common.models.adapters.gemma4 import Gemma4Omni  # noqa: E402
from madbench_common.models.tiny.omni import install_tiny_gemma4  # noqa: E402

from ._omni import (  # noqa: E402
    BIN,
    SC,
    OmniChecks,
    check_four_way_and_scene,
    clip,
    model_fixture,
)

model = model_fixture(Gemma4Omni, install_tiny_gemma4)


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


def test_four_way_and_scene(model: Gemma4Omni) -> None:
    check_four_way_and_scene(model)


class TestOmniChecks(OmniChecks):
    adapter = Gemma4Omni
    install = staticmethod(install_tiny_gemma4)
    model_class = "Gemma4ForConditionalGeneration"
