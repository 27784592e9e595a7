"""API adapters (Gemini, GPT-4o audio, ElevenLabs, the judge's chat client) against a local stub.

Never the real endpoints: :func:`stub_server` binds 127.0.0.1 on a free port and speaks
the request/response shapes, including injected 429s, 5xx, 400 and a wrong key.
"""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters.elevenlabs import ElevenLabsTTS
from madbench_common.models.adapters.gemini import Gemini3Flash, Gemini25Flash
from madbench_common.models.adapters.openai_compat import ChatClient, Gpt4oAudio, strip_thinking
from madbench_common.models.api_stub import STUB_KEY, Fault, stub_server
from madbench_common.models.http_api import (
    ApiError,
    JsonApi,
    RateLimiter,
    RetryPolicy,
    SpendCapExceeded,
)

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


def test_gemini_thinking_does_not_eat_the_answer_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemini counts thinking tokens against maxOutputTokens (the stub thinks 300 tokens).
    With the bare 256-token cap, 2.5 Flash's default thinking leaves the reply empty;
    with thinking at its default (dynamic, -1) and the 24,576-token allowance on top of
    the cap, the answer comes back. thinking_budget=0 switches thinking off."""
    from madbench_common.models.adapters.gemini import MAX_THINKING_BUDGET
    from madbench_common.models.api_stub import STUB_THOUGHT_TOKENS

    monkeypatch.setenv("GEMINI_API_KEY", STUB_KEY)
    prompt = f"{CLAIM} {QUESTION}"
    assert STUB_THOUGHT_TOKENS > 256
    with stub_server() as stub:
        model = Gemini25Flash(base_url=stub.url, rpm=0)
        ans = model.answer(prompt, _audio(), 22050, max_new_tokens=256)
        bare = model.request(prompt, _audio(), 22050, 256)
        bare["generationConfig"] = {"temperature": 0, "maxOutputTokens": 256}  # the old body
        empty = model.api.post("/v1beta/models/gemini-2.5-flash:generateContent", bare)
        off = Gemini25Flash(base_url=stub.url, rpm=0, thinking_budget=0)
        no_thought = off.answer(prompt, _audio(), 22050, max_new_tokens=256)
        g3 = Gemini3Flash(base_url=stub.url, rpm=0).answer(prompt, _audio(), 22050,
                                                           max_new_tokens=256)
    config = stub.requests[0]["body"]["generationConfig"]
    assert config["thinkingConfig"] == {"thinkingBudget": -1}
    assert config["maxOutputTokens"] == 256 + MAX_THINKING_BUDGET
    assert ans.text == CLAIM
    assert empty["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert "parts" not in empty["candidates"][0]["content"]
    assert no_thought.text == CLAIM
    assert stub.requests[2]["body"]["generationConfig"]["maxOutputTokens"] == 256
    assert g3.text == CLAIM  # Gemini 3 keeps its default thinking level (no thinkingConfig)
    assert "thinkingConfig" not in stub.requests[3]["body"]["generationConfig"]
    assert model.version.endswith("+thinking:-1") and off.version.endswith("+thinking:0")


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
    from madbench_common.benchmarks.deaf.design import ELEVENLABS_VOICES, VOICE_PROFILES

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

    from madbench_common.benchmarks.deaf.graph import build_deaf_graph
    from madbench_common.benchmarks.deaf.stages_stimuli import SicStage, parse_voices
    from madbench_common.pipeline.paramspec import build_params

    monkeypatch.setenv("ELEVENLABS_API_KEY", STUB_KEY)
    stage = build_deaf_graph()["sic_tts"]

    def model(params: dict[str, object]) -> object:
        ctx = SimpleNamespace(params=params, stage=stage)
        typed = build_params(SicStage.Params, params, stage.name)
        return SicStage.model.func(SimpleNamespace(ctx=ctx, p=typed))  # type: ignore[attr-defined]

    mine = '{"young_male": "abc", "elderly_female": "def"}'
    tts = model({"model": "deaf-elevenlabs", "voices": mine})
    assert tts.voices == {"young_male": "abc", "elderly_female": "def"}  # type: ignore[attr-defined]
    ref = model({"model": "ref-deaf-voices", "voices": mine})
    assert type(ref).__name__ == "ReferenceVoices"
    assert parse_voices("") == {} and parse_voices({"young_female": "x"}) == {"young_female": "x"}
    for bad in ("{not json", '{"teen_male": "x"}', '["x"]', '{"young_male": ""}'):
        with pytest.raises(ConfigError, match="voices"):
            parse_voices(bad)


def test_azure_tts_sends_ssml_and_decodes_the_mp3(monkeypatch: pytest.MonkeyPatch) -> None:
    """BSC's narrator (Appendix A.2.2: Microsoft neural TTS, en-US-GuyNeural, saved as MP3,
    converted to 16 kHz mono): the request is Azure's — SSML over REST, key in
    Ocp-Apim-Subscription-Key — and the MP3 reply is decoded and resampled. Text with XML
    characters survives; 429s are retried; a wrong key is a configuration error."""
    import xml.etree.ElementTree as ET

    from madbench_common.models.adapters.azure_tts import AzureNeuralTTS
    from madbench_common.models.deaf_roles import NARRATOR

    monkeypatch.setenv("AZURE_SPEECH_KEY", STUB_KEY)
    text = "Fish & chips <tonight>, said \"Guy\"."
    sleep = FakeSleep()
    with stub_server(faults=[Fault(429, retry_after="2")]) as stub:
        api = JsonApi(stub.url, {"Ocp-Apim-Subscription-Key": STUB_KEY}, rpm=0, sleep=sleep)
        tts = AzureNeuralTTS(api=api)
        audio = tts.synthesise(text, NARRATOR, SR)
        wav = AzureNeuralTTS(base_url=stub.url, rpm=0,
                             output_format="riff-16khz-16bit-mono-pcm").synthesise(
            "Hello there.", NARRATOR, SR)
        with pytest.raises(ConfigError, match="no voice for profile 'young_male'"):
            tts.synthesise(text, "young_male", SR)
        monkeypatch.setenv("AZURE_SPEECH_KEY", "wrong")
        with pytest.raises(ConfigError, match="refused the key"):
            AzureNeuralTTS(base_url=stub.url, rpm=0).synthesise("Hi.", NARRATOR, SR)
    req = stub.requests[1]
    headers = {k.lower(): v for k, v in req["headers"].items()}  # HTTP: any case
    assert req["path"] == "/cognitiveservices/v1" and sleep.calls and sleep.calls[0] >= 2.0
    assert headers["content-type"] == "application/ssml+xml"
    assert headers["x-microsoft-outputformat"] == "audio-24khz-48kbitrate-mono-mp3"
    assert headers["ocp-apim-subscription-key"] == STUB_KEY
    voice = ET.fromstring(req["body"]).find("{http://www.w3.org/2001/10/synthesis}voice")
    assert voice is not None and voice.get("name") == "en-US-GuyNeural" and voice.text == text
    # the stub's tone lasts 60 ms per character; MP3 adds a few ms of codec delay
    assert abs(len(audio) / SR - 0.06 * len(text)) < 0.1 and np.abs(audio).max() > 0.05
    assert abs(len(wav) / SR - 0.06 * 12) < 0.01
    assert tts.version == "azure-neural-tts:en-US-GuyNeural@api+audio-24khz-48kbitrate-mono-mp3"
    with pytest.raises(ConfigError, match="output format"):
        AzureNeuralTTS(api=api, output_format="ogg-24khz-16bit-mono-opus")
