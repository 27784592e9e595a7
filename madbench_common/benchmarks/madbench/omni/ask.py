"""Asking one question on one input: through the cache, then parsed and scored.

:func:`ask` is the unit every omni stage (and DEAF) runs: build the
:class:`~madbench_common.models.answer_cache.ResponseKey` from the input hashes alone, return the
cached reply or load the media and call the model (greedy, ``max_new_tokens``, scoring
the question's option surface forms), then parse the text and turn the option
log-probs into label probabilities. A reply with neither probabilities nor a parsed
label is *excluded* — never replaced by a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from madbench_common.benchmarks.madbench.omni.parse import REFUSAL, UNPARSED, parse_answer
from madbench_common.benchmarks.madbench.omni.scoring import LabelProbs, label_probs
from madbench_common.benchmarks.madbench.prompts import Question
from madbench_common.core.types import Audio
from madbench_common.models.answer_cache import ResponseCache, ResponseKey, choices_setting
from madbench_common.models.roles import Frames, OmniAnswer, OmniModel

__all__ = ["Media", "Outcome", "ask", "request", "response_key"]


@dataclass(frozen=True)
class Media:
    """The decoded input of one call: mono audio and, for A-V, frames at ``fps``."""

    audio: Audio
    sample_rate: int
    frames: Frames | None = None
    fps: float = 0.0


@dataclass(frozen=True)
class Outcome:
    """A question's reply on one input, parsed and scored."""

    question: Question
    answer: OmniAnswer
    parsed: str
    probs: LabelProbs | None
    cached: bool = False
    key: ResponseKey | None = field(default=None, compare=False)

    @property
    def excluded(self) -> bool:
        """Neither option probabilities nor a usable parsed answer."""
        return self.probs is None and self.parsed in (REFUSAL, UNPARSED)


def _call(model: OmniModel, question: Question, load: Callable[[], Media],
          max_new_tokens: int) -> OmniAnswer:
    media = load()
    return model.answer(question.full_text, media.audio, media.sample_rate, frames=media.frames,
                        fps=media.fps, choices=question.choices(),
                        max_new_tokens=max_new_tokens)


def response_key(model: OmniModel, question: Question, *, inputs: tuple[str, ...], mode: str,
                 image: str = "", pairing: str = "paired", max_new_tokens: int = 8,
                 settings: Mapping[str, Any] | None = None, identity: str = "") -> ResponseKey:
    """The cache key of ``question`` on the input identified by ``inputs`` (see :func:`ask`)."""
    return ResponseKey(model.slug, model.version, image, question.hash, inputs, mode, pairing,
                       {**(settings or {}), "max_new_tokens": max_new_tokens,
                        "choices": choices_setting(question.choices())}, identity)


def ask(model: OmniModel, question: Question, *, inputs: tuple[str, ...], mode: str,
        load: Callable[[], Media], cache: ResponseCache | None = None, image: str = "",
        pairing: str = "paired", max_new_tokens: int = 8,
        settings: Mapping[str, Any] | None = None, identity: str = "",
        answered: OmniAnswer | None = None) -> Outcome:
    """``question`` on the input identified by ``inputs`` (sha256s), loaded only on a miss;
    ``identity`` is the loaded model's (:func:`~madbench_common.pipeline.identity.
    cache_identity`: adapter code, weights pins, dtype, message layout). ``answered``: the
    model's reply already obtained in a batch (:func:`request`), used on a cache miss
    instead of calling the model again."""
    key = response_key(model, question, inputs=inputs, mode=mode, image=image, pairing=pairing,
                       max_new_tokens=max_new_tokens, settings=settings, identity=identity)

    def call() -> OmniAnswer:
        return answered if answered is not None else _call(model, question, load,
                                                           max_new_tokens)

    if cache is None:
        answer, cached = call(), False
    else:
        answer, cached = cache.fetch(key, call)
    return Outcome(question, answer, parse_answer(answer.text, question),
                   label_probs(question, answer), cached, key)


def request(question: Question, media: Media, max_new_tokens: int) -> dict[str, Any]:
    """The keyword arguments of the model call :func:`ask` makes (``OmniModel.answer``), for
    a batched call (:func:`~madbench_common.models.batching.answer_batch`)."""
    return {"prompt": question.full_text, "audio": media.audio,
            "sample_rate": media.sample_rate, "frames": media.frames, "fps": media.fps,
            "choices": question.choices(), "max_new_tokens": max_new_tokens}
