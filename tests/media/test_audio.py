"""Audio I/O: deterministic lossless WAV, resampling, levels, SI-SDR."""

from __future__ import annotations

import time

import numpy as np
import pytest

from madbench_common.media.audio import read_wav_bytes, resample, rms_dbfs, si_sdr, wav_bytes


def test_wav_bytes_are_lossless_and_deterministic() -> None:
    x = np.random.default_rng(0).standard_normal(16000).astype(np.float32) * 0.1
    first = wav_bytes(x, 16000)
    time.sleep(1.1)  # a timestamped header (libsndfile's PEAK chunk) would change here
    assert wav_bytes(x, 16000) == first
    back, sr = read_wav_bytes(first)
    assert sr == 16000 and np.array_equal(back, x)


def test_resample_keeps_a_tone() -> None:
    t = np.arange(48000) / 48000
    y = resample(np.sin(2 * np.pi * 440 * t).astype(np.float32), 48000, 16000)
    assert len(y) == 16000
    spectrum = np.abs(np.fft.rfft(y))
    assert abs(int(np.argmax(spectrum)) - 440) <= 1


def test_levels_and_si_sdr() -> None:
    x = np.full(1000, 0.5, dtype=np.float32)
    assert rms_dbfs(x) == pytest.approx(20 * np.log10(0.5))
    assert rms_dbfs(np.zeros(10, np.float32)) == -120.0
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(8000)
    noise = rng.standard_normal(8000)
    est = ref + 0.1 * noise
    expected = 10 * np.log10(np.sum(ref**2) / np.sum((0.1 * noise) ** 2))
    got = si_sdr(est.astype(np.float32), ref.astype(np.float32))
    assert got == pytest.approx(expected, abs=0.3)
    assert si_sdr(3.0 * ref.astype(np.float32), ref.astype(np.float32)) > 80  # scale-invariant
