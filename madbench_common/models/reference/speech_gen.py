"""CPU reference speech generators: flite/espeak-ng TTS and WORLD/PSOLA voice conversion.

Stand-ins for the paper's speech generators (F5-TTS, IndexTTS2, SeedVC, Vevo-Timbre),
labelled as references. Two per branch, each a real synthesis or signal-processing
technique: TTS (``tts_same`` / ``tts_cross``) by flite + WORLD or espeak-ng + PSOLA, voice
conversion (``vc``) by WORLD or PSOLA + cepstral. Each class says how it adapts the voice.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from scipy.ndimage import uniform_filter1d
from scipy.signal import istft, stft
from scipy.signal.windows import hann

from madbench_common.core.errors import ConfigError, EnvironmentMissing
from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.media.audio import resample, rms_dbfs
from madbench_common.media.dsp import (
    estimate_warp,
    f0_log_stats,
    f0_track,
    fit_length,
    map_f0,
    mean_log_envelope,
    n_samples,
    normalise,
    retime_world,
    trim_silence,
    warp_envelope,
    world_analyse,
    world_synthesise,
)
from madbench_common.models.speech_prep import GenerationFailed, GenerationReport, same_and_cross

__all__ = [
    "EspeakPsolaCrossTTS",
    "EspeakPsolaSameTTS",
    "FliteWorldCrossTTS",
    "FliteWorldSameTTS",
    "PsolaCepstralVC",
    "WorldVC",
    "psola_convert",
    "world_convert",
]

_SR = 16000
_FP = 5.0
_MAX_DB = 12.0
_FLITE_VOICES = {"kal16": 88.0, "rms": 100.0, "awb": 128.0, "slt": 170.0}
"""Measured mean F0 (Hz) of each flite voice: the voice nearest the reference is used."""
_ESPEAK_VOICES = {"en-us+m1": 93.0, "en-us+m3": 104.0, "en-us+f1": 179.0, "en-us+f3": 206.0}


def _frames_for(n: int) -> int:
    return int(n / _SR * 1000.0 / _FP) + 1


def _ref_f0_stats(ref16: Audio) -> tuple[float, float]:
    try:
        return f0_log_stats(f0_track(ref16, _SR, _FP))
    except ValueError:
        raise GenerationFailed("no_voiced_frames",
                               "ref_audio has no voiced speech to adapt to") from None


def _smooth_db_limited(log_ratio: np.ndarray, width: int) -> np.ndarray:
    limit = _MAX_DB / 20.0 * np.log(10.0)
    return np.clip(uniform_filter1d(log_ratio, size=width, mode="nearest"), -limit, limit)


def world_convert(source16: Audio, ref16: Audio, n_out: int, *, warp: bool) -> Audio:
    """WORLD conversion of 16 kHz ``source16`` towards ``ref16``'s voice, ``n_out`` samples.

    F0: Gaussian log-F0 mapping. Envelope: optional frequency warp, then the smoothed
    per-bin ratio of average envelopes (full strength without warp, half with it).
    """
    src, ref = world_analyse(source16, _SR, _FP), world_analyse(ref16, _SR, _FP)
    try:
        f0 = map_f0(src.f0, f0_log_stats(src.f0), f0_log_stats(ref.f0))
    except ValueError:
        raise GenerationFailed("no_voiced_frames",
                               "source or reference speech has no voiced frames") from None
    ref_env = mean_log_envelope(ref.sp, ref.f0)
    sp = src.sp
    if warp:
        sp = warp_envelope(sp, estimate_warp(mean_log_envelope(sp, src.f0), ref_env, _SR))
    ratio = _smooth_db_limited(ref_env - mean_log_envelope(sp, src.f0), width=19)
    sp = sp * np.exp(ratio * (0.5 if warp else 1.0))[None, :]
    params = retime_world(replace(src, f0=f0, sp=sp), _frames_for(n_out))
    return fit_length(world_synthesise(params), n_out)


def _pitch_marks(x: np.ndarray, f0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Analysis marks (samples), their local periods and voicing, snapped to peaks."""
    hop = _SR * _FP / 1000.0
    marks, periods, voiced = [], [], []
    pos = 0
    while pos < len(x):
        f = f0[min(int(pos / hop), len(f0) - 1)]
        period = int(_SR / f) if f > 0 else int(0.01 * _SR)
        if f > 0 and pos > 0:
            lo, hi = pos - period // 4, min(pos + period // 4, len(x))
            pos = lo + int(np.argmax(np.abs(x[lo:hi]))) if hi > lo else pos
        marks.append(pos)
        periods.append(period)
        voiced.append(f > 0)
        pos += period
    return np.array(marks), np.array(periods), np.array(voiced)


def _psola(x: np.ndarray, f0: np.ndarray, ratio: np.ndarray, n_out: int) -> np.ndarray:
    """TD-PSOLA: pitch scaled by per-frame ``ratio``, time scaled to ``n_out`` samples."""
    marks, periods, voiced = _pitch_marks(x, f0)
    hop = _SR * _FP / 1000.0
    pad = int(periods.max()) + 1
    xp = np.pad(x, (pad, pad))
    y = np.zeros(n_out + 2 * pad)
    stretch, t = n_out / len(x), 0.0
    while t < n_out:
        i = min(int(np.searchsorted(marks, t / stretch)), len(marks) - 1)
        m, p = int(marks[i]), int(periods[i])
        grain = xp[m + pad - p: m + pad + p] * hann(2 * p, sym=False)
        start = int(t) + pad - p
        y[start: start + 2 * p] += grain
        r = ratio[min(int(m / hop), len(ratio) - 1)] if voiced[i] else 1.0
        t += max(p / r, 1.0)
    return y[pad: pad + n_out]


def _cepstral_envelopes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """STFT of ``x`` and its per-frame cepstrally liftered log-magnitude envelopes."""
    _, _, spec = stft(x, _SR, nperseg=512, noverlap=384)
    cep = np.fft.irfft(np.log(np.abs(spec) + 1e-9), axis=0)
    cep[30:-30] = 0.0
    return spec, np.fft.rfft(cep, axis=0).real


def _active_mean(env: np.ndarray, spec: np.ndarray) -> np.ndarray:
    energy = 10 * np.log10(np.sum(np.abs(spec) ** 2, axis=0) + 1e-12)
    return np.asarray(env[:, energy > energy.max() - 30.0].mean(axis=1))


def psola_convert(source16: Audio, ref16: Audio, n_out: int) -> Audio:
    """TD-PSOLA pitch mapping plus cepstral mean substitution towards ``ref16``'s voice."""
    x = np.asarray(source16, np.float64)
    f0 = f0_track(source16, _SR, _FP)
    try:
        mapped = map_f0(f0, f0_log_stats(f0), _ref_f0_stats(ref16))
    except ValueError:
        raise GenerationFailed("no_voiced_frames", "source speech has no voiced frames") from None
    ratio = np.where(f0 > 0, mapped / np.where(f0 > 0, f0, 1.0), 1.0)
    y = _psola(x, f0, ratio, n_out)
    spec, env = _cepstral_envelopes(y)
    ref_spec, ref_env = _cepstral_envelopes(np.asarray(ref16, np.float64))
    corr = _smooth_db_limited(_active_mean(ref_env, ref_spec) - _active_mean(env, spec), 5)
    _, out = istft(spec * np.exp(corr)[:, None], _SR, nperseg=512, noverlap=384)
    return fit_length(out, n_out)


def _run_tts(cmd: list[str], wav: Path) -> Audio:
    if shutil.which(cmd[0]) is None:
        raise EnvironmentMissing(f"{cmd[0]} not found on PATH (apt-get install {cmd[0]})")
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    audio, sr = sf.read(wav, dtype="float32", always_2d=True)
    return resample(audio.mean(axis=1), sr, _SR)


def _nearest_voice(voices: dict[str, float], f0_hz: float) -> str:
    return min(sorted(voices), key=lambda v: abs(np.log(voices[v] / f0_hz)))


class _SpeechBase:
    """Shared plumbing: resampling, exact length and level matching to the reference.

    Output is exactly ``round(duration * sample_rate)`` samples, at the reference speaker's
    active speech level. Like the real adapters (:mod:`madbench_common.models.speech_prep`),
    each call reports in ``last_settings`` how long the synthesiser's own speech was and
    the time-scale factor the final retiming applied (``length_correction`` = target /
    synthesised length), which component QC bounds (paper §3.3 "generation duration").
    Everything is deterministic; ``seed`` is accepted for the interface and changes
    nothing.
    """

    slug: str
    branch: str
    version = "1"
    reference = True
    duration_control = ""
    last_report: GenerationReport | None = None
    _raw_n16: int = 0
    """Samples (16 kHz) of the synthesiser's own speech before the final retiming."""

    @property
    def last_settings(self) -> dict[str, Any]:
        """The last call's length facts (the generator stages copy them onto the row)."""
        return self.last_report.as_settings() if self.last_report is not None else {}

    def generate(self, *, sample_rate: Hertz, duration: Seconds, ref_audio: Audio,
                 ref_text: str = "", text: str = "", source_audio: Audio | None = None,
                 seed: int = 0) -> Audio:
        n = n_samples(duration, sample_rate)
        if n <= 0:
            raise ConfigError(f"{self.slug}: duration must be positive, got {duration}")
        ref16 = trim_silence(resample(ref_audio, sample_rate, _SR), _SR)
        src16 = None if source_audio is None else resample(source_audio, sample_rate, _SR)
        n16 = n_samples(duration, _SR)
        y16 = self._render(ref16, ref_text, text, src16, n16)
        y = fit_length(resample(y16, _SR, sample_rate), n)
        self.last_report = GenerationReport(_SR, self._raw_n16 / _SR, n16 / _SR,
                                            self.duration_control)
        return normalise(y, min(rms_dbfs(ref16), -12.0))

    def _render(self, ref16: Audio, ref_text: str, text: str, src16: Audio | None,
                n16: int) -> Audio:
        raise NotImplementedError


class _TTSBase(_SpeechBase):
    """``tts_same`` / ``tts_cross``: text → speech, adapted to the reference speaker (the
    source speaker for same-identity, the target for cross-identity). TTS first asks the
    synthesiser for the duration itself, so the length correction is what that control
    missed. ``ref_text`` is the text for same-identity TTS when ``text`` is empty
    (re-speaking the source transcript)."""

    def _words(self, text: str, ref_text: str) -> str:
        words = " ".join((text or (ref_text if self.branch == "tts_same" else "")).split())
        if not words:
            raise GenerationFailed("empty_text", f"{self.slug}: text is empty")
        return words

    def _render(self, ref16: Audio, ref_text: str, text: str, src16: Audio | None,
                n16: int) -> Audio:
        words, f0_hz = self._words(text, ref_text), float(np.exp(_ref_f0_stats(ref16)[0]))
        with tempfile.TemporaryDirectory(prefix="madbench-tts-") as tmp:
            first = trim_silence(self._synthesise(words, f0_hz, 1.0, Path(tmp)), _SR)
            stretch = float(np.clip(n16 / max(len(first), 1), 0.5, 2.0))
            speech = trim_silence(self._synthesise(words, f0_hz, stretch, Path(tmp)), _SR)
        self._raw_n16 = len(speech)
        return self._convert(speech, ref16, n16)

    def _synthesise(self, words: str, f0_hz: float, stretch: float, tmp: Path) -> Audio:
        raise NotImplementedError

    def _convert(self, speech16: Audio, ref16: Audio, n16: int) -> Audio:
        raise NotImplementedError


class _FliteWorldTTS(_TTSBase):
    """Debian's flite (4 voices trained on real speakers; duration by its
    ``duration_stretch``, within its clipped range), adapted in WORLD: log-F0 mean/variance
    mapping and the per-bin ratio of the two speakers' average spectral envelopes
    (smoothed), re-timed in WORLD."""

    duration_control = "model:duration_stretch+time_stretch"
    tools = ("flite",)
    """Executables it runs (checked before a run starts: pipeline.preflight)."""

    def _synthesise(self, words: str, f0_hz: float, stretch: float, tmp: Path) -> Audio:
        (tmp / "text.txt").write_text(words, encoding="utf-8")
        voice = _nearest_voice(_FLITE_VOICES, f0_hz)
        return _run_tts(["flite", "-voice", voice, "-f", str(tmp / "text.txt"), "-o",
                         str(tmp / "out.wav"), "--setf", f"duration_stretch={stretch:.3f}"],
                        tmp / "out.wav")

    def _convert(self, speech16: Audio, ref16: Audio, n16: int) -> Audio:
        return world_convert(speech16, ref16, n16, warp=False)


class _EspeakPsolaTTS(_TTSBase):
    """espeak-ng (formant synthesis; duration by words per minute, within its clipped
    range), adapted by TD-PSOLA pitch shifting and time scaling, then cepstral mean
    substitution of the spectral envelope."""

    duration_control = "model:words_per_minute+time_stretch"
    tools = ("espeak-ng",)

    def _synthesise(self, words: str, f0_hz: float, stretch: float, tmp: Path) -> Audio:
        (tmp / "text.txt").write_text(words, encoding="utf-8")
        voice = _nearest_voice(_ESPEAK_VOICES, f0_hz)
        wpm = int(np.clip(175.0 / stretch, 80, 450))
        return _run_tts(["espeak-ng", "-v", voice, "-s", str(wpm), "-f", str(tmp / "text.txt"),
                         "-w", str(tmp / "out.wav")], tmp / "out.wav")

    def _convert(self, speech16: Audio, ref16: Audio, n16: int) -> Audio:
        return psola_convert(speech16, ref16, n16)


FliteWorldSameTTS, FliteWorldCrossTTS = same_and_cross(
    _FliteWorldTTS, "ref-flite-world-tts", ("FliteWorldSameTTS", "FliteWorldCrossTTS"))


EspeakPsolaSameTTS, EspeakPsolaCrossTTS = same_and_cross(
    _EspeakPsolaTTS, "ref-espeak-psola-tts", ("EspeakPsolaSameTTS", "EspeakPsolaCrossTTS"))


class _VCBase(_SpeechBase):
    """``vc``: source speech → target speaker, keeping the source's timing (length
    correction 1.0)."""

    branch = "vc"
    duration_control = "model:source_timing"

    def _render(self, ref16: Audio, ref_text: str, text: str, src16: Audio | None,
                n16: int) -> Audio:
        if src16 is None or len(src16) == 0:
            raise ConfigError(f"{self.slug}: voice conversion needs source_audio")
        self._raw_n16 = len(src16)
        return self._convert(src16, ref16, n16)

    def _convert(self, src16: Audio, ref16: Audio, n16: int) -> Audio:
        raise NotImplementedError


class WorldVC(_VCBase):
    """Voice conversion in WORLD: F0 mapping + envelope frequency warp + residual ratio.

    The warp is estimated from the two speakers' average envelopes; the per-bin residual
    correction is applied at half strength."""

    slug = "ref-world-vc"

    def _convert(self, src16: Audio, ref16: Audio, n16: int) -> Audio:
        return world_convert(src16, ref16, n16, warp=True)


class PsolaCepstralVC(_VCBase):
    """Voice conversion by TD-PSOLA pitch mapping and cepstral mean substitution."""

    slug = "ref-psola-cepstral-vc"

    def _convert(self, src16: Audio, ref16: Audio, n16: int) -> Audio:
        return psola_convert(src16, ref16, n16)
