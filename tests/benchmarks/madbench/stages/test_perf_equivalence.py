"""The speed-ups in dsp, env_gen, tagger, encoders and mux compute the old values.

Each test keeps the previous (slow) formula inline and compares it with the current
code on real arrays: the demo clips' separated stems and video.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.ndimage import median_filter
from scipy.signal import hilbert

from madbench_common.core.compat import zip_strict
from madbench_common.media.audio import decode_audio
from madbench_common.media.dsp import (
    _MOD_EDGES,
    analytic_subbands,
    erb_filterbank,
    impose_envelope_stats,
    modulation_power,
)
from madbench_common.media.mux import sample_frames, video_digest
from madbench_common.models.reference import env_gen, tagger
from madbench_common.models.reference.encoders import AVStatsEncoder, LogMelStatsEncoder, _motion

DEMO = Path(__file__).resolve().parents[4] / "data" / "demo"
SR = 16000


def _env(clip: str = "demo_001", seconds: float = 3.0) -> np.ndarray:
    x = decode_audio(DEMO / "stems" / "env" / f"{clip}.flac", SR)
    return np.asarray(x[: int(seconds * SR)], np.float64)


def _old_analytic(x: np.ndarray, bank: np.ndarray) -> np.ndarray:
    return np.asarray(hilbert(np.fft.irfft(np.fft.rfft(x)[None, :] * bank, len(x), axis=1)))


def _old_modulation_power(env: np.ndarray, sr: float) -> np.ndarray:
    spec = np.abs(np.fft.rfft(env - env.mean())) ** 2
    idx = np.digitize(np.fft.rfftfreq(len(env), 1 / sr), _MOD_EDGES) - 1
    counts = np.maximum(np.bincount(idx, minlength=len(_MOD_EDGES)), 1)
    return np.bincount(idx, spec, minlength=len(_MOD_EDGES)) / counts


def _old_impose(env: np.ndarray, quantiles: np.ndarray, mod: np.ndarray,
                sr: float) -> np.ndarray:
    spec = np.fft.rfft(env - env.mean())
    idx = np.digitize(np.fft.rfftfreq(len(env), 1 / sr), _MOD_EDGES) - 1
    spec *= np.sqrt(mod / np.maximum(_old_modulation_power(env, sr), 1e-20))[idx]
    shaped = np.fft.irfft(spec, len(env)) + env.mean()
    ranks = np.empty(len(env))
    ranks[np.argsort(shaped)] = np.linspace(0.0, 1.0, len(env))
    return np.interp(ranks, np.linspace(0, 1, len(quantiles)), quantiles)


def _old_texture(src: np.ndarray, n: int, sr: int, seed: int,
                 gains: np.ndarray) -> np.ndarray:
    src_sub = np.abs(_old_analytic(src, erb_filterbank(len(src), sr)))
    quant = np.quantile(src_sub, np.linspace(0, 1, 256), axis=1).T
    mods = [_old_modulation_power(e, sr) for e in src_sub]
    bank = erb_filterbank(n, sr)
    x = env_gen._rng(seed, 1).standard_normal(n)
    for _ in range(3):
        sub = _old_analytic(x, bank)
        env = np.abs(sub) + 1e-12
        new = np.stack([_old_impose(e, q, m, sr) for e, q, m in zip_strict(env, quant, mods)])
        parts = new * gains[:, None] * np.real(sub / env)
        x = np.sum(np.fft.irfft(np.fft.rfft(parts, axis=1) * bank, n, axis=1), axis=0)
    return x


@pytest.mark.parametrize("n", [SR, SR + 1, 12345])
def test_analytic_subbands_equal_scipy_hilbert(n: int) -> None:
    x = _env(seconds=1.0)[:n]
    bank = erb_filterbank(len(x), SR)
    new, old = analytic_subbands(x, bank), _old_analytic(x, bank)
    assert new.shape == old.shape
    assert np.allclose(new, old, rtol=1e-9, atol=1e-12 * np.abs(old).max())


def test_modulation_power_and_impose_equal_per_band_loop() -> None:
    x = _env(seconds=2.0)
    envs = np.abs(analytic_subbands(x, erb_filterbank(len(x), SR)))
    other = np.abs(analytic_subbands(_env("demo_012", 2.0), erb_filterbank(len(x), SR))) + 1e-12
    mods = modulation_power(envs, SR)
    old_mods = np.stack([_old_modulation_power(e, SR) for e in envs])
    assert np.allclose(mods, old_mods, rtol=1e-9, atol=1e-15)
    assert np.allclose(modulation_power(envs[3], SR), old_mods[3], rtol=1e-9, atol=1e-15)
    quant = np.quantile(envs, np.linspace(0, 1, 256), axis=1).T
    new = impose_envelope_stats(other, quant, mods, SR)
    old = np.stack([_old_impose(e, q, m, SR) for e, q, m in zip(other, quant, old_mods)])
    assert np.allclose(new, old, rtol=1e-9, atol=1e-12)
    assert np.allclose(impose_envelope_stats(other[5], quant[5], mods[5], SR), old[5],
                       rtol=1e-9, atol=1e-12)


def test_texture_equals_old_texture() -> None:
    src = _env("demo_004", 1.5)
    gains = np.linspace(0.5, 1.5, erb_filterbank(8, SR).shape[0])
    n = 20011  # a prime length: the FFT lengths are not rounded
    new, old = env_gen._texture(src, n, SR, 7, gains), _old_texture(src, n, SR, 7, gains)
    assert new.shape == (n,)
    assert np.allclose(new, old, rtol=1e-7, atol=1e-9 * np.abs(old).max())


def test_median_over_bins_equals_nd_median_filter() -> None:
    rng = np.random.default_rng(0)
    level = 10 * np.log10(np.abs(rng.standard_normal((257, 90))) ** 2 + 1e-12)
    assert np.array_equal(tagger._median_over_bins(level, 31),
                          median_filter(level, size=(31, 1)))
    assert tagger._median_over_bins(level[:, :0], 31).shape == (257, 0)


def test_av_stats_encoder_equals_unshared_parts() -> None:
    frames, fps = sample_frames(DEMO / "clips" / "demo_001.mp4", fps=4.0, size=64)
    audio = np.asarray(decode_audio(DEMO / "clips" / "demo_001.mp4", SR), np.float32)
    enc = AVStatsEncoder()
    av = enc.encode(mode="AV", audio=audio, sample_rate=SR, frames=frames, fps=fps)
    old = np.concatenate([LogMelStatsEncoder().audio_features(audio, SR),
                          enc.video.video_features(frames),
                          _old_cross_modal(audio, frames, fps)]).astype(np.float32)
    assert np.array_equal(av, old)
    again = enc.encode(mode="AV", audio=audio[::-1].copy(), sample_rate=SR, frames=frames,
                       fps=fps)  # memoised video parts, other audio
    fresh = AVStatsEncoder().encode(mode="AV", audio=audio[::-1].copy(), sample_rate=SR,
                                    frames=frames, fps=fps)
    assert np.array_equal(again, fresh) and not np.array_equal(again, av)


def _old_cross_modal(audio: np.ndarray, frames: np.ndarray, fps: float) -> np.ndarray:
    from madbench_common.models.reference.encoders import (
        _at_frame_rate,
        _corr,
        _power_spectrogram,
        _to_16k,
    )
    power = _power_spectrogram(_to_16k(audio, SR))
    rms = _at_frame_rate(np.sqrt(power.mean(axis=1)), len(frames), fps)
    flux = _at_frame_rate(np.r_[0.0, np.maximum(np.diff(np.log(power + 1e-10), axis=0), 0)
                                .mean(axis=1)], len(frames), fps)
    motion = _motion(np.asarray(frames, dtype=np.float64) / 255.0)
    lags = [_corr(np.roll(rms, k)[2:-2], motion[2:-2]) for k in range(-2, 3)]
    return np.array([*lags, _corr(flux, motion)], dtype=np.float32)


def test_video_digest_tells_videos_apart() -> None:
    a, b = DEMO / "clips" / "demo_001.mp4", DEMO / "clips" / "demo_002.mp4"
    assert video_digest(a) == video_digest(a)
    assert video_digest(a) != video_digest(b)


def test_float32_input_is_computed_in_float64() -> None:
    """(Callers pass float64; numpy 2's FFT would keep float32 input in float32.)"""
    x = _env(seconds=0.5)
    bank = erb_filterbank(len(x), SR)
    x64 = x.astype(np.float32).astype(np.float64)
    old = _old_analytic(x64, bank)
    assert np.allclose(analytic_subbands(x64.astype(np.float32), bank), old, rtol=1e-9,
                       atol=1e-12 * np.abs(old).max())
    env = np.abs(analytic_subbands(x, bank))[4].astype(np.float32)
    assert np.allclose(modulation_power(env, SR), _old_modulation_power(
        env.astype(np.float64), SR), rtol=1e-9, atol=1e-15)
