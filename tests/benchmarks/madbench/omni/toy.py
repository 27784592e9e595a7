"""A tiny random linear "omni model" for the machinery tests (not a stand-in for any model).

Its next-token logits are a seeded random projection of simple input statistics (audio
RMS, zero-crossing rate, spectral centroid; frame brightness and motion), so its
replies really depend on the audio and the video, and a dropped modality would show.
Tokens are the first two characters of a string; the generated text is the most likely
of a few answer words. It counts its calls, so tests can check what the cache saved.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from madbench_common.core.types import Audio
from madbench_common.models.roles import Frames, OmniAnswer, OptionLogprob

_WORDS = ("Fake.", "Real.", "Yes.", "No.", "R", "S", "E", "Q",
          "I'm sorry, I cannot tell.", "The recording has a voice.")


def _token(text: str) -> str:
    return text[:2]


def _features(audio: Audio, frames: Frames | None, prompt: str) -> np.ndarray:
    x = np.asarray(audio, np.float64)
    spec = np.abs(np.fft.rfft(x[:4096], 4096))
    centroid = float((spec * np.arange(spec.size)).sum() / max(spec.sum(), 1e-9)) / spec.size
    zcr = float(np.mean(np.abs(np.diff(np.signbit(x).astype(int))))) if x.size > 1 else 0.0
    rms = float(np.sqrt(np.mean(x**2))) if x.size else 0.0
    bright = motion = 0.0
    if frames is not None and len(frames):
        f = frames.astype(np.float64) / 255.0
        bright = float(f.mean())
        motion = float(np.abs(np.diff(f, axis=0)).mean()) if len(f) > 1 else 0.0
    p = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:2], "little") / 65535
    return np.array([rms * 10, zcr * 5, centroid * 5, bright * 3, motion * 20, p, 1.0])


class ToyOmni:
    """Seeded linear next-token scores over two-character tokens."""

    slug = "toy-omni"
    version = "toy-1"
    reference = True
    modes = ("A", "AV")

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.calls = 0

    def _weights(self, token: str) -> np.ndarray:
        digest = hashlib.sha256(f"{self.seed}:{token}".encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little")).normal(size=7)

    def _logprobs(self, feats: np.ndarray, tokens: Sequence[str]) -> dict[str, float]:
        vocab = sorted({*tokens, *(_token(w) for w in _WORDS)})
        logits = np.array([self._weights(t) @ feats for t in vocab])
        logp = logits - np.logaddexp.reduce(logits)
        return dict(zip(vocab, logp.tolist()))

    def answer(self, prompt: str, audio: Audio, sample_rate: int, frames: Frames | None = None,
               fps: float = 0.0, choices: Sequence[str] = (),
               max_new_tokens: int = 16) -> OmniAnswer:
        start = time.perf_counter()
        self.calls += 1
        feats = _features(audio, frames, prompt)
        logp = self._logprobs(feats, [_token(c) for c in choices])
        text = max(_WORDS, key=lambda w: logp[_token(w)])
        vocab = sorted(logp)
        options = tuple(OptionLogprob(c, vocab.index(_token(c)), logp[_token(c)])
                        for c in choices)
        return OmniAnswer(text, options, "generate" if choices else "",
                          time.perf_counter() - start)


class BatchedToyOmni(ToyOmni):
    """Answers whole batches (``answer_batch``: one call per batch, its size recorded in
    ``batches``), each request as ``answer`` would; silent audio is bad input, alone or
    anywhere in a batch (the whole batch raises)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.batches: list[int] = []

    def answer(self, prompt: str, audio: Audio, sample_rate: int, frames: Frames | None = None,
               fps: float = 0.0, choices: Sequence[str] = (),
               max_new_tokens: int = 16) -> OmniAnswer:
        if not np.any(audio):
            raise ValueError("silent input")
        return super().answer(prompt, audio, sample_rate, frames, fps, choices, max_new_tokens)

    def answer_batch(self, requests: Sequence[Mapping[str, Any]]) -> list[OmniAnswer]:
        if any(not np.any(r["audio"]) for r in requests):
            raise ValueError("silent input in the batch")
        self.batches.append(len(requests))
        return [ToyOmni.answer(self, **r) for r in requests]
