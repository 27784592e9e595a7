"""Shared pre- and post-processing of the real speech generators (paper §3.3).

The four model adapters (F5-TTS, IndexTTS2, Seed-VC, Vevo-Timbre) differ only in how they
call their model; everything around the call lives here so that they treat inputs and
outputs alike: input checks that fail one component, never the shard
(:class:`GenerationFailed`), reference preparation, seeding (:func:`seed_all`) and the
output fit to the requested duration (:func:`fit_speech`), described by a
:class:`GenerationReport` that the stage writes onto the component row.
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.media.audio import resample
from madbench_common.media.dsp import n_samples, time_stretch, trim_silence

__all__ = [
    "GenerationFailed",
    "GenerationReport",
    "ReportingGenerator",
    "check_text",
    "fit_speech",
    "guard_oom",
    "prepare_reference",
    "seed_all",
]

_SILENCE_DB = -40.0
"""Frames this far below the loudest 10 ms frame count as leading/trailing silence."""


class GenerationFailed(RuntimeError):
    """One component could not be generated; ``why`` is a short machine-readable code
    (``empty_text``, ``unsupported_characters``, ``reference_too_short``,
    ``source_too_short``, ``out_of_memory``, ``empty_output``, ``no_speech_tokens``).

    It subclasses ``RuntimeError`` so that the generator stages record it as a
    ``generation_failed`` row (detail ``GenerationFailed: <why>: <detail>``) and go on:
    a data reason (:attr:`data_error`), except ``out_of_memory`` (:func:`guard_oom`), a
    GPU fault that counts against the stage's rejection budget
    (:mod:`~madbench_common.pipeline.failures`).
    """

    def __init__(self, why: str, detail: str = "") -> None:
        self.why = why
        super().__init__(f"{why}: {detail}" if detail else why)

    @property
    def gpu_out_of_memory(self) -> bool:
        return self.why == "out_of_memory"

    @property
    def data_error(self) -> bool:
        """Whether the input is what failed (empty text, a too-short reference, …)."""
        return not self.gpu_out_of_memory


@dataclass(frozen=True)
class GenerationReport:
    """What one generator call did to reach the requested duration: how long the model's
    speech was, the time-stretch factor applied (the "length correction"), which duration
    control was used (the model's own, or none, so only the time-stretch), and the sampler
    settings."""

    model_rate: Hertz
    """The model's native output rate (before resampling to the pipeline's)."""
    raw_seconds: Seconds
    """Length of the model's speech after trimming leading/trailing silence."""
    target_seconds: Seconds
    duration_control: str
    """``model:<how>`` where the model was asked for the duration itself (e.g.
    ``model:fix_duration``), ``model:length_adjust`` for VC that keeps the source
    timing, or ``time_stretch`` where only the WSOLA fallback set the length."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Seed and sampler settings (steps, guidance), JSON-serialisable."""

    @property
    def length_correction(self) -> float:
        """Time-stretch factor applied after generation (target / raw; 1.0 = none)."""
        return self.target_seconds / self.raw_seconds if self.raw_seconds > 0 else 0.0

    def as_settings(self) -> dict[str, Any]:
        """The adapter's ``last_settings``: sampler settings plus the length facts (the
        stage writes them as ``gen_settings`` JSON and the two length columns)."""
        return {**self.settings, "model_rate": self.model_rate,
                "raw_seconds": round(self.raw_seconds, 4),
                "duration_control": self.duration_control,
                "length_correction": round(self.length_correction, 6)}


class ReportingGenerator:
    """Mixin of the speech adapters: ``last_report`` and, for the stage, ``last_settings``."""

    last_report: GenerationReport | None = None

    @property
    def last_settings(self) -> dict[str, Any]:
        """Settings of the last call (the generator stages copy them onto the row)."""
        return self.last_report.as_settings() if self.last_report is not None else {}


def check_text(text: str, *, what: str = "text",
               supported: Callable[[str], bool] | None = None) -> str:
    """``text`` with whitespace collapsed; fails on empty text or unsupported letters.

    ``supported(ch)`` says whether the model can say a character. Only letters and
    digits are checked: punctuation the model lacks is harmless (models drop it), a
    letter it lacks (another script) would be spoken wrongly or not at all.
    """
    words = " ".join(unicodedata.normalize("NFC", text or "").split())
    if not words:
        raise GenerationFailed("empty_text", f"{what} is empty")
    if supported is not None:
        bad = sorted({ch for ch in words if ch.isalnum() and not supported(ch)})
        if bad:
            chars = "".join(bad[:20])
            raise GenerationFailed("unsupported_characters",
                                   f"{what} has characters the model cannot say: {chars}")
    return words


def prepare_reference(audio: Audio, sample_rate: Hertz, *, min_seconds: Seconds,
                      what: str = "reference") -> Audio:
    """The reference speech with leading/trailing silence trimmed, at least ``min_seconds``."""
    x = np.asarray(audio, np.float32)
    core = trim_silence(x, sample_rate, _SILENCE_DB) if len(x) and np.any(x) else x[:0]
    if len(core) < min_seconds * sample_rate:
        raise GenerationFailed(f"{what}_too_short",
                               f"{len(core) / sample_rate:.2f} s of {what} speech "
                               f"< {min_seconds:.2f} s")
    return core


def conversion_inputs(source_audio: Audio | None, ref_audio: Audio, sample_rate: Hertz, *,
                      min_seconds: Seconds, seed: int) -> tuple[Audio, Audio]:
    """A voice conversion's source and reference speech, trimmed and checked
    (:func:`prepare_reference`), with every RNG seeded (:func:`seed_all`)."""
    if source_audio is None:
        raise GenerationFailed("source_too_short", "voice conversion needs source_audio")
    src = prepare_reference(source_audio, sample_rate, min_seconds=min_seconds, what="source")
    ref = prepare_reference(ref_audio, sample_rate, min_seconds=min_seconds)
    seed_all(seed)
    return src, ref


def same_and_cross(base: type[Any], slug: str, names: tuple[str, str]) -> tuple[type[Any],
                                                                              type[Any]]:
    """A TTS generator's two registered models (MADBench §3.3): ``<slug>-same``, the source
    transcript in the source speaker's voice (branch ``tts_same``), and ``<slug>-cross``,
    in the paired target speaker's voice (``tts_cross``), as subclasses named ``names``."""
    whose = {"same": "the source speaker's voice", "cross": "the paired target speaker's voice"}
    made = [type(name, (base,), {
        "slug": f"{slug}-{kind}", "branch": f"tts_{kind}", "__module__": base.__module__,
        "__qualname__": name,
        "__doc__": f"{kind.title()}-identity TTS: the source transcript in {whose[kind]}."})
        for name, kind in zip(names, ("same", "cross"))]
    return made[0], made[1]


def seed_all(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and every CUDA device) with ``seed``."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


@contextmanager
def guard_oom() -> Iterator[None]:
    """Turn a CUDA out-of-memory error into :class:`GenerationFailed` (``out_of_memory``)."""
    import torch

    try:
        yield
    except torch.OutOfMemoryError as exc:
        torch.cuda.empty_cache()
        raise GenerationFailed("out_of_memory", str(exc).splitlines()[0]) from None


def fit_speech(speech: np.ndarray, model_rate: Hertz, *, sample_rate: Hertz,
               duration: Seconds, duration_control: str,
               settings: Mapping[str, Any] | None = None) -> tuple[Audio, GenerationReport]:
    """The model's output at ``sample_rate``, silence-trimmed and stretched to ``duration``.

    Resampled from the model's rate, leading and trailing silence trimmed, and
    time-stretched (WSOLA, :func:`madbench_common.media.dsp.time_stretch`) to exactly the
    requested duration; the stage then places it in the source's speech regions
    (:func:`madbench_common.media.dsp.place_in_regions`).

    Returns exactly ``round(duration * sample_rate)`` samples and the report of what
    was done. Fails with ``empty_output`` when the model produced no audible speech.
    """
    x = np.nan_to_num(np.asarray(speech, np.float32).reshape(-1))
    x = resample(x, model_rate, sample_rate) if model_rate != sample_rate else x
    n = n_samples(duration, sample_rate)
    if n <= 0:
        raise GenerationFailed("empty_text", f"requested duration {duration} s is not positive")
    if len(x) == 0 or not np.any(x):
        raise GenerationFailed("empty_output", "the model returned silence")
    core = trim_silence(x, sample_rate, _SILENCE_DB)
    out = core if len(core) == n else time_stretch(core, n, sample_rate)
    peak = float(np.max(np.abs(out))) if len(out) else 0.0
    if peak > 1.0:
        out = out / peak
    report = GenerationReport(model_rate, len(core) / sample_rate, n / sample_rate,
                              duration_control, dict(settings or {}))
    return np.asarray(out, np.float32), report
