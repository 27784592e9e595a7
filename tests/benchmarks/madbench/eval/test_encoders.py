"""CPU reference encoders: shapes, determinism, and that each responds to what it measures."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import resample_poly

from madbench_common.models.reference.encoders import (
    AVStatsEncoder,
    DNSMOSEncoder,
    FrameStatsEncoder,
    LFCCStatsEncoder,
    LogMelStatsEncoder,
    ResemblyzerEncoder,
)
from madbench_common.models.roles import Model

SR = 16000


def _noise(seconds: float = 1.0, seed: int = 0) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).normal(size=int(SR * seconds))).astype(np.float32)


def _tone(freq: float, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(SR * seconds)) / SR
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.mark.parametrize("cls", [LogMelStatsEncoder, LFCCStatsEncoder])
def test_audio_stats_shape_and_content(cls: type) -> None:
    enc = cls()
    assert isinstance(enc, Model) and enc.reference and enc.modes == ("A",)
    a = enc.encode(mode="A", audio=_noise(), sample_rate=SR)
    assert a.shape == (enc.dim,) and a.dtype == np.float32 and np.isfinite(a).all()
    np.testing.assert_array_equal(a, enc.encode(mode="A", audio=_noise(), sample_rate=SR))
    low, high = (enc.encode(mode="A", audio=_tone(f), sample_rate=SR) for f in (300, 5000))
    assert np.linalg.norm(low - high) > 1.0
    voiced = _tone(220) + _tone(660) + _tone(1800) + 0.1 * _noise()
    ref = enc.encode(mode="A", audio=voiced, sample_rate=SR)
    up = resample_poly(voiced, 3, 1).astype(np.float32)  # 48 kHz in: resampled inside
    assert np.corrcoef(enc.encode(mode="A", audio=up, sample_rate=48000), ref)[0, 1] > 0.98
    with pytest.raises(ValueError, match="mode A"):
        enc.encode(mode="V", frames=np.zeros((2, 8, 8, 3), np.uint8))


def test_logmel_peak_band_follows_the_tone() -> None:
    enc = LogMelStatsEncoder()
    means = [enc.encode(mode="A", audio=_tone(f), sample_rate=SR)[:64] for f in (300, 3000)]
    assert np.argmax(means[0]) < np.argmax(means[1])


def _frames(n: int = 12, moving: bool = True) -> np.ndarray:
    f = np.zeros((n, 24, 32, 3), np.uint8)
    for i in range(n):
        f[i, :, : (i * 2 if moving else 6)] = 200
    return f


def test_frame_stats() -> None:
    enc = FrameStatsEncoder()
    moving, still = (enc.encode(mode="V", frames=_frames(moving=m)) for m in (True, False))
    assert moving.shape == (18,)
    assert moving[8] > 0 and still[8] == 0  # mean motion
    bright = enc.encode(mode="V", frames=np.full((4, 8, 8, 3), 250, np.uint8))
    assert bright[0] > still[0]


def test_av_cross_modal_follows_synchrony() -> None:
    enc = AVStatsEncoder()
    fps, n = 10.0, 30
    rng = np.random.default_rng(0)
    frames = np.zeros((n, 16, 16, 3), np.uint8)
    active = rng.random(n) < 0.5
    for i in range(1, n):
        frames[i] = frames[i - 1] if not active[i] else rng.integers(0, 255, (16, 16, 3))
    env = np.repeat(active.astype(np.float32), SR // int(fps))
    audio = (env * rng.normal(size=env.size) * 0.3).astype(np.float32)
    sync = enc.cross_modal(audio, SR, frames, fps)
    shuffled = enc.cross_modal(audio, SR, frames[rng.permutation(n)], fps)
    assert sync[2] > 0.5 and sync[2] > shuffled[2] + 0.3
    av = enc.encode(mode="AV", audio=audio, sample_rate=SR, frames=frames, fps=fps)
    assert av.shape == (enc.dims["AV"],)


@pytest.mark.slow  # ~73-110 s with a cold numba cache: librosa's kernels compile
def test_resemblyzer_embedding() -> None:
    pytest.importorskip("resemblyzer")
    enc = ResemblyzerEncoder()
    e = enc.encode(mode="A", audio=_noise(2.0), sample_rate=SR)
    assert e.shape == (256,) and np.linalg.norm(e) == pytest.approx(1.0, abs=1e-3)


def test_dnsmos_scores() -> None:
    pytest.importorskip("onnxruntime")
    enc = DNSMOSEncoder()
    s = enc.encode(mode="A", audio=_noise(2.0), sample_rate=SR)
    assert s.shape == (4,) and ((s >= 1) & (s <= 5)).all()
