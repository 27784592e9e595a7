"""CPU reference detectors (roles.Detector): fixed-rule stand-ins for the paper's pretrained
detectors, so a reference run fills the detector groups of Tables 2–5.

A pretrained detector brings a native score (binary direct transfer) and frozen features
(heads for the other tasks; paper §4.2). These references are trained on nothing: each
computes documented signal statistics and turns one into P(fake) with a **fixed rule
whose constants were set a priori**, never fitted to MADBench data, so their AUC is what a
rule of thumb achieves, not a result about the paper's detectors. Each is labelled
``reference=True`` and the report marks it †.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.reference.encoders import (
    _HOP,
    _SR,
    _at_frame_rate,
    _corr,
    _mel_bank,
    _motion,
    _power_spectrogram,
    _to_16k,
)
from madbench_common.models.roles import Embedding, Frames, InputSpec

__all__ = ["AVSyncDetector", "HFArtifactDetector", "ModulationDetector"]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
_BANDS_HZ = ((0, 1000), (1000, 2000), (2000, 4000), (4000, 8000))
_MOD_EDGES = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
_LAGS = range(-4, 5)


def _band_masks() -> list[npt.NDArray[np.bool_]]:
    freqs = np.fft.rfftfreq(512, 1 / _SR)
    return [(freqs >= lo) & (freqs < hi) for lo, hi in _BANDS_HZ]


def _flatness(p: F64) -> F64:
    """Per-frame spectral flatness (geometric / arithmetic mean) of a power slice."""
    p = p + 1e-12
    return np.asarray(np.exp(np.log(p).mean(axis=1)) / p.mean(axis=1), dtype=np.float64)


class _Detector:
    """Shared plumbing: ``embed`` gives features, the native score and the input seen."""

    reference = True
    modes: tuple[str, ...] = ("A",)
    rule: ClassVar[str] = ""

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode not in self.modes or audio is None:
            raise ValueError(f"{type(self).__name__} takes modes {self.modes}, got {mode!r}")
        x = _to_16k(audio, sample_rate)
        vec, raw = self.features_and_raw(x, frames, fps)
        spec = InputSpec(audio_rate=_SR, audio_seconds=round(x.size / _SR, 4),
                         video_frames=len(frames) if frames is not None and mode == "AV" else 0,
                         video_fps=fps if mode == "AV" else 0.0,
                         pooling="mean/std over frames", crop="none")
        return Embedding(vec, spec, float(expit(10.0 * raw)), "sigmoid(raw)")

    def encode(self, **kwargs: Any) -> F32:
        return self.embed(**kwargs).vector

    def score(self, audio: Audio, sample_rate: Hertz, *, frames: Frames | None = None,
              fps: float = 0.0) -> float:
        emb = self.embed(mode=self.modes[0], audio=audio, sample_rate=sample_rate,
                         frames=frames, fps=fps)
        assert emb.score is not None
        return emb.score

    def features(self, audio: Audio, sample_rate: Hertz, *, frames: Frames | None = None,
                 fps: float = 0.0) -> F32:
        return self.embed(mode=self.modes[0], audio=audio, sample_rate=sample_rate,
                          frames=frames, fps=fps).vector

    def features_and_raw(self, x: F64, frames: Frames | None, fps: float) -> tuple[F32, float]:
        raise NotImplementedError


class HFArtifactDetector(_Detector):
    """Band flatness and energy statistics (20-d); P(fake) from high-band flatness.

    Stands in for the pretrained audio detectors. Features: per-frame spectral flatness and
    energy share in four bands (0–1, 1–2, 2–4, 4–8 kHz), centroid and 85 % roll-off, mean
    and std over frames. Rule: vocoders and generative models tend to leave noise-like
    energy in the 4–8 kHz band, so with h = the 4–8 kHz flatness weighted by that band's
    energy share (saturating at 5 %, so an empty band counts as clean),
    P(fake) = σ(10 · (mean h − 0.2)).
    """

    slug, version, dim = "ref-hf-artifact-det", "1", 20
    rule = "σ(10 · (mean of 4–8 kHz flatness × min(1, 20 × its energy share) − 0.2))"

    def features_and_raw(self, x: F64, frames: Frames | None, fps: float) -> tuple[F32, float]:
        power = _power_spectrogram(x)
        total = power.sum(axis=1) + 1e-12
        flat = np.column_stack([_flatness(power[:, m]) for m in _band_masks()])
        share = np.column_stack([power[:, m].sum(axis=1) / total for m in _band_masks()])
        freqs = np.fft.rfftfreq(512, 1 / _SR)
        centroid = (power * freqs).sum(axis=1) / total / (_SR / 2)
        cum = np.cumsum(power, axis=1) / total[:, None]
        rolloff = freqs[np.argmax(cum >= 0.85, axis=1)] / (_SR / 2)
        per_frame = np.column_stack([flat, share, centroid, rolloff])
        vec = np.r_[per_frame.mean(0), per_frame.std(0)].astype(np.float32)
        noisy_high = flat[:, 3] * np.minimum(1.0, 20.0 * share[:, 3])
        return vec, float(noisy_high.mean() - 0.2)


class ModulationDetector(_Detector):
    """Modulation spectrum of band-group envelopes (48-d); P(fake) from the 2–8 Hz share.

    Stands in for the pretrained audio detectors. Features: the temporal modulation
    spectrum of eight log-mel band-group envelopes (100 Hz frame rate) in six octave bands
    from 0.5 to 32 Hz, log power. Rule: natural speech carries its envelope modulation at
    the syllable rate, so a low share of 2–8 Hz modulation is suspect:
    P(fake) = σ(10 · (0.45 − mean 2–8 Hz share)).
    """

    slug, version, dim = "ref-modulation-det", "1", 48
    rule = "σ(10 · (0.45 − mean share of envelope modulation in 2–8 Hz))"

    def features_and_raw(self, x: F64, frames: Frames | None, fps: float) -> tuple[F32, float]:
        logmel = np.log(_power_spectrogram(x) @ _mel_bank().T + 1e-10)
        groups = np.array_split(np.arange(logmel.shape[1]), 8)
        env = np.column_stack([logmel[:, g].mean(axis=1) for g in groups])
        env = env - env.mean(axis=0)
        n = max(env.shape[0], 2)
        spec = np.abs(np.fft.rfft(env * np.hanning(env.shape[0])[:, None], n=n, axis=0)) ** 2
        freqs = np.fft.rfftfreq(n, _HOP / _SR)
        bands = np.stack([spec[(freqs >= lo) & (freqs < hi)].sum(axis=0)
                          for lo, hi in zip(_MOD_EDGES[:-1], _MOD_EDGES[1:])])
        share = bands[2:4].sum(axis=0) / (bands.sum(axis=0) + 1e-12)
        vec = np.log(bands + 1e-10).T.reshape(-1).astype(np.float32)
        return vec, float(0.45 - share.mean())


class AVSyncDetector(_Detector):
    """Band envelopes vs visual motion (44-d); P(fake) from the strongest correlation.

    Stands in for the pretrained A-V detectors (AVH-Align first among them, which score
    audio–visual misalignment). Features: the correlation of four audio band envelopes with
    the video's motion energy at lags −4…4 frames (36), each band's largest |correlation|
    (4) and its lag in frames (4). Rule: audio that does not follow the picture is suspect.
    The strongest correlation is put in standard errors, z = atanh(max |r|) · √(n − 3) over
    the n frames compared (so the rule means the same for short and long clips; 36
    correlations of unrelated tracks reach z ≈ 3), and P(fake) = σ(2 · (3 − z)).
    """

    slug, version, dim = "ref-av-sync-det", "1", 44
    modes: tuple[str, ...] = ("AV",)
    rule = "σ(2 · (3 − atanh(max |corr(band envelope, motion)|) · √(n − 3)))"

    _MEMO = 8

    def __init__(self) -> None:
        self._memo: dict[str, F64] = {}

    def motion(self, frames: Frames) -> F64:
        """Per-frame motion energy (mean absolute frame difference), memoised by content:
        a clip's samples share one video."""
        arr = np.ascontiguousarray(frames)
        key = f"{arr.shape}/{arr.dtype}/{hashlib.sha256(arr.data).hexdigest()}"
        if key not in self._memo:
            if len(self._memo) >= self._MEMO:
                self._memo.pop(next(iter(self._memo)))
            self._memo[key] = _motion(arr.astype(np.float64) / 255.0)
        return self._memo[key]

    def features_and_raw(self, x: F64, frames: Frames | None, fps: float) -> tuple[F32, float]:
        if frames is None or len(frames) < 3 or fps <= 0:
            raise ValueError("ref-av-sync-det needs at least 3 video frames and their rate")
        motion = self.motion(frames)
        power = _power_spectrogram(x)
        n = len(frames)
        corr = np.zeros((len(_BANDS_HZ), len(_LAGS)))
        for b, mask in enumerate(_band_masks()):
            envelope = _at_frame_rate(np.sqrt(power[:, mask].mean(axis=1)), n, fps)
            corr[b] = [_corr(np.roll(envelope, k)[4:-4], motion[4:-4]) if n > 8 else 0.0
                       for k in _LAGS]
        best = np.abs(corr).argmax(axis=1)
        peak = np.abs(corr).max(axis=1)
        vec = np.r_[corr.reshape(-1), peak, np.array(_LAGS)[best]].astype(np.float32)
        z = float(np.arctanh(min(peak.max(), 0.999999)) * np.sqrt(max(n - 8 - 3, 1)))
        return vec, 0.2 * (3.0 - z)
