"""Mixing: source-relative levels within 0.5 dB, one path for every variant, peak safety."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.media.audio import rms_dbfs
from madbench_common.media.mix import fit_track, level_gain_db, mix_components


def _noise(n: int, level_db: float, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    return (x / np.sqrt(np.mean(x**2)) * 10 ** (level_db / 20)).astype(np.float32)


@pytest.mark.parametrize("fake_db", [-50.0, -20.0, -6.0])
def test_fake_components_land_within_half_a_db_of_their_source_components(fake_db: float,
                                                                          ) -> None:
    n = 16000
    s_hat, e_hat = _noise(n, -24.0, 0), _noise(n, -32.0, 1)
    s_fake, e_fake = _noise(n, fake_db, 2), _noise(n, fake_db - 3, 3)
    m = mix_components(s_fake, e_fake, s_hat, e_hat)
    assert abs(m.speech_level_dbfs(s_fake) - rms_dbfs(s_hat)) < 0.5
    assert abs(m.env_level_dbfs(e_fake) - rms_dbfs(e_hat)) < 0.5
    rebuilt = (s_fake * 10 ** ((m.speech_gain_db + m.common_gain_db) / 20)
               + e_fake * 10 ** ((m.env_gain_db + m.common_gain_db) / 20))
    assert np.allclose(m.audio, rebuilt, atol=1e-5)


def test_real_variant_passes_components_through_unchanged() -> None:
    s_hat, e_hat = _noise(8000, -20.0, 0), _noise(8000, -30.0, 1)
    m = mix_components(s_hat, e_hat, s_hat, e_hat)
    assert m.speech_gain_db == m.env_gain_db == m.common_gain_db == 0.0
    assert np.allclose(m.audio, s_hat + e_hat, atol=1e-7)


def test_common_gain_only_when_the_mix_would_clip_and_keeps_the_ratio() -> None:
    s_hat, e_hat = _noise(8000, -3.0, 0), _noise(8000, -6.0, 1)  # loud: the sum clips
    s_fake, e_fake = _noise(8000, -20.0, 2), _noise(8000, -20.0, 3)
    m = mix_components(s_fake, e_fake, s_hat, e_hat)
    assert m.common_gain_db < 0 and np.max(np.abs(m.audio)) <= 0.99 + 1e-6
    ratio = m.speech_level_dbfs(s_fake) - m.env_level_dbfs(e_fake)
    assert abs(ratio - (rms_dbfs(s_hat) - rms_dbfs(e_hat))) < 0.5


def test_silent_component_gets_no_gain_and_lengths_must_match() -> None:
    s_hat = _noise(100, -20.0, 0)
    assert level_gain_db(np.zeros(100, np.float32), s_hat) == 0.0
    with pytest.raises(ValueError):
        mix_components(s_hat[:50], s_hat, s_hat, s_hat)


def test_fit_track_trims_or_loops_to_exact_length() -> None:
    x = _noise(1000, -20.0, 0)
    assert len(fit_track(x, 600)) == 600 and np.array_equal(fit_track(x, 600), x[:600])
    looped = fit_track(x, 2500)
    assert len(looped) == 2500 and np.array_equal(looped[:800], x[:800])
