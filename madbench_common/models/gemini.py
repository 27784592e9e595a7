"""Gemini 2.5 Flash and Gemini 3 Flash over the Gemini API (``generateContent``), as OmniModels.

DEAF §3.1 evaluates both through their official endpoints at temperature 0, one 16 kHz
WAV and one question per request. The request carries the audio inline
(``inline_data``, ``audio/wav``) before the text part; the answer is the concatenated
text parts of the first candidate, thought parts skipped. A blocked prompt or an empty
candidate gives an empty answer (the judge labels it Other), never an error.

The key comes from ``$GEMINI_API_KEY`` only. ``base_url`` points at Google's endpoint by
default and at a local stub server in tests and the demo. Default prices (USD per
million tokens: audio input, text input, output — Google's list prices when this was
written, unverified here) feed the spend cap; Gemini counts 32 tokens per second of audio.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from madbench_common.models.http_api import JsonApi, SpendMeter, api_key, wav_base64
from madbench_common.roles import Frames, OmniAnswer
from madbench_common.types import Audio, Hertz

__all__ = ["Gemini3Flash", "Gemini25Flash", "GeminiAudio", "Prices"]

DEFAULT_BASE = "https://generativelanguage.googleapis.com"
_AUDIO_TOKENS_PER_S = 32


@dataclass(frozen=True)
class Prices:
    """USD per million tokens."""

    audio_in: float
    text_in: float
    out: float


class GeminiAudio:
    """One Gemini model behind ``generateContent`` (subclasses fix ``model_id``)."""

    model_id: ClassVar[str] = ""
    slug: ClassVar[str] = ""
    prices: ClassVar[Prices] = Prices(1.0, 0.3, 2.5)
    reference = False
    modes = ("A",)

    def __init__(self, base_url: str = DEFAULT_BASE, key_env: str = "GEMINI_API_KEY",
                 rpm: float = 60.0, max_output_tokens: int = 512, temperature: float = 0.0,
                 spend_cap_usd: float = 50.0, timeout_s: float = 120.0,
                 api: JsonApi | None = None) -> None:
        self.api = api or JsonApi(base_url, {"x-goog-api-key": api_key(key_env)}, rpm=rpm,
                                  timeout_s=timeout_s, key_env=key_env)
        self.max_output_tokens, self.temperature = max_output_tokens, temperature
        self.meter = SpendMeter(spend_cap_usd)
        self.version = f"{self.model_id}@{'api' if base_url == DEFAULT_BASE else base_url}"

    def request(self, prompt: str, audio: Audio, sample_rate: Hertz,
                max_new_tokens: int | None = None) -> dict[str, Any]:
        """The ``generateContent`` body for one question about one clip."""
        part = {"inline_data": {"mime_type": "audio/wav", "data": wav_base64(audio, sample_rate)}}
        return {"contents": [{"role": "user", "parts": [part, {"text": prompt}]}],
                "generationConfig": {"temperature": self.temperature,
                                     "maxOutputTokens": max_new_tokens or self.max_output_tokens}}

    def answer(self, prompt: str, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0,
               choices: Sequence[str] = (), max_new_tokens: int = 512) -> OmniAnswer:
        """Free-form answer text (the API exposes no option logits: ``options`` is empty)."""
        start = time.perf_counter()
        seconds = len(audio) / sample_rate
        worst = (seconds * _AUDIO_TOKENS_PER_S * self.prices.audio_in
                 + len(prompt) * self.prices.text_in + max_new_tokens * self.prices.out)
        self.meter.check(worst / 1e6)
        resp = self.api.post(f"/v1beta/models/{self.model_id}:generateContent",
                             self.request(prompt, audio, sample_rate, max_new_tokens))
        self.meter.add(self._cost(resp.get("usageMetadata", {})))
        return OmniAnswer(text=answer_text(resp), seconds=time.perf_counter() - start)

    def _cost(self, usage: dict[str, Any]) -> float:
        details = {d.get("modality", ""): int(d.get("tokenCount", 0))
                   for d in usage.get("promptTokensDetails", [])}
        audio = details.get("AUDIO", 0)
        text = int(usage.get("promptTokenCount", 0)) - audio
        out = int(usage.get("candidatesTokenCount", 0)) + int(usage.get("thoughtsTokenCount", 0))
        return (audio * self.prices.audio_in + text * self.prices.text_in
                + out * self.prices.out) / 1e6


def answer_text(resp: dict[str, Any]) -> str:
    """The first candidate's text parts (thoughts skipped); ``""`` if blocked or empty."""
    candidates = resp.get("candidates") or []
    if not candidates:
        return ""
    parts = (candidates[0].get("content") or {}).get("parts") or []
    return "".join(p.get("text", "") for p in parts if not p.get("thought")).strip()


class Gemini25Flash(GeminiAudio):
    """Gemini 2.5 Flash (Comanici et al. 2025)."""

    model_id = "gemini-2.5-flash"
    slug = "deaf-gemini-2.5-flash"
    prices = Prices(1.0, 0.3, 2.5)


class Gemini3Flash(GeminiAudio):
    """Gemini 3 Flash (Google DeepMind 2025; the API's preview model id)."""

    model_id = "gemini-3-flash-preview"
    slug = "deaf-gemini-3-flash"
    prices = Prices(1.0, 0.5, 3.0)
