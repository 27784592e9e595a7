"""Gemini 2.5 Flash and Gemini 3 Flash over the Gemini API (``generateContent``), as OmniModels.

DEAF §3.1 evaluates both through their official endpoints at temperature 0, one 16 kHz
WAV and one question per request; thinking stays at its default
(:attr:`GeminiAudio.thinking_allowance`). A blocked prompt or an empty candidate gives an
empty answer (the judge labels it Other), never an error. The key comes from
``$GEMINI_API_KEY`` only; ``base_url`` points at Google's endpoint by default and at a
local stub server in tests and the demo.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.http_api import JsonApi, SpendMeter, api_key, wav_base64
from madbench_common.models.roles import Frames, OmniAnswer

__all__ = ["Gemini3Flash", "Gemini25Flash", "GeminiAudio", "Prices"]

log = logging.getLogger("madbench")
DEFAULT_BASE = "https://generativelanguage.googleapis.com"
_AUDIO_TOKENS_PER_S = 32
MAX_THINKING_BUDGET = 24576
"""Gemini 2.5 Flash's largest ``thinkingBudget``."""


@dataclass(frozen=True)
class Prices:
    """USD per million tokens: audio input, text input, output. The defaults (Google's list
    prices when this was written, unverified here) feed the spend cap; Gemini counts 32
    tokens per second of audio."""

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
    default_thinking_budget: ClassVar[int | None] = None
    """``thinkingBudget`` sent when the caller sets none (``None``: no ``thinkingConfig``)."""

    def __init__(self, base_url: str = DEFAULT_BASE, key_env: str = "GEMINI_API_KEY",
                 rpm: float = 60.0, max_output_tokens: int = 512, temperature: float = 0.0,
                 spend_cap_usd: float = 50.0, timeout_s: float = 120.0,
                 thinking_budget: int | None = None, api: JsonApi | None = None) -> None:
        self.api = api or JsonApi(base_url, {"x-goog-api-key": api_key(key_env)}, rpm=rpm,
                                  timeout_s=timeout_s, key_env=key_env)
        self.max_output_tokens, self.temperature = max_output_tokens, temperature
        self.thinking_budget = (self.default_thinking_budget if thinking_budget is None
                                else thinking_budget)
        self.meter = SpendMeter(spend_cap_usd)
        thinking = "default" if self.thinking_budget is None else str(self.thinking_budget)
        self.version = (f"{self.model_id}@{'api' if base_url == DEFAULT_BASE else base_url}"
                        f"+thinking:{thinking}")

    def request(self, prompt: str, audio: Audio, sample_rate: Hertz,
                max_new_tokens: int | None = None) -> dict[str, Any]:
        """The ``generateContent`` body for one question about one clip: the audio inline
        (``inline_data``, ``audio/wav``) before the text part."""
        part = {"inline_data": {"mime_type": "audio/wav", "data": wav_base64(audio, sample_rate)}}
        config: dict[str, Any] = {"temperature": self.temperature, "maxOutputTokens":
                                  (max_new_tokens or self.max_output_tokens)
                                  + self.thinking_allowance}
        if self.thinking_budget is not None:
            config["thinkingConfig"] = {"thinkingBudget": self.thinking_budget}
        return {"contents": [{"role": "user", "parts": [part, {"text": prompt}]}],
                "generationConfig": config}

    @property
    def thinking_allowance(self) -> int:
        """Tokens added to the answer cap for thinking.

        Both models think before they answer, and the Gemini API counts thinking tokens
        against ``maxOutputTokens``: with the 256-token cap the local models get, a thought
        of more than 256 tokens leaves the reply empty (``finishReason: MAX_TOKENS``, no
        text part). §3.1 runs every model with its "default inference settings (temperature
        = 0 where applicable)", and thinking is Gemini 2.5 Flash's default (a dynamic
        budget, ``thinkingBudget: -1``; 0 would switch it off) as it is Gemini 3 Flash's
        (its default thinking level). So thinking stays on at its default, and
        ``maxOutputTokens`` is the answer cap plus this allowance (24,576, the largest
        budget Gemini 2.5 Flash accepts, used for Gemini 3 Flash too); the paper sets no
        token cap at all. ``thinking_budget`` sets an explicit budget (0: no thinking, a
        documented deviation) and then the allowance is that budget. The report counts
        empty replies per model; an empty reply is logged with its finish reason.
        """
        if self.thinking_budget is None or self.thinking_budget < 0:
            return MAX_THINKING_BUDGET
        return self.thinking_budget

    def answer(self, prompt: str, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0,
               choices: Sequence[str] = (), max_new_tokens: int = 512) -> OmniAnswer:
        """Free-form answer text (the API exposes no option logits: ``options`` is empty)."""
        start = time.perf_counter()
        seconds = len(audio) / sample_rate
        body = self.request(prompt, audio, sample_rate, max_new_tokens)
        worst = (seconds * _AUDIO_TOKENS_PER_S * self.prices.audio_in
                 + len(prompt) * self.prices.text_in
                 + body["generationConfig"]["maxOutputTokens"] * self.prices.out)
        self.meter.check(worst / 1e6)
        resp = self.api.post(f"/v1beta/models/{self.model_id}:generateContent", body)
        self.meter.add(self._cost(resp.get("usageMetadata", {})))
        text = answer_text(resp)
        if not text:
            reason = ((resp.get("candidates") or [{}])[0].get("finishReason")
                      or (resp.get("promptFeedback") or {}).get("blockReason", "no candidate"))
            log.warning("%s: empty reply (%s)", self.slug, reason)
        return OmniAnswer(text=text, seconds=time.perf_counter() - start)

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
    default_thinking_budget = -1
    """Dynamic thinking: the model's own default, sent explicitly."""


class Gemini3Flash(GeminiAudio):
    """Gemini 3 Flash (Google DeepMind 2025; the API's preview model id)."""

    model_id = "gemini-3-flash-preview"
    slug = "deaf-gemini-3-flash"
    prices = Prices(1.0, 0.5, 3.0)
