"""The modality sanity check: does the model's answer depend on the audio and the video?

Public evaluation harnesses have silently dropped a modality in the processor (the model
then answers from the prompt alone). So, before trusting an omni model's numbers,
:func:`modality_sanity` replaces the audio by silence and noise and shuffles the video on
a few clips (``madbench omni sanity``, and every adapter test of an open model).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from madbench_common.benchmarks.madbench.omni.ask import Media, Outcome, ask
from madbench_common.benchmarks.madbench.prompts import Question
from madbench_common.models.roles import OmniModel

__all__ = ["SanityCheck", "modality_sanity", "sanity_json"]


@dataclass(frozen=True)
class SanityCheck:
    """One perturbation's effect over the clips."""

    name: str
    task: str
    clips: int
    max_change: float
    """Largest |Δ p| of any option over the clips (0 when the model exposes no logits)."""
    mean_change: float
    """Mean over clips of the largest |Δ p| per clip."""
    texts_changed: int
    passed: bool


def _shift(a: Outcome, b: Outcome) -> float:
    if a.probs is None or b.probs is None:
        return 0.0
    return max(abs(a.probs.probs[k] - b.probs.probs[k]) for k in a.probs.probs)


def _compare(name: str, question: Question, base: list[Outcome], other: list[Outcome],
             tol: float) -> SanityCheck:
    shifts = [_shift(a, b) for a, b in zip(base, other)]
    texts = sum(a.answer.text != b.answer.text for a, b in zip(base, other))
    top = max(shifts, default=0.0)
    return SanityCheck(name, question.task, len(base), top,
                       float(np.mean(shifts)) if shifts else 0.0, texts,
                       top > tol or texts > 0)


def _run(model: OmniModel, question: Question, media: Sequence[Media],
         max_new_tokens: int) -> list[Outcome]:
    mode = "AV" if media and media[0].frames is not None else "A"
    return [ask(model, question, inputs=(str(i),), mode=mode, load=_const(m),
                max_new_tokens=max_new_tokens) for i, m in enumerate(media)]


def _const(media: Media) -> Callable[[], Media]:
    return lambda: media


def _noise(m: Media, rng: np.random.Generator) -> Media:
    x = np.asarray(m.audio, np.float32)
    rms = float(np.sqrt(np.mean(x**2))) if x.size else 0.0
    return replace(m, audio=rng.normal(0.0, max(rms, 1e-3), x.shape).astype(np.float32))


def modality_sanity(model: OmniModel, clips: Sequence[Media], audio_question: Question,
                    av_question: Question | None = None, *, tol: float = 1e-6,
                    seed: int = 0, max_new_tokens: int = 8) -> list[SanityCheck]:
    """Silence and noise checks on ``audio_question`` (A), and a shuffled-video check on
    ``av_question`` (A-V, needs frames on at least two clips and a model taking AV).

    Silence and noise: the same audio question with the audio replaced by zeros, and by
    white noise at the clip's RMS (seeded), must change the answer distribution (the
    option probabilities, or the generated text where a model hides its logits). Shuffled
    video: the same A-V question with each clip shown another clip's frames (a cycle) must
    be able to differ from the paired answer. A check passes when at least one clip's
    answer moves: the largest change of any option probability exceeds ``tol`` (default
    1e-6: a dropped modality leaves the probabilities bit-identical; real models move by
    far more), or the text changes."""
    audio_only = [replace(m, frames=None, fps=0.0) for m in clips]
    base = _run(model, audio_question, audio_only, max_new_tokens)
    silent = [replace(m, audio=np.zeros_like(np.asarray(m.audio, np.float32))) for m in audio_only]
    rng = np.random.default_rng(seed)
    noisy = [_noise(m, rng) for m in audio_only]
    checks = [_compare("silence", audio_question, base,
                       _run(model, audio_question, silent, max_new_tokens), tol),
              _compare("noise", audio_question, base,
                       _run(model, audio_question, noisy, max_new_tokens), tol)]
    with_video = [m for m in clips if m.frames is not None]
    if av_question is not None and "AV" in model.modes and len(with_video) > 1:
        shuffled = [replace(m, frames=with_video[(i + 1) % len(with_video)].frames,
                            fps=with_video[(i + 1) % len(with_video)].fps)
                    for i, m in enumerate(with_video)]
        checks.append(_compare("shuffled_video", av_question,
                               _run(model, av_question, with_video, max_new_tokens),
                               _run(model, av_question, shuffled, max_new_tokens), tol))
    return checks


def sanity_json(model: OmniModel, checks: Sequence[SanityCheck]) -> str:
    """The checks as JSON (what ``madbench omni sanity --json`` prints)."""
    return json.dumps({"model": model.slug, "version": model.version,
                       "passed": all(c.passed for c in checks),
                       "checks": [asdict(c) for c in checks]}, indent=1)
