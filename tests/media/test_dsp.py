"""Shared DSP helpers: lengths, levels, WSOLA, speech placement, filterbanks and WORLD tools."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.media.audio import rms_dbfs
from madbench_common.media.dsp import (
    band_noise,
    erb_filterbank,
    estimate_warp,
    f0_log_stats,
    f0_track,
    fit_length,
    map_f0,
    n_samples,
    normalise,
    place_in_regions,
    retime_world,
    time_stretch,
    trim_silence,
    world_analyse,
    world_synthesise,
)

SR = 16000


def _tone(freq: float, seconds: float, sr: int = SR) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def _pulses(f0: float, seconds: float) -> np.ndarray:
    """A buzzy voiced-like signal: an impulse train at ``f0`` through a formant filter."""
    from scipy.signal import lfilter

    x = np.zeros(int(seconds * SR))
    x[:: int(SR / f0)] = 1.0
    for f, bw in ((700, 100), (1200, 120), (2600, 200)):
        r = np.exp(-np.pi * bw / SR)
        x = lfilter([1 - r], [1, -2 * r * np.cos(2 * np.pi * f / SR), r * r], x)
    return (0.5 * x / np.abs(x).max()).astype(np.float32)


def _dominant(x: np.ndarray) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / SR)[np.argmax(spec)])


def test_lengths_and_levels() -> None:
    assert n_samples(1.23456, 22050) == round(1.23456 * 22050)
    assert len(fit_length(np.ones(10), 4)) == 4 and fit_length(np.ones(2), 5)[2:].sum() == 0
    y = normalise(np.random.default_rng(0).standard_normal(SR) * 0.01, -26.0)
    assert abs(rms_dbfs(y) - -26.0) < 0.01
    spiky = np.zeros(SR, np.float32)
    spiky[100] = 1.0
    assert np.abs(normalise(spiky, -10.0, peak=0.9)).max() <= 0.9 + 1e-6


@pytest.mark.parametrize("factor", [0.6, 1.0, 1.7])
def test_time_stretch_keeps_pitch_and_exact_length(factor: float) -> None:
    x = _tone(220.0, 1.0)
    n_out = int(len(x) * factor) + 7
    y = time_stretch(x, n_out, SR)
    assert len(y) == n_out
    assert abs(_dominant(y) - 220.0) < 5.0
    assert abs(rms_dbfs(y[SR // 10: -SR // 10]) - rms_dbfs(x)) < 1.5


def test_place_in_regions() -> None:
    speech = np.concatenate([np.zeros(1600), _tone(200, 0.6), np.zeros(800), _tone(300, 0.5),
                             np.zeros(1600)]).astype(np.float32)
    total = 4 * SR
    starts, ends = [0.5, 2.0], [1.2, 3.5]
    out = place_in_regions(speech, starts, ends, SR, total)
    assert len(out) == total and out.dtype == np.float32
    inside = np.zeros(total, bool)
    for s, e in zip(starts, ends, strict=True):
        inside[int(s * SR): int(e * SR)] = True
        assert rms_dbfs(out[int(s * SR): int(e * SR)]) > -20
    assert np.all(out[~inside] == 0)
    assert np.array_equal(out, place_in_regions(speech, starts, ends, SR, total))
    assert not place_in_regions(speech, [], [], SR, 100).any()
    assert not place_in_regions(speech, [5.0], [6.0], SR, total).any()  # beyond the track


def test_trim_silence() -> None:
    x = np.concatenate([np.zeros(SR), _tone(200, 0.5), np.zeros(SR)])
    assert abs(len(trim_silence(x, SR)) - SR // 2) <= SR // 50


def test_erb_filterbank_reconstructs_and_band_noise_is_band_limited() -> None:
    bank = erb_filterbank(4000, SR, 30)
    assert bank.shape == (30, 2001)
    assert np.allclose(np.sum(bank**2, axis=0), 1.0)
    noise = band_noise(SR, SR, 1000, 2000, np.random.default_rng(1))
    spec = np.abs(np.fft.rfft(noise)) ** 2
    freqs = np.fft.rfftfreq(len(noise), 1 / SR)
    assert spec[(freqs > 900) & (freqs < 2200)].sum() / spec.sum() > 0.9


def test_world_retime_and_f0_mapping() -> None:
    x = _pulses(120.0, 1.0)
    params = world_analyse(x, SR)
    longer = retime_world(params, 2 * len(params.f0))
    y = world_synthesise(longer)
    assert abs(len(y) - 2 * len(x)) < SR // 50
    assert abs(np.exp(f0_log_stats(f0_track(y, SR))[0]) - 120.0) < 6.0
    mapped = map_f0(params.f0, f0_log_stats(params.f0), (np.log(200.0), 0.05))
    assert abs(np.exp(f0_log_stats(mapped)[0]) - 200.0) < 2.0
    with pytest.raises(ValueError):
        f0_log_stats(np.zeros(100))


def test_estimate_warp_recovers_a_known_warp() -> None:
    env = world_analyse(_pulses(120.0, 0.5), SR).sp.mean(axis=0)
    log_env = np.log(env)
    bins = np.arange(len(env))
    warped = np.interp(bins / 1.12, bins, log_env)
    assert abs(estimate_warp(log_env, warped, SR) - 1.12) <= 0.02
