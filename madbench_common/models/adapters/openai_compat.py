"""OpenAI-style Chat Completions: GPT-4o audio as an OmniModel, and a chat client for the judge.

:class:`Gpt4oAudio` is DEAF §3.1's GPT-4o-Audio; :class:`ChatClient` talks to any
OpenAI-compatible server for the LLM judge. Keys come from the environment only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.adapters.gemini import Prices
from madbench_common.models.http_api import JsonApi, SpendMeter, api_key, wav_base64
from madbench_common.models.roles import Frames, OmniAnswer

__all__ = ["ChatClient", "Gpt4oAudio", "strip_thinking"]

OPENAI_BASE = "https://api.openai.com/v1"
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
_AUDIO_TOKENS_PER_S = 10


def strip_thinking(text: str) -> str:
    """``text`` without ``<think>…</think>`` blocks (an unclosed block runs to the end)."""
    return _THINK.sub("", text).strip()


@dataclass
class ChatClient:
    """Chat Completions against ``base_url`` (``…/v1``) with the shared HTTP policy.

    Any OpenAI-compatible server (OpenAI, DeepSeek's API, a local vLLM); the LLM judge
    (§2.4, DeepSeek-R1) uses it. Reasoning models return their chain of thought in
    ``reasoning_content`` (DeepSeek) or inline ``<think>…</think>`` (vLLM serving R1
    distills); :meth:`complete` returns the final content only. The judge's key variable
    is a parameter (``$JUDGE_API_KEY`` by default) and may be unset for a local vLLM.
    """

    base_url: str
    model: str
    key_env: str = "JUDGE_API_KEY"
    key_required: bool = True
    rpm: float = 60.0
    prices: Prices = field(default_factory=lambda: Prices(0.0, 0.55, 2.19))
    spend_cap_usd: float = 20.0
    api: JsonApi | None = None

    def __post_init__(self) -> None:
        if self.api is None:
            key = api_key(self.key_env, required=self.key_required)
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            self.api = JsonApi(self.base_url, headers, rpm=self.rpm, key_env=self.key_env)
        self.meter = SpendMeter(self.spend_cap_usd)

    def create(self, body: dict[str, Any], worst_usd: float) -> dict[str, Any]:
        """POST ``/chat/completions`` under the spend cap; return the parsed response."""
        assert self.api is not None
        self.meter.check(worst_usd)
        resp: dict[str, Any] = self.api.post("/chat/completions", {"model": self.model, **body})
        self.meter.add(self._cost(resp.get("usage") or {}))
        return resp

    def _cost(self, usage: dict[str, Any]) -> float:
        audio = int((usage.get("prompt_tokens_details") or {}).get("audio_tokens") or 0)
        text = int(usage.get("prompt_tokens", 0)) - audio
        return (audio * self.prices.audio_in + text * self.prices.text_in
                + int(usage.get("completion_tokens", 0)) * self.prices.out) / 1e6

    def complete(self, messages: list[dict[str, Any]], max_tokens: int = 1024,
                 temperature: float = 0.0) -> str:
        """The final answer text of one chat turn (reasoning stripped)."""
        chars = sum(len(str(m.get("content", ""))) for m in messages)
        worst = (chars * self.prices.text_in + max_tokens * self.prices.out) / 1e6
        resp = self.create({"messages": messages, "temperature": temperature,
                            "max_tokens": max_tokens}, worst)
        return strip_thinking(message_text(resp))


def message_text(resp: dict[str, Any]) -> str:
    """The first choice's content; ``""`` for a refusal or an empty choice list."""
    choices = resp.get("choices") or []
    if not choices:
        return ""
    message = choices[0].get("message") or {}
    return str(message.get("content") or "").strip()


class Gpt4oAudio:
    """GPT-4o audio (Hurst et al. 2024) through Chat Completions.

    DEAF §3.1's GPT-4o-Audio: ``gpt-4o-audio-preview`` with ``modalities: ["text"]``, the
    clip as an ``input_audio`` part (base64 16 kHz WAV) after the question text,
    temperature 0. A ``refusal`` message gives an empty answer. The key comes from
    ``$OPENAI_API_KEY`` only. Default prices (USD per million tokens; list prices when
    written, unverified here) feed the spend cap; audio input is about 10 tokens per
    second.
    """

    slug = "deaf-gpt-4o-audio"
    model_id = "gpt-4o-audio-preview"
    reference = False
    modes = ("A",)

    def __init__(self, base_url: str = OPENAI_BASE, key_env: str = "OPENAI_API_KEY",
                 rpm: float = 60.0, max_output_tokens: int = 512, temperature: float = 0.0,
                 spend_cap_usd: float = 50.0, api: JsonApi | None = None) -> None:
        self.client = ChatClient(base_url, self.model_id, key_env, True, rpm,
                                 Prices(40.0, 2.5, 10.0), spend_cap_usd, api)
        self.max_output_tokens, self.temperature = max_output_tokens, temperature
        self.version = f"{self.model_id}@{'api' if base_url == OPENAI_BASE else base_url}"

    def request(self, prompt: str, audio: Audio, sample_rate: Hertz,
                max_new_tokens: int | None = None) -> dict[str, Any]:
        content = [{"type": "text", "text": prompt},
                   {"type": "input_audio",
                    "input_audio": {"data": wav_base64(audio, sample_rate), "format": "wav"}}]
        return {"modalities": ["text"], "temperature": self.temperature,
                "max_tokens": max_new_tokens or self.max_output_tokens,
                "messages": [{"role": "user", "content": content}]}

    def answer(self, prompt: str, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0,
               choices: Sequence[str] = (), max_new_tokens: int = 512) -> OmniAnswer:
        """Free-form answer text (no option logits through this API: ``options`` empty)."""
        start = time.perf_counter()
        p = self.client.prices
        worst = (len(audio) / sample_rate * _AUDIO_TOKENS_PER_S * p.audio_in
                 + len(prompt) * p.text_in + max_new_tokens * p.out) / 1e6
        resp = self.client.create(self.request(prompt, audio, sample_rate, max_new_tokens), worst)
        return OmniAnswer(text=message_text(resp), seconds=time.perf_counter() - start)
