"""Reference speaker embedder: Resemblyzer's GE2E d-vector (weights ship in its wheel).

Resemblyzer computes its mel spectrogram with librosa, whose import compiles numba
kernels (~20-30 s per fresh process: every pod, since the JIT cache starts empty).
The same spectrogram is computed here with NumPy (:func:`mel_power`: Slaney mel
filters, periodic Hann window, centred zero-padded STFT, power 2 — librosa's
defaults), and the utterance embedding follows ``VoiceEncoder.embed_utterance``
(partials at 1.3 per second, ≥ 75 % coverage of the last one, mean, L2 norm), so no
numba code runs. ``tests/models`` checks it against Resemblyzer's own path.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt

from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample

__all__ = ["ResemblyzerEmbedder", "mel_power"]

_RATE = 16000
_N_FFT, _HOP, _N_MELS = 400, 160, 40  # 25 ms window, 10 ms step, 40 channels (hparams.py)
_PARTIALS_RATE, _MIN_COVERAGE = 1.3, 0.75


def _hz_to_mel(hz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    f_sp, min_log_hz, min_log_mel, logstep = 200.0 / 3, 1000.0, 15.0, np.log(6.4) / 27.0
    mel = hz / f_sp
    log = hz >= min_log_hz
    mel[log] = min_log_mel + np.log(hz[log] / min_log_hz) / logstep
    return mel


def _mel_to_hz(mel: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    f_sp, min_log_hz, min_log_mel, logstep = 200.0 / 3, 1000.0, 15.0, np.log(6.4) / 27.0
    hz = f_sp * mel
    log = mel >= min_log_mel
    hz[log] = min_log_hz * np.exp(logstep * (mel[log] - min_log_mel))
    return hz


@cache
def _mel_basis() -> npt.NDArray[np.float32]:
    """Slaney-normalised triangular filters, (n_mels, 1 + n_fft // 2)."""
    fft_freqs = np.linspace(0, _RATE / 2, 1 + _N_FFT // 2)
    lo, hi = _hz_to_mel(np.array([0.0, _RATE / 2]))
    mel_f = _mel_to_hz(np.linspace(float(lo), float(hi), _N_MELS + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2:] - mel_f[:-2]))[:, None]
    return weights.astype(np.float32)


def mel_power(wav: Audio) -> npt.NDArray[np.float32]:
    """Mel power spectrogram, (frames, 40): librosa.feature.melspectrogram's defaults."""
    x = np.pad(np.asarray(wav, dtype=np.float32), _N_FFT // 2)
    n = 1 + (len(x) - _N_FFT) // _HOP
    frames = np.lib.stride_tricks.sliding_window_view(x, _N_FFT)[::_HOP][:n]
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(_N_FFT) / _N_FFT)).astype(np.float32)
    spec = np.fft.rfft(frames * window, axis=1).astype(np.complex64)
    power = (spec.real ** 2 + spec.imag ** 2).astype(np.float32)
    return (power @ _mel_basis().T).astype(np.float32)


class ResemblyzerEmbedder:
    """256-d unit-norm speaker embedding."""

    slug = "ref-resemblyzer"
    reference = True

    def __init__(self) -> None:
        from importlib.metadata import version

        from resemblyzer import VoiceEncoder

        self.version = f"resemblyzer-{version('resemblyzer')}"
        self._encoder = VoiceEncoder("cpu", verbose=False)

    def embed(self, audio: Audio, sample_rate: Hertz) -> npt.NDArray[np.float32]:
        from resemblyzer import preprocess_wav

        x = preprocess_wav(resample(audio, sample_rate, _RATE))
        if len(x) < _RATE // 2:  # too little voiced audio after trimming: use all of it
            x = resample(audio, sample_rate, _RATE)
        emb = self.embed_utterance(x)
        return emb / max(float(np.linalg.norm(emb)), 1e-12)

    def embed_utterance(self, wav: Audio) -> npt.NDArray[np.float32]:
        """Resemblyzer's utterance embedding, with :func:`mel_power` as the spectrogram."""
        import torch

        wav_slices, mel_slices = self._encoder.compute_partial_slices(
            len(wav), _PARTIALS_RATE, _MIN_COVERAGE)
        wav = np.pad(wav, (0, max(0, wav_slices[-1].stop - len(wav))))
        mel = mel_power(wav)
        mels = np.array([mel[s] for s in mel_slices])
        with torch.no_grad():
            partials = self._encoder(torch.from_numpy(mels)).cpu().numpy()
        raw = np.mean(partials, axis=0)
        return np.asarray(raw / np.linalg.norm(raw, 2), dtype=np.float32)
