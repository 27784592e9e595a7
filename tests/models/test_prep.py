"""Shared input preparation of the evaluation adapters (numpy only: runs in the main suite)."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.models.prep import check_audio, even_indices, fuse_av, resample, tile_to


def test_tile_repeats_from_the_start_and_crops() -> None:
    x = np.arange(5, dtype=np.float32)
    assert tile_to(x, 12).tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    assert tile_to(x, 3).tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        tile_to(np.zeros(0, np.float32), 4)


def test_resample_keeps_a_tone_and_the_length() -> None:
    t = np.arange(16000) / 16000
    y = resample(np.sin(2 * np.pi * 440 * t).astype(np.float32), 16000, 48000)
    assert y.size == 48000 and y.dtype == np.float32
    spectrum = np.abs(np.fft.rfft(y))
    assert np.argmax(spectrum) == pytest.approx(440, abs=1)  # 1 Hz bins over 1 s


def test_even_indices_and_fusion() -> None:
    assert even_indices(10, 4).tolist() == [0, 3, 6, 9]
    assert even_indices(2, 4).tolist() == [0, 0, 1, 1]
    a, v = np.array([3.0, 4.0]), np.array([0.0, 2.0])
    fused = fuse_av(a, v)
    assert np.allclose(fused, [0.6, 0.8, 0.0, 1.0, 0.0, 0.8])
    assert fused[4:].sum() == pytest.approx(0.8)  # = cosine similarity of a and v
    with pytest.raises(ValueError, match="differ"):
        fuse_av(a, np.ones(3))


def test_check_audio_rejects_empty_and_nan() -> None:
    with pytest.raises(ValueError, match="needs audio"):
        check_audio(None, "m")
    with pytest.raises(ValueError, match="empty"):
        check_audio(np.array([np.nan]), "m")
