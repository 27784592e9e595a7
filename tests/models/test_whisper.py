"""Whisper ASR adapter on a tiny random Whisper with an offline-built tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from madbench_common.media.audio import resample
from madbench_common.models.adapters.whisper import (
    REPO,
    REVISION,
    mean_token_logprob,
    no_speech_probability,
    word_coverage,
)
from madbench_common.models.weights import WeightsMissing
from tests.models._qc import VENV, demo_mixture
from tests.models.device import DEVICE, expected_dtype
from tests.models.tiny import tiny_root


@pytest.fixture(scope="module")
def asr(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("transformers", reason=VENV)
    from madbench_common.models.adapters.whisper import WhisperASR
    from madbench_common.models.tiny.qc import install_tiny_whisper

    return WhisperASR(device=DEVICE, root=tiny_root(tmp_path_factory, install_tiny_whisper))


def test_word_coverage_is_the_union_of_word_spans() -> None:
    words = (("a", 0.0, 1.0), ("b", 0.5, 1.5), ("c", 3.0, 4.0), ("d", 4.0, 4.0))
    assert word_coverage(words, 5.0) == pytest.approx(0.5)
    assert word_coverage((), 5.0) == 0.0 and word_coverage(words, 0.0) == 0.0


def test_no_speech_probability_is_the_softmax_over_the_whole_vocabulary() -> None:
    """openai-whisper's definition by hand: logits (0, ln 2, ln 5, 0) at the start of
    transcript, no-speech token 2: e^ln5 / (1 + 2 + 5 + 1) = 5/9."""
    torch = pytest.importorskip("torch")
    import math

    logits = torch.tensor([0.0, math.log(2.0), math.log(5.0), 0.0])
    assert no_speech_probability(logits, 2) == pytest.approx(5 / 9)
    assert no_speech_probability(logits, None) is None


def test_mean_token_logprob_by_hand() -> None:
    """openai-whisper's avg_logprob: (sum of the text tokens' and the end token's
    log-probabilities) / (len(text tokens) + 1). Two rows of logits (ln 1, ln 3) -> token 1
    has p = 3/4, then (ln 1, ln 1) -> the end token 0 has p = 1/2: (ln 3/4 + ln 1/2) / 2."""
    torch = pytest.importorskip("torch")
    import math

    logits = torch.tensor([[0.0, math.log(3.0)], [0.0, 0.0]])
    assert mean_token_logprob(logits, [1, 0]) == pytest.approx(
        (math.log(0.75) + math.log(0.5)) / 2)


def test_avg_logprob_matches_generate_scores(asr: Any) -> None:
    """The teacher-forced pass gives what greedy decoding scored: the mean of generate()'s
    per-step log-probabilities of its own tokens, the end token included."""
    import torch

    x = demo_mixture()[:32000]
    features = asr._processor.feature_extractor(x, sampling_rate=16000,
                                                return_tensors="pt").input_features
    eos = asr._processor.tokenizer.eos_token_id
    out = asr._model.generate(features, language="en", task="transcribe", max_new_tokens=6,
                              return_dict_in_generate=True, output_scores=True)
    steps = torch.stack(out.scores, dim=1)[0].float().log_softmax(-1)
    tokens = out.sequences[0, -len(out.scores):].tolist()
    n = tokens.index(eos) + 1 if eos in tokens else len(tokens)
    expect = float(steps[torch.arange(n), torch.tensor(tokens[:n])].mean())
    assert asr.tokens_logprob(x, "en", tokens[:n]) == pytest.approx(expect, abs=1e-3)
    got = asr.transcribe(x, 16000)
    assert got.avg_logprob is not None and got.avg_logprob <= 0.0


def test_no_speech_probability_comes_with_every_transcript(asr: Any) -> None:
    x = demo_mixture()[:32000]
    got = asr.transcribe(x, 16000)
    nid = asr._no_speech_id()
    assert nid is not None and 0.0 <= (got.no_speech_prob or 0.0) <= 1.0
    assert got.no_speech_prob == pytest.approx(asr.detect_language(x)[2])


def test_transcribes_demo_speech_with_language_and_words(asr: Any) -> None:
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    x = demo_mixture()[:48000]
    got = asr.transcribe(x, 16000)
    assert isinstance(got.text, str) and 0.0 <= got.coverage <= 1.0
    assert got.language in LANGUAGES and 0.0 < (got.language_prob or 0.0) <= 1.0
    assert all(0.0 <= s <= e <= 3.0 for _, s, e in got.words)
    assert got.coverage == pytest.approx(word_coverage(got.words, 3.0))


def test_language_matches_transformers_detect_language(asr: Any) -> None:
    x = demo_mixture("demo_003")[:32000]
    code, prob, _ = asr.detect_language(x)
    feats = asr._processor.feature_extractor(x, sampling_rate=16000,
                                             return_tensors="pt").input_features
    # the features go where the model is (MADBENCH_TEST_DEVICE) and in its dtype
    token = asr._model.detect_language(feats.to(asr._model.device, asr._model.dtype))
    lang_id = asr._model.generation_config.lang_to_id[f"<|{code}|>"]
    assert int(token[0]) == lang_id
    assert prob > 1.0 / len(asr._model.generation_config.lang_to_id)


def test_other_rates_are_resampled(asr: Any) -> None:
    x = resample(demo_mixture()[:32000], 16000, 44100)
    got = asr.transcribe(x, 44100)
    assert got.language == asr.detect_language(resample(x, 44100, 16000))[0]
    assert all(0.0 <= s <= e <= len(x) / 44100 for _, s, e in got.words)


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason=VENV)
    from madbench_common.models.adapters.whisper import WhisperASR

    with pytest.raises(WeightsMissing, match="madbench weights fetch --image qc"):
        WhisperASR(device=DEVICE, root=tmp_path)
    assert REPO == "openai/whisper-large-v3" and len(REVISION) == 40


def test_loads_in_the_cards_dtype(asr: Any) -> None:
    """float32 on the CPU; on a GPU the dtype the catalog card declares (fp16)."""
    assert str(asr._model.dtype) == f"torch.{expected_dtype(asr.slug)}"
