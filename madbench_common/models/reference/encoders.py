"""CPU reference encoders (roles.Encoder): classic audio front ends, speaker, quality, video, A-V.

Real, documented feature extractors that stand in for the paper's frozen encoders so the
evaluation runs on a laptop; each is labelled ``reference=True``: log-mel and LFCC
statistics, a Resemblyzer d-vector, DNSMOS scores, video frame statistics, and two A-V
encoders with cross-modal correlations. Each class gives its features and size.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy.fft import dct
from scipy.signal import resample_poly

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.roles import Frames

__all__ = [
    "AVLfccEncoder",
    "AVStatsEncoder",
    "DNSMOSEncoder",
    "FrameStatsEncoder",
    "LFCCStatsEncoder",
    "LogMelStatsEncoder",
    "ResemblyzerEncoder",
]

F32 = npt.NDArray[np.float32]
_SR = 16000
_N_FFT, _HOP, _WIN = 512, 160, 400


def _to_16k(audio: Audio, sample_rate: Hertz) -> npt.NDArray[np.float64]:
    x = np.asarray(audio, dtype=np.float64).reshape(-1)
    if sample_rate != _SR:
        g = np.gcd(int(sample_rate), _SR)
        x = resample_poly(x, _SR // g, int(sample_rate) // g)
    return x if x.size >= _WIN else np.pad(x, (0, _WIN - x.size))


def _power_spectrogram(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """(frames, N_FFT/2 + 1) power of Hann-windowed 25 ms frames every 10 ms."""
    n = 1 + (x.size - _WIN) // _HOP
    idx = np.arange(_WIN)[None, :] + _HOP * np.arange(n)[:, None]
    frames = x[idx] * np.hanning(_WIN)
    return np.abs(np.fft.rfft(frames, n=_N_FFT, axis=1)) ** 2


def _triangles(edges_hz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    bins = np.fft.rfftfreq(_N_FFT, 1 / _SR)
    lo, mid, hi = edges_hz[:-2, None], edges_hz[1:-1, None], edges_hz[2:, None]
    up, down = (bins - lo) / (mid - lo), (hi - bins) / (hi - mid)
    return np.maximum(0.0, np.minimum(up, down))


@cache
def _mel_bank(n_mels: int = 64) -> npt.NDArray[np.float64]:
    mel = np.linspace(0, 2595 * np.log10(1 + (_SR / 2) / 700), n_mels + 2)
    return _triangles(700 * (10 ** (mel / 2595) - 1))


@cache
def _linear_bank(n_filters: int = 70) -> npt.NDArray[np.float64]:
    return _triangles(np.linspace(0, _SR / 2, n_filters + 2))


def _delta(feat: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    padded = np.pad(feat, ((1, 1), (0, 0)), mode="edge")
    return (padded[2:] - padded[:-2]) / 2


def _stats(*feats: npt.NDArray[np.float64]) -> F32:
    return np.concatenate([np.r_[f.mean(0), f.std(0)] for f in feats]).astype(np.float32)


class _AudioOnly:
    modes: tuple[str, ...] = ("A",)
    reference = True

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> F32:
        if mode != "A" or audio is None:
            raise ValueError(f"{type(self).__name__} encodes audio (mode A) only, got {mode!r}")
        return self.audio_features(audio, sample_rate)

    def audio_features(self, audio: Audio, sample_rate: Hertz) -> F32:
        raise NotImplementedError


class LogMelStatsEncoder(_AudioOnly):
    """Log-mel statistics (192-d): a 64-band log-mel spectrogram (25 ms / 10 ms), per-band
    mean, standard deviation and mean |Δ| over time."""

    slug, version, dim = "ref-logmel-stats", "1", 192

    def audio_features(self, audio: Audio, sample_rate: Hertz) -> F32:
        return _logmel_stats(_power_spectrogram(_to_16k(audio, sample_rate)))


def _logmel_stats(power: npt.NDArray[np.float64]) -> F32:
    logmel = np.log(power @ _mel_bank().T + 1e-10)
    d = np.abs(_delta(logmel))
    return np.concatenate([logmel.mean(0), logmel.std(0), d.mean(0)]).astype(np.float32)


class LFCCStatsEncoder(_AudioOnly):
    """LFCC (+Δ, ΔΔ) statistics (120-d), the classic anti-spoofing front end: 20 LFCCs from
    a 70-filter *linear* triangular filterbank (the ASVspoof LFCC front end) with Δ and
    ΔΔ, mean and std over time."""

    slug, version, dim = "ref-lfcc-stats", "1", 120

    def audio_features(self, audio: Audio, sample_rate: Hertz) -> F32:
        spec = _power_spectrogram(_to_16k(audio, sample_rate)) @ _linear_bank().T
        lfcc = dct(np.log(spec + 1e-10), type=2, norm="ortho", axis=1)[:, :20]
        d1 = _delta(lfcc)
        return _stats(lfcc, d1, _delta(d1))


class ResemblyzerEncoder(_AudioOnly):
    """Resemblyzer GE2E speaker d-vector of the whole utterance (256-d)."""

    slug, version, dim = "ref-resemblyzer-enc", "1", 256

    def __init__(self) -> None:
        from resemblyzer import VoiceEncoder

        self._enc: Any = VoiceEncoder(device="cpu", verbose=False)

    def audio_features(self, audio: Audio, sample_rate: Hertz) -> F32:
        from resemblyzer import preprocess_wav

        wav = preprocess_wav(_to_16k(audio, sample_rate).astype(np.float32), source_sr=_SR)
        if wav.size < _SR // 2:  # voice-activity trimming left too little: use it all
            wav = _to_16k(audio, sample_rate).astype(np.float32)
        return np.asarray(self._enc.embed_utterance(wav), dtype=np.float32)


class DNSMOSEncoder(_AudioOnly):
    """DNSMOS quality scores: SIG, BAK, OVRL (P.835) and P.808 MOS (4-d), via ``speechmos``."""

    slug, version, dim = "ref-dnsmos", "1", 4

    def audio_features(self, audio: Audio, sample_rate: Hertz) -> F32:
        from speechmos import dnsmos

        x = _to_16k(audio, sample_rate)
        peak = np.abs(x).max()
        x = x / peak * 0.9 if peak > 1.0 else x  # speechmos requires [-1, 1]
        out = dnsmos.run(x.astype(np.float32), _SR)
        return np.array([out[k] for k in ("sig_mos", "bak_mos", "ovrl_mos", "p808_mos")],
                        dtype=np.float32)


def _motion(frames: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Mean absolute frame difference per frame (first frame: 0)."""
    if len(frames) < 2:
        return np.zeros(len(frames))
    return np.r_[0.0, np.abs(np.diff(frames, axis=0)).mean(axis=(1, 2, 3))]


class FrameStatsEncoder:
    """Per-frame image statistics over the video (18-d): RGB mean/std, gradient energy,
    colourfulness and frame-difference motion, mean and std over frames."""

    slug, version, dim = "ref-frame-stats", "1", 18
    modes: tuple[str, ...] = ("V",)
    reference = True

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> F32:
        if mode != "V" or frames is None or len(frames) == 0:
            raise ValueError("FrameStatsEncoder encodes video frames (mode V) only")
        return self.video_features(frames)

    def video_features(self, frames: Frames) -> F32:
        return self.features_and_motion(frames)[0]

    def features_and_motion(self, frames: Frames) -> tuple[F32, npt.NDArray[np.float64]]:
        """The 18-d statistics and the per-frame motion track they include."""
        f = np.asarray(frames, dtype=np.float64) / 255.0
        gray = f.mean(axis=3)
        grad = np.abs(np.diff(gray, axis=1)).mean(axis=(1, 2)) + np.abs(
            np.diff(gray, axis=2)).mean(axis=(1, 2))
        rg, yb = f[..., 0] - f[..., 1], 0.5 * (f[..., 0] + f[..., 1]) - f[..., 2]
        colourful = np.hypot(rg.std(axis=(1, 2)), yb.std(axis=(1, 2)))
        motion = _motion(f)
        per_frame = np.column_stack([f.mean(axis=(1, 2)), f.std(axis=(1, 2)), grad, colourful,
                                     motion])
        return np.r_[per_frame.mean(0), per_frame.std(0)].astype(np.float32), motion


def _corr(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    if a.size < 3 or a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def _at_frame_rate(track: npt.NDArray[np.float64], n_frames: int,
                   fps: float) -> npt.NDArray[np.float64]:
    t_audio = np.arange(track.size) * _HOP / _SR
    return np.interp(np.arange(n_frames) / fps, t_audio, track)


class AVStatsEncoder:
    """Audio (log-mel stats) ⊕ video (frame stats) ⊕ cross-modal correlations (216-d in AV).

    The R/S/E/Q samples of a clip share one video, so the video-only parts (frame
    statistics, motion) are kept for the last few distinct frame stacks (keyed by their
    content), and the audio power spectrogram is computed once per AV input.
    """

    slug, version = "ref-av-stats", "1"
    modes: tuple[str, ...] = ("A", "V", "AV")
    reference = True
    dims: ClassVar[dict[str, int]] = {"A": 192, "V": 18, "AV": 216}
    _MEMO = 8

    def __init__(self) -> None:
        self.audio, self.video = LogMelStatsEncoder(), FrameStatsEncoder()
        self._memo: dict[str, tuple[F32, npt.NDArray[np.float64]]] = {}

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> F32:
        if mode == "A":
            return self.audio.encode(mode="A", audio=audio, sample_rate=sample_rate)
        if mode == "V":
            return self.video.encode(mode="V", frames=frames)
        if audio is None or frames is None or len(frames) == 0 or fps <= 0:
            raise ValueError("mode AV needs audio, frames and fps")
        power = _power_spectrogram(_to_16k(audio, sample_rate))
        stats, motion = self._video_parts(frames)
        parts = [_logmel_stats(power), stats, _cross_modal(power, motion, len(frames), fps)]
        return np.concatenate(parts).astype(np.float32)

    def cross_modal(self, audio: Audio, sample_rate: Hertz, frames: Frames, fps: float) -> F32:
        """Audio envelope vs motion at lags −2…2 frames, and spectral flux vs motion."""
        power = _power_spectrogram(_to_16k(audio, sample_rate))
        return _cross_modal(power, self._video_parts(frames)[1], len(frames), fps)

    def _video_parts(self, frames: Frames) -> tuple[F32, npt.NDArray[np.float64]]:
        """Frame statistics and motion of ``frames``, memoised by content."""
        arr = np.ascontiguousarray(frames)
        key = f"{arr.shape}/{arr.dtype}/{hashlib.sha256(arr.data).hexdigest()}"
        if key not in self._memo:
            if len(self._memo) >= self._MEMO:
                self._memo.pop(next(iter(self._memo)))
            self._memo[key] = self.video.features_and_motion(arr)
        return self._memo[key]


def _cross_modal(power: npt.NDArray[np.float64], motion: npt.NDArray[np.float64],
                 n_frames: int, fps: float) -> F32:
    rms = _at_frame_rate(np.sqrt(power.mean(axis=1)), n_frames, fps)
    flux = _at_frame_rate(np.r_[0.0, np.maximum(np.diff(np.log(power + 1e-10), axis=0), 0)
                                .mean(axis=1)], n_frames, fps)
    lags = [_corr(np.roll(rms, k)[2:-2], motion[2:-2]) for k in range(-2, 3)]
    return np.array([*lags, _corr(flux, motion)], dtype=np.float32)


class AVLfccEncoder(AVStatsEncoder):
    """LFCC stats ⊕ frame stats ⊕ band-envelope/motion correlations (158-d in AV).

    A second reference A-V encoder, so that Tables 2–5 get several rows per group: the
    correlation of four audio band envelopes (0–1, 1–2, 2–4, 4–8 kHz) with visual motion
    at lags −2…2 frames (20-d)."""

    slug, version = "ref-av-lfcc", "1"
    dims: ClassVar[dict[str, int]] = {"A": 120, "V": 18, "AV": 158}
    _BANDS = ((0, 1000), (1000, 2000), (2000, 4000), (4000, 8000))

    def __init__(self) -> None:
        super().__init__()
        self.lfcc = LFCCStatsEncoder()

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> F32:
        if mode == "A":
            return self.lfcc.encode(mode="A", audio=audio, sample_rate=sample_rate)
        if mode == "V":
            return self.video.encode(mode="V", frames=frames)
        if audio is None or frames is None or len(frames) == 0 or fps <= 0:
            raise ValueError("mode AV needs audio, frames and fps")
        stats, motion = self._video_parts(frames)
        power = _power_spectrogram(_to_16k(audio, sample_rate))
        freqs = np.fft.rfftfreq(_N_FFT, 1 / _SR)
        corr = []
        for lo, hi in self._BANDS:
            env = _at_frame_rate(np.sqrt(power[:, (freqs >= lo) & (freqs < hi)].mean(axis=1)),
                                 len(frames), fps)
            corr += [_corr(np.roll(env, k)[2:-2], motion[2:-2]) for k in range(-2, 3)]
        parts = [self.lfcc.audio_features(audio, sample_rate), stats,
                 np.asarray(corr, dtype=np.float32)]
        return np.concatenate(parts).astype(np.float32)
