"""Qwen2.5-Omni adapter on a tiny random thinker: real processor, forward and generate, A and A-V.

Runs in ``.venvs/omni-qwen25omni`` (``make adapter-test IMAGE=omni-qwen25omni``); the
checkpoint is built by :func:`madbench_common.models.tiny_omni.install_tiny_qwen25omni`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers", reason="run make adapter-test IMAGE=omni-qwen25omni")
pytest.importorskip("torchvision", reason="run make adapter-test IMAGE=omni-qwen25omni")
torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")
if not hasattr(tf, "Qwen2_5OmniProcessor"):
    pytest.skip("transformers without Qwen2.5-Omni: run make adapter-test IMAGE=omni-qwen25omni",
                allow_module_level=True)

from madbench_common.errors import ConfigError  # noqa: E402
from madbench_common.models.qwen25omni import QwenOmni  # noqa: E402
from madbench_common.models.tiny_omni import install_tiny_qwen25omni  # noqa: E402
from madbench_common.omni.ask import Media, ask  # noqa: E402
from madbench_common.omni.cache import ResponseCache  # noqa: E402
from madbench_common.omni.parse import REFUSAL, UNPARSED  # noqa: E402
from madbench_common.omni.sanity import modality_sanity  # noqa: E402
from madbench_common.omni.scoring import label_probs  # noqa: E402
from madbench_common.prompts import load_prompt  # noqa: E402
from madbench_common.store import FileStore  # noqa: E402

BIN = load_prompt("P_bin").question("binary")
FOUR = load_prompt("P_4way").question("fourway")
SC = load_prompt("P_SC").question("scene")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> QwenOmni:
    root = tmp_path_factory.mktemp("weights")
    install_tiny_qwen25omni(root)
    return QwenOmni(device="cpu", root=root)


def _clip(seed: int, seconds: float = 2.0, video: bool = False) -> Media:
    rng = np.random.default_rng(seed)
    t = np.arange(int(22050 * seconds)) / 22050
    audio = (0.2 * np.sin(2 * np.pi * (220 + 40 * seed) * t)
             + rng.normal(0, 0.02, t.size)).astype(np.float32)
    frames = rng.integers(0, 255, (4, 112, 144, 3), dtype=np.uint8) if video else None
    return Media(audio, 22050, frames, 2.0 if video else 0.0)


def test_chat_puts_media_before_the_question(model: QwenOmni) -> None:
    text = model.processor.apply_chat_template(model.conversation(BIN.full_text, True),
                                               add_generation_prompt=True, tokenize=False)
    video, audio = text.index("<|VIDEO|>"), text.index("<|AUDIO|>")
    assert "You are Qwen, a virtual human" in text
    assert video < audio < text.index(BIN.text.strip()[:20])
    assert text.endswith("<|im_start|>assistant\n")


def test_audio_answer_scores_the_answer_position(model: QwenOmni) -> None:
    m = _clip(0)
    ans = model.answer(BIN.full_text, m.audio, m.sample_rate, choices=BIN.choices(),
                       max_new_tokens=4)
    assert ans.logits == "generate" and len(ans.options) == len(BIN.choices())
    batch = model.inputs(BIN.full_text, m.audio, m.sample_rate)
    assert tuple(batch["input_features"].shape) == (1, 128, 3000)  # 16 kHz Whisper window
    with torch.inference_mode():
        last = model.model(**batch).logits[0, -1].float()
    logp = torch.log_softmax(last, -1)
    for opt in ans.options:
        assert opt.logprob == pytest.approx(float(logp[opt.token_id]), abs=1e-4)
    probs = label_probs(BIN, ans)
    assert probs is not None and sum(probs.probs.values()) == pytest.approx(1.0)
    assert 0.0 < probs.mass < 1.0


def test_audio_visual_input_reaches_the_thinker(model: QwenOmni) -> None:
    m = _clip(1, video=True)
    batch = model.inputs(SC.full_text, m.audio, m.sample_rate, m.frames, m.fps)
    assert "pixel_values_videos" in batch and "video_grid_thw" in batch
    grid = batch["video_grid_thw"][0]
    n_video = int((batch["input_ids"] == model.processor.video_token_id).sum())
    assert n_video == int(grid.prod()) // 4  # 2x2 spatial merge
    assert int(grid[0]) == 2  # 4 frames in temporal patches of 2
    ans = model.answer(SC.full_text, m.audio, m.sample_rate, m.frames, m.fps,
                       choices=SC.choices(), max_new_tokens=4)
    assert label_probs(SC, ans) is not None


def test_odd_frame_counts_and_long_audio_are_handled(model: QwenOmni) -> None:
    m = _clip(2, seconds=31.0, video=True)
    frames = m.frames[:3]
    batch = model.inputs(FOUR.full_text, m.audio, m.sample_rate, frames, 2.0)
    assert int(batch["feature_attention_mask"].sum()) == 3000  # cut at 30 s
    assert int(batch["video_grid_thw"][0][0]) == 2
    ans = model.answer(FOUR.full_text, m.audio, m.sample_rate, frames, 2.0,
                       choices=FOUR.choices(), max_new_tokens=2)
    probs = label_probs(FOUR, ans)
    assert probs is not None and probs.ordered(FOUR.labels) == pytest.approx(
        tuple(probs.probs[k] for k in "RSEQ"))


def test_generated_text_is_parsed_never_guessed(model: QwenOmni) -> None:
    out = ask(model, BIN, inputs=("x",), mode="A", load=lambda: _clip(3), max_new_tokens=6)
    assert out.parsed in ("fake", "real", REFUSAL, UNPARSED)
    assert not out.excluded  # logits exist, so even an unparsed answer has a score


def test_cache_serves_a_rerun(model: QwenOmni, tmp_path: Path) -> None:
    cache = ResponseCache(FileStore(str(tmp_path)))
    first = ask(model, BIN, inputs=("a",), mode="A", load=lambda: _clip(4), cache=cache)
    again = ask(model, BIN, inputs=("a",), mode="A", load=lambda: _clip(99), cache=cache)
    assert cache.hits == 1 and cache.misses == 1 and again.cached
    assert again.answer == first.answer


def test_modality_sanity_silence_noise_and_shuffled_video(model: QwenOmni) -> None:
    clips = [_clip(i, video=True) for i in range(3)]
    checks = {c.name: c for c in modality_sanity(model, clips, BIN, SC)}
    assert set(checks) == {"silence", "noise", "shuffled_video"}
    assert all(c.passed and c.max_change > 1e-6 for c in checks.values()), checks


def test_missing_weights_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="madbench weights fetch --image omni-qwen25omni"):
        QwenOmni(device="cpu", root=tmp_path)
