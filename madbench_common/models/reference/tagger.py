"""Reference audio tagger: a signal-processing music detector standing in for AST (paper §3.2).

No AudioSet tagger ships its weights on PyPI (``panns-inference``, ``epanns-inference``,
``inaspeechsegmenter`` and ``panns-at-inference`` download theirs at run time; ``musicnn``
ships weights but tags genres of audio assumed to be music, on TensorFlow), so this
reference is plain signal processing, labelled as such (``reference = True``). It returns
AudioSet's ``Music`` label, the one the paper's check reads, as a score in [0, 1]: music is
taken to be *sustained, changing tones* (:func:`sustained_tone_share`).
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import maximum_filter, median_filter, minimum_filter
from scipy.signal import stft

from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample

__all__ = ["TonalMusicTagger", "sustained_tone_share"]

_RATE = 16000
_NFFT, _HOP = 2048, 256
_BAND = (100.0, 4000.0)
_CONTRAST_DB = 12.0
_SUSTAIN_S = 0.2
_STATIONARY = 0.8


def _median_over_bins(level: np.ndarray, size: int) -> np.ndarray:
    """``median_filter(level, size=(size, 1))``, computed frame by frame: SciPy's 1-D
    median filter is a running median, ~5× faster than its n-D rank filter, same values."""
    frames = np.ascontiguousarray(level.T)
    return np.stack([median_filter(f, size=size) for f in frames], axis=1) if len(frames) \
        else np.empty_like(level)


def sustained_tone_share(audio: Audio, sample_rate: Hertz) -> float:
    """Share of frames that hold a sustained, non-stationary tonal partial.

    In a 128 ms STFT (16 ms hop) of 100 Hz–4 kHz, a bin is tonal when it is a spectral peak
    at least 12 dB above the median of its ±15-bin neighbourhood, and sustained when it
    stays tonal (±1 bin) for 200 ms or more. Partials sustained over most of the clip
    (hum, drones) are not notes and are dropped."""
    x = resample(np.asarray(audio, np.float32), sample_rate, _RATE).astype(np.float64)
    if len(x) < _NFFT:
        return 0.0
    f, _, z = stft(x, _RATE, nperseg=_NFFT, noverlap=_NFFT - _HOP)
    band = (f >= _BAND[0]) & (f <= _BAND[1])
    level = 10.0 * np.log10(np.abs(z[band]) ** 2 + 1e-12)
    peak = (level >= maximum_filter(level, size=(3, 1))) & (
        level - _median_over_bins(level, 31) >= _CONTRAST_DB)
    peak &= level > level.max() - 60.0
    near = maximum_filter(peak, size=(3, 1))
    run = max(1, round(_SUSTAIN_S * _RATE / _HOP))
    sustained = maximum_filter(minimum_filter(near, size=(1, run)), size=(1, run))
    stationary = sustained.mean(axis=1) > _STATIONARY
    return float((sustained & ~stationary[:, None]).any(axis=0).mean())


class TonalMusicTagger:
    """``{"Music": score}`` from :func:`sustained_tone_share`.

    The score is the logistic of the share (midpoint 0.7, scale 0.08): noise has no peaks,
    birdsong is brief or above 4 kHz, while melodies and chords hold their notes. Measured
    shares: the 28 demo ambience stems 0.00–0.51 (birds in a park the highest; score ≤
    0.09), clean demo speech 0.20–0.44, a synthetic melody with chords 1.00 (score 0.98),
    also when mixed with demo ambience; a 100 Hz hum and white noise 0.00. It cannot tell
    media playback from other sounds.
    """

    slug = "ref-tonal-music"
    reference = True
    version = "tonal-music-1"

    def tag(self, audio: Audio, sample_rate: Hertz) -> dict[str, float]:
        share = sustained_tone_share(audio, sample_rate)
        return {"Music": float(1.0 / (1.0 + np.exp(-(share - 0.7) / 0.08)))}
