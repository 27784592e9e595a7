"""A small JSON-over-HTTPS client for hosted model APIs: rate limit, retries, spend cap.

Used by the API adapters (Gemini, GPT-4o audio, ElevenLabs, Azure neural TTS) and the
OpenAI-compatible LLM judge. Standard library only (``urllib``), so it runs in every image.
:class:`JsonApi` posts under one policy: endpoint (:func:`resolve_base_url`), keys only from
the environment (:func:`api_key`; on the cluster from a Kubernetes Secret), a token bucket
of ``rpm`` requests per minute (:class:`RateLimiter`), retries (:class:`RetryPolicy`) and a
spend cap (:class:`SpendMeter`).
"""

from __future__ import annotations

import base64
import email.utils
import io
import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import soundfile as sf

from madbench_common.core.errors import ConfigError, MadbenchError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample

__all__ = ["ApiError", "JsonApi", "RateLimiter", "RetryPolicy", "SpendCapExceeded",
           "SpendMeter", "api_key", "resolve_base_url", "wav_base64", "wav_pcm16"]

log = logging.getLogger("madbench")
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


class ApiError(MadbenchError):
    """The API rejected a request for a reason retrying cannot fix (a 4xx other than auth)."""

    def __init__(self, status: int, body: str, url: str) -> None:
        self.status, self.body = status, body
        super().__init__(f"{url}: HTTP {status}: {body[:300]}")


class SpendCapExceeded(ConfigError):
    """The next call could take the spend over the configured cap."""


def resolve_base_url(base_url: str) -> str:
    """``base_url``, with an ``env:NAME[/path]`` form read from the environment: the URL in
    variable ``NAME`` plus ``/path`` (the local stub's address, which changes every run,
    without changing a stage's parameters or a model's version string)."""
    if not base_url.startswith("env:"):
        return base_url
    name, _, rest = base_url[4:].partition("/")
    value = os.environ.get(name, "")
    if not value:
        raise ConfigError(f"base_url {base_url!r}: environment variable {name} is not set")
    return value.rstrip("/") + ("/" + rest if rest else "")


def api_key(env: str, required: bool = True) -> str:
    """The key in environment variable ``env`` (never a parameter, never logged)."""
    value = os.environ.get(env, "")
    if required and not value:
        raise ConfigError(f"environment variable {env} is not set: the API key comes only "
                          "from the environment (on the cluster: the madbench-api Secret)")
    return value


def wav_pcm16(audio: Audio, sample_rate: Hertz, target: Hertz = 16000) -> bytes:
    """A mono 16-bit PCM WAV at ``target`` Hz (§3.1: the model receives a 16 kHz WAV)."""
    x = np.clip(resample(np.asarray(audio, np.float32), sample_rate, target), -1.0, 1.0)
    buf = io.BytesIO()
    sf.write(buf, x, target, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def wav_base64(audio: Audio, sample_rate: Hertz, target: Hertz = 16000) -> str:
    return base64.b64encode(wav_pcm16(audio, sample_rate, target)).decode("ascii")


class RateLimiter:
    """Token bucket: at most ``rpm`` acquisitions per minute, thread-safe."""

    def __init__(self, rpm: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.interval = 60.0 / rpm if rpm > 0 else 0.0
        self.clock, self.sleep = clock, sleep
        self._next = 0.0
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Wait for the next slot; return the seconds waited."""
        with self._lock:
            now = self.clock()
            wait = max(0.0, self._next - now)
            self._next = max(now, self._next) + self.interval
        if wait > 0:
            self.sleep(wait)
        return wait


@dataclass
class SpendMeter:
    """Running spend in USD against ``cap_usd`` (``0`` = no cap).

    Adds each call's cost (from the reported token usage and the adapter's prices) and
    refuses a call whose worst-case cost would take the total over the cap. The meter is
    per process (per shard on the cluster), so a stage's total is at most
    ``cap × shards``."""

    cap_usd: float = 0.0
    spent_usd: float = 0.0
    calls: int = 0

    def check(self, worst_case_usd: float) -> None:
        if self.cap_usd and self.spent_usd + worst_case_usd > self.cap_usd:
            raise SpendCapExceeded(
                f"spend cap {self.cap_usd:.2f} USD: spent {self.spent_usd:.4f}, the next call "
                f"may cost up to {worst_case_usd:.4f}; raise spend_cap_usd to continue")

    def add(self, usd: float) -> None:
        self.spent_usd += usd
        self.calls += 1


@dataclass(frozen=True)
class RetryPolicy:
    """Connection errors, timeouts, 429 and 5xx are retried up to ``max_retries`` times with
    exponential backoff (``base · 2^attempt``, capped, with ±10 % jitter), waiting at least
    what a ``Retry-After`` header asks. 401/403 are configuration errors (a bad key: never
    retried); other 4xx are :class:`ApiError`."""

    max_retries: int = 6
    base_s: float = 1.0
    cap_s: float = 60.0


def _retry_after(value: str | None) -> float:
    if not value:
        return 0.0
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else 0.0


@dataclass
class JsonApi:
    """POST JSON to ``base_url`` with the policy above; returns parsed JSON or raw bytes."""

    base_url: str
    headers: dict[str, str] = field(default_factory=dict)
    rpm: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: float = 120.0
    key_env: str = ""
    sleep: Callable[[float], None] = time.sleep
    seed: int = 0

    def __post_init__(self) -> None:
        self.limiter = RateLimiter(self.rpm, sleep=self.sleep)
        self._rng = random.Random(self.seed)
        self.retries_done = 0

    def post(self, path: str, body: dict[str, Any], raw: bool = False) -> Any:
        """POST ``body`` as JSON; the parsed JSON reply (``raw``: its bytes)."""
        return self._post(path, json.dumps(body).encode(), {"Content-Type": "application/json"},
                          raw)

    def post_bytes(self, path: str, data: bytes, headers: dict[str, str]) -> bytes:
        """POST ``data`` with ``headers`` (its ``Content-Type`` among them); the reply bytes."""
        return bytes(self._post(path, data, headers, raw=True))

    def _post(self, path: str, data: bytes, headers: dict[str, str], raw: bool) -> Any:
        url = resolve_base_url(self.base_url).rstrip("/") + path
        for attempt in range(self.retry.max_retries + 1):
            self.limiter.acquire()
            try:
                return self._once(url, data, raw, headers)
            except _Retryable as exc:
                if attempt == self.retry.max_retries:
                    raise ApiError(exc.status, exc.body, url) from None
                self.retries_done += 1
                delay = min(self.retry.cap_s, self.retry.base_s * 2 ** attempt)
                delay = max(delay * (0.9 + 0.2 * self._rng.random()), exc.retry_after)
                log.info("%s: %s; retry %d in %.1fs", url, exc.status or exc.body, attempt + 1,
                         delay)
                self.sleep(delay)
        raise AssertionError("unreachable")

    def _once(self, url: str, data: bytes, raw: bool, headers: dict[str, str]) -> Any:
        req = urllib.request.Request(url, data=data, method="POST",
                                     headers={**headers, **self.headers})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace")
            if exc.code in (401, 403):
                raise ConfigError(f"{url}: HTTP {exc.code}: the API refused the key"
                                  + (f" in ${self.key_env}" if self.key_env else "")) from None
            if exc.code in _RETRY_STATUS:
                raise _Retryable(exc.code, body,
                                 _retry_after(exc.headers.get("Retry-After"))) from None
            raise ApiError(exc.code, body, url) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise _Retryable(0, str(exc), 0.0) from None
        return payload if raw else json.loads(payload)


class _Retryable(Exception):
    def __init__(self, status: int, body: str, retry_after: float) -> None:
        super().__init__(status, body)
        self.status, self.body, self.retry_after = status, body, retry_after
