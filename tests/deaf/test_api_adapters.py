"""API adapters (Gemini, GPT-4o audio, ElevenLabs, the judge's chat client) against a local stub.

Never the real endpoints: :func:`stub_server` binds 127.0.0.1 on a free port and speaks
the request/response shapes, including injected 429s, 5xx, 400 and a wrong key.
"""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.errors import ConfigError
from madbench_common.models.api_stub import STUB_KEY, Fault, stub_server
from madbench_common.models.elevenlabs import ElevenLabsTTS
from madbench_common.models.gemini import Gemini3Flash, Gemini25Flash
from madbench_common.models.http_api import (
    ApiError,
    JsonApi,
    RateLimiter,
    RetryPolicy,
    SpendCapExceeded,
)
from madbench_common.models.openai_compat import ChatClient, Gpt4oAudio, strip_thinking

SR = 16000
CLAIM = "The speaker sounds very sad and melancholic in this recording."
QUESTION = "What emotion does the speaker express in this recording?"


def _audio(seconds: float = 1.5, sr: int = 22050) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


class FakeSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, s: float) -> None:
        self.calls.append(s)


def _gemini_api(url: str, sleep: FakeSleep, retries: int = 6, key: str = STUB_KEY) -> JsonApi:
    return JsonApi(url, {"x-goog-api-key": key}, rpm=0, sleep=sleep,
                   retry=RetryPolicy(max_retries=retries, base_s=1.0, cap_s=8.0))


def test_gemini_request_shape_answer_and_spend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", STUB_KEY)
    with stub_server() as stub:
        model = Gemini25Flash(base_url=stub.url, rpm=0)
        ans = model.answer(f"{CLAIM} {QUESTION}", _audio(), 22050)
        plain = Gemini3Flash(base_url=stub.url, rpm=0).answer(QUESTION, _audio(), 22050)
    assert ans.text == CLAIM  # the stub echoes a leading claim; the adapter returns it
    assert "not able to tell" in plain.text
    body = stub.requests[0]["body"]
    parts = body["contents"][0]["parts"]
    assert parts[0]["inline_data"]["mime_type"] == "audio/wav" and parts[1]["text"].endswith("?")
    assert body["generationConfig"]["temperature"] == 0
    assert stub.requests[0]["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert stub.requests[1]["path"] == "/v1beta/models/gemini-3-flash-preview:generateContent"
    assert model.meter.calls == 1 and model.meter.spent_usd > 0
    assert model.version.startswith("gemini-2.5-flash@http://127.0.0.1:")


def test_429_and_5xx_are_retried_with_backoff_and_retry_after() -> None:
    sleep = FakeSleep()
    faults = [Fault(429, retry_after="7"), Fault(503), Fault(500)]
    with stub_server(faults=faults) as stub:
        model = Gemini25Flash(api=_gemini_api(stub.url, sleep))
        ans = model.answer(QUESTION, _audio(), 22050)
    assert ans.text and len(stub.requests) == 4
    assert len(sleep.calls) == 3
    assert sleep.calls[0] >= 7.0  # Retry-After wins over the 1 s first backoff
    assert 1.8 <= sleep.calls[1] <= 2.2 and 3.6 <= sleep.calls[2] <= 4.4  # base · 2^attempt
    assert model.api.retries_done == 3


def test_retries_give_up_with_an_api_error() -> None:
    with stub_server(faults=[Fault(429, "0")] * 5) as stub:
        model = Gemini25Flash(api=_gemini_api(stub.url, FakeSleep(), retries=2))
        with pytest.raises(ApiError, match="HTTP 429"):
            model.answer(QUESTION, _audio(), 22050)
    assert len(stub.requests) == 3


def test_wrong_key_is_a_config_error_never_retried() -> None:
    with stub_server() as stub:
        model = Gemini25Flash(api=_gemini_api(stub.url, FakeSleep(), key="wrong"))
        with pytest.raises(ConfigError, match="HTTP 401"):
            model.answer(QUESTION, _audio(), 22050)
    assert len(stub.requests) == 1


def test_bad_request_is_an_api_error_not_retried() -> None:
    with stub_server(faults=[Fault(400, message="audio too long")]) as stub:
        model = Gemini25Flash(api=_gemini_api(stub.url, FakeSleep()))
        with pytest.raises(ApiError, match="audio too long"):
            model.answer(QUESTION, _audio(), 22050)
    assert len(stub.requests) == 1


def test_stub_rejects_audio_that_is_not_a_16k_wav() -> None:
    sleep = FakeSleep()
    with stub_server() as stub:
        api = _gemini_api(stub.url, sleep)
        body = {"contents": [{"parts": [{"inline_data": {"mime_type": "audio/wav",
                                                         "data": "bm90IGEgd2F2"}}]}],
                "generationConfig": {"temperature": 0}}
        with pytest.raises(ApiError, match="HTTP 400"):
            api.post("/v1beta/models/x:generateContent", body)


def test_spend_cap_stops_before_the_request() -> None:
    with stub_server() as stub:
        model = Gemini25Flash(api=_gemini_api(stub.url, FakeSleep()), spend_cap_usd=1e-7)
        with pytest.raises(SpendCapExceeded, match="spend cap"):
            model.answer(QUESTION, _audio(), 22050)
    assert stub.requests == []


def test_keys_come_from_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        Gpt4oAudio(base_url="http://127.0.0.1:9")


def test_rate_limiter_spaces_requests() -> None:
    now = [0.0]
    sleep = FakeSleep()
    limiter = RateLimiter(120, clock=lambda: now[0], sleep=sleep)
    waits = [limiter.acquire() for _ in range(3)]
    assert waits == [0.0, 0.5, 1.0] and sleep.calls == [0.5, 1.0]


def test_gpt4o_audio_request_and_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", STUB_KEY)
    with stub_server() as stub:
        model = Gpt4oAudio(base_url=f"{stub.url}/v1", rpm=0)
        ans = model.answer(f"{CLAIM} {QUESTION}", _audio(), 22050)
    body = stub.requests[0]["body"]
    assert body["model"] == "gpt-4o-audio-preview" and body["modalities"] == ["text"]
    kinds = [c["type"] for c in body["messages"][0]["content"]]
    assert kinds == ["text", "input_audio"] and body["temperature"] == 0
    assert ans.text == CLAIM and model.client.meter.spent_usd > 0


def test_chat_client_returns_the_final_answer_without_thinking(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def reply(kind: str, prompt: str, seconds: float) -> str:
        return "<think>the audio is sad, the text is happy</think>\nLABEL: C"

    with stub_server(reply=reply) as stub:
        monkeypatch.setenv("JUDGE_API_KEY", STUB_KEY)
        client = ChatClient(f"{stub.url}/v1", "deepseek-reasoner", rpm=0)
        out = client.complete([{"role": "user", "content": "grade this"}])
    assert out == "LABEL: C"
    assert strip_thinking("<think>unfinished") == ""


def test_elevenlabs_voices_and_pcm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELEVENLABS_API_KEY", STUB_KEY)
    with stub_server() as stub:
        tts = ElevenLabsTTS({"young_male": "voiceA"}, base_url=stub.url, rpm=0)
        audio = tts.synthesise("Hello there, how are you?", "young_male", 22050)
        with pytest.raises(ConfigError, match="no voice id for profile 'elderly_female'"):
            tts.synthesise("Hello", "elderly_female", 16000)
    req = stub.requests[0]
    assert req["path"] == "/v1/text-to-speech/voiceA?output_format=pcm_16000"
    assert req["body"]["model_id"] == "eleven_multilingual_v2"
    assert abs(len(audio) / 22050 - 0.06 * 25) < 0.01 and np.abs(audio).max() > 0.05


def test_elevenlabs_speaks_every_sic_profile_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """No voices given: the documented premade set (deaf.design.ELEVENLABS_VOICES) covers
    the four SIC profiles, so sic_tts does not stop for a missing voice id."""
    from madbench_common.deaf.design import ELEVENLABS_VOICES, VOICE_PROFILES

    monkeypatch.setenv("ELEVENLABS_API_KEY", STUB_KEY)
    with stub_server() as stub:
        tts = ElevenLabsTTS(base_url=stub.url, rpm=0)
        for p in VOICE_PROFILES:
            assert len(tts.synthesise("Good morning.", p.name, SR)) > 0
    voices = [r["path"].split("/")[-1].split("?")[0] for r in stub.requests]
    assert voices == [ELEVENLABS_VOICES[p.name] for p in VOICE_PROFILES]
    assert len(set(voices)) == 4 and all(len(v) == 20 and v.isalnum() for v in voices)


def test_sic_voices_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    """``voices`` reaches a model that takes it (as JSON text, as the workflow passes it)
    and is ignored by one that picks its own voices; malformed values are config errors."""
    from types import SimpleNamespace

    from madbench_common.deaf.graph import build_deaf_graph
    from madbench_common.deaf.stages_stimuli import SicStage, parse_voices

    monkeypatch.setenv("ELEVENLABS_API_KEY", STUB_KEY)
    stage = build_deaf_graph()["sic_tts"]

    def model(params: dict[str, object]) -> object:
        ctx = SimpleNamespace(params=params, stage=stage)
        return SicStage.model.func(SimpleNamespace(ctx=ctx))  # type: ignore[attr-defined]

    mine = '{"young_male": "abc", "elderly_female": "def"}'
    tts = model({"model": "deaf-elevenlabs", "voices": mine})
    assert tts.voices == {"young_male": "abc", "elderly_female": "def"}  # type: ignore[attr-defined]
    ref = model({"model": "ref-deaf-voices", "voices": mine})
    assert type(ref).__name__ == "ReferenceVoices"
    assert parse_voices("") == {} and parse_voices({"young_female": "x"}) == {"young_female": "x"}
    for bad in ("{not json", '{"teen_male": "x"}', '["x"]', '{"young_male": ""}'):
        with pytest.raises(ConfigError, match="voices"):
            parse_voices(bad)
