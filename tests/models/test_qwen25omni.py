"""Qwen2.5-Omni adapter on a tiny random thinker: real processor, forward and generate, A and A-V.

Runs in ``.venvs/omni-qwen25omni`` (``make adapter-test IMAGE=omni-qwen25omni``); the
checkpoint is built by :func:`madbench_common.models.tiny.omni.install_tiny_qwen25omni`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._omni import require_omni_image

require_omni_image("Qwen2_5OmniProcessor", "Qwen2.5-Omni")

from madbench_common.core.errors import ConfigError  # noqa: E402
from madbench_common.models.adapters.qwen25omni import QwenOmni  # noqa: E402
from madbench_common.models.tiny.omni import install_tiny_qwen25omni  # noqa: E402

from ._omni import (  # noqa: E402
    BIN,
    FOUR,
    SC,
    OmniChecks,
    check_four_way_and_scene,
    clip,
    model_fixture,
)
from .device import DEVICE  # noqa: E402

model = model_fixture(QwenOmni, install_tiny_qwen25omni)


def test_chat_puts_media_before_the_question(model: QwenOmni) -> None:
    text = model.processor.apply_chat_template(model.conversation(BIN.full_text, True),
                                               add_generation_prompt=True, tokenize=False)
    video, audio = text.index("<|VIDEO|>"), text.index("<|AUDIO|>")
    assert "You are Qwen, a virtual human" in text
    assert video < audio < text.index(BIN.text.strip()[:20])
    assert text.endswith("<|im_start|>assistant\n")


def test_audio_goes_through_whisper_features_at_16k(model: QwenOmni) -> None:
    m = clip(0)
    batch = model.inputs(BIN.full_text, m.audio, m.sample_rate)
    assert tuple(batch["input_features"].shape) == (1, 128, 3000)  # 30 s Whisper window
    assert int(batch["feature_attention_mask"].sum()) == 200  # 2 s at 100 frames/s


def test_audio_visual_input_reaches_the_thinker(model: QwenOmni) -> None:
    m = clip(1, video=True)
    batch = model.inputs(SC.full_text, m.audio, m.sample_rate, m.frames, m.fps)
    grid = batch["video_grid_thw"][0]
    n_video = int((batch["input_ids"] == model.processor.video_token_id).sum())
    assert n_video == int(grid.prod()) // 4  # 2x2 spatial merge
    assert int(grid[0]) == 2  # 4 frames in temporal patches of 2
    check_four_way_and_scene(model)


def test_odd_frame_counts_and_long_audio_are_handled(model: QwenOmni) -> None:
    m = clip(2, seconds=31.0, video=True, frames=3)
    batch = model.inputs(FOUR.full_text, m.audio, m.sample_rate, m.frames, 2.0)
    assert int(batch["feature_attention_mask"].sum()) == 3000  # cut at 30 s
    assert int(batch["video_grid_thw"][0][0]) == 2


def test_a_tiny_checkpoint_is_labelled_as_such(model: QwenOmni, tmp_path: Path) -> None:
    from madbench_common.models.adapters.qwen25omni import TinyQwenOmni

    assert model.version.endswith("+tiny-random")
    assert TinyQwenOmni.reference and TinyQwenOmni.slug == "omni-qwen25omni-tiny"
    snap = install_tiny_qwen25omni(tmp_path)
    (snap / "madbench_tiny_random.json").unlink()
    with pytest.raises(ConfigError, match="not a tiny random checkpoint"):
        TinyQwenOmni(device=DEVICE, root=tmp_path)


class TestOmniChecks(OmniChecks):
    adapter = QwenOmni
    install = staticmethod(install_tiny_qwen25omni)
    model_class = "Qwen2_5OmniForConditionalGeneration"


def test_bf16_casts_the_media_but_keeps_video_time_exact(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """In bf16 only the features and pixels are cast: ``video_second_per_grid`` (2/3 s per
    temporal patch at 3 fps) would be 0.668 in bf16 and shift every video time position."""
    import torch

    install_tiny_qwen25omni(tmp_path)
    model = QwenOmni(device=DEVICE, root=tmp_path, dtype="bfloat16")
    seen: list[dict[str, Any]] = []
    generate = model.model.generate

    def spy(**inputs: Any) -> Any:
        seen.append(dict(inputs))
        return generate(**inputs)

    monkeypatch.setattr(model.model, "generate", spy)
    m = clip(3, video=True)
    model.answer(SC.full_text, m.audio, m.sample_rate, m.frames, 3.0, max_new_tokens=1)
    got = seen[0]
    assert got["input_features"].dtype == got["pixel_values_videos"].dtype == torch.bfloat16
    per_grid = got["video_second_per_grid"]
    assert per_grid.dtype in (torch.float32, torch.float64)
    assert float(per_grid[0]) == pytest.approx(2 / 3, abs=1e-7)
    assert got["input_features"].device == model.model.device


def test_batched_audio_questions_equal_batch_one(model: QwenOmni,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``answer_batch``: audio-only questions of mixed audio lengths (so mixed prompt lengths,
    left-padded) and two prompts in one call each give batch 1's text and its option
    log-probs within EQUIVALENCE_ATOL on the CPU in fp32 (on a GPU in bf16 the difference
    is printed for the record); an A-V question is answered alone.
    Right padding, which the check must catch, moves them by ~0.1."""
    from madbench_common.benchmarks.madbench.omni.ask import request
    from madbench_common.models.batching import EQUIVALENCE_ATOL, answer_batch

    requests = [request(q, clip(i, seconds), 8) for i, seconds in enumerate((2.0, 1.0, 3.0, 0.5))
                for q in (BIN, FOUR)]
    requests.append(request(SC, clip(5, video=True), 8))
    alone = [model.answer(**r) for r in requests]
    batched = answer_batch(model, requests)
    exact = DEVICE == "cpu" and str(model.model.dtype) == "torch.float32"
    worst = 0.0
    for a, b in zip(alone, batched):
        assert [o.text for o in a.options] == [o.text for o in b.options]
        worst = max(worst, *(abs(x.logprob - y.logprob) for x, y in zip(a.options, b.options)))
        # bf16 on a GPU rounds per batch shape: a random model's near-ties may flip there
        assert a.text == b.text or not exact
    with capsys.disabled():
        print(f"\nQwen2.5-Omni tiny on {DEVICE} ({model.model.dtype}): max |option log-prob, "
              f"batch - batch 1| = {worst:.2e}")
    assert worst <= EQUIVALENCE_ATOL or not exact
    # the audio matters: one prompt's scores differ between clips
    assert len({round(a.options[0].logprob, 6) for a in alone[:8:2]}) > 1
    if DEVICE == "cpu":  # right padding: what the check above must catch
        from madbench_common.models._omni_hf import batch_reply, cast_media

        texts = [model.processor.apply_chat_template(model.conversation(BIN.full_text, False),
                                                     add_generation_prompt=True, tokenize=False)
                 ] * 4
        audios = [model.audio_16k(r["audio"], r["sample_rate"]) for r in requests[:8:2]]
        right = model.processor(text=texts, audio=audios, sampling_rate=16000,
                                return_tensors="pt", padding=True, padding_side="right")
        wrong = batch_reply(model.model, cast_media(right, model.model.dtype),
                            model.processor.tokenizer, BIN.choices(), 8)
        assert max(abs(a.options[0].logprob - w.options[0].logprob)
                   for a, w in zip(alone[:8:2], wrong)) > 100 * EQUIVALENCE_ATOL
