"""Reference environmental-audio generators: contract, determinism, no speech, conditioning."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.media.audio import rms_dbfs
from madbench_common.media.dsp import erb_filterbank
from madbench_common.models.reference import env_gen as eg
from madbench_common.models.roles import Model
from madbench_common.models.taxonomy import build_prompt, load_taxonomy

SR = 16000
ALL = [eg.LayeredT2A, eg.SpectralT2A, eg.LayeredV2A, eg.SpectralV2A, eg.TextureA2A,
       eg.StftMorphA2A]


def _frames(n: int = 40, moving_from: int = 0) -> np.ndarray:
    """Synthetic video: a bright square that moves from frame ``moving_from`` on."""
    frames = np.full((n, 32, 48, 3), 60, np.uint8)
    for i in range(n):
        x = 4 + (3 * max(i - moving_from, 0)) % 36
        frames[i, 10:20, x: x + 8] = 230
    return frames


@pytest.fixture(scope="module")
def source_env() -> np.ndarray:
    prompt = build_prompt("city_street", 4.0).text
    return eg.LayeredT2A().generate(sample_rate=SR, duration=4.0, prompt=prompt, seed=5)


def _run(cls: type, seconds: float, seed: int, src: np.ndarray, label: str = "forest",
         frames: np.ndarray | None = None) -> np.ndarray:
    prompt = build_prompt(label, seconds).text
    return cls().generate(sample_rate=SR, duration=seconds, prompt=prompt,
                          frames=_frames() if frames is None else frames, fps=10.0,
                          source_env=src, seed=seed)


def test_recipes_cover_the_sound_vocabulary() -> None:
    assert set(load_taxonomy().sounds) <= set(eg.SOUND_RECIPES)
    assert eg.scene_sounds("birds and wind") == ["birdsong", "wind"]
    assert eg.scene_sounds("a quiet beach") == list(load_taxonomy().fine["beach"].expected_sounds)


@pytest.mark.parametrize("cls", ALL)
def test_contract_length_determinism_no_clipping(cls: type, source_env: np.ndarray) -> None:
    gen = cls()
    assert isinstance(gen, Model) and gen.reference and gen.paradigm in ("t2a", "v2a", "a2a")
    y = _run(cls, 2.00007, 1, source_env)
    assert y.dtype == np.float32 and len(y) == round(2.00007 * SR)
    assert np.isfinite(y).all() and 0 < np.abs(y).max() <= 0.89 + 1e-6
    assert np.array_equal(y, _run(cls, 2.00007, 1, source_env))
    assert not np.allclose(y, _run(cls, 2.00007, 2, source_env))


def test_no_speech_by_silero(source_env: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    silero_vad = pytest.importorskip("silero_vad")
    model = silero_vad.load_silero_vad()
    for cls in ALL:
        for label in ("city_street", "office", "forest"):
            x = torch.from_numpy(_run(cls, 3.0, 0, source_env, label))
            model.reset_states()
            probs = np.array([model(x[i: i + 512], SR).item() for i in range(0, len(x) - 511, 512)])
            assert np.mean(probs > 0.5) < 0.05, (cls.slug, label)


def _band_db(x: np.ndarray) -> np.ndarray:
    p = (np.abs(np.fft.rfft(x)) ** 2) @ (erb_filterbank(len(x), SR) ** 2).T
    return 10 * np.log10(p / p.sum() + 1e-12)


@pytest.mark.parametrize("cls", [eg.LayeredT2A, eg.SpectralT2A])
def test_prompt_changes_the_spectrum(cls: type, source_env: np.ndarray) -> None:
    beach = _band_db(_run(cls, 3.0, 0, source_env, "beach"))
    office = _band_db(_run(cls, 3.0, 0, source_env, "office"))
    assert np.abs(beach - office).mean() > 3.0


@pytest.mark.parametrize("cls", [eg.LayeredV2A, eg.SpectralV2A])
def test_video_motion_drives_loudness(cls: type, source_env: np.ndarray) -> None:
    y = _run(cls, 4.0, 0, source_env, "city_street", frames=_frames(40, moving_from=20))
    assert rms_dbfs(y[int(2.3 * SR):]) > rms_dbfs(y[: int(1.7 * SR)]) + 2.0
    with pytest.raises(ConfigError, match="frames"):
        cls().generate(sample_rate=SR, duration=1.0, prompt="wind")


def test_video_drive_ranges() -> None:
    drive, bright = eg.video_drive(_frames(10, 5), 5.0, 2 * SR, SR)
    assert drive.shape == bright.shape == (2 * SR,)
    assert drive.min() >= 0.25 and drive.max() <= 1.0 and 0 < bright.min() <= bright.max() < 1


@pytest.mark.parametrize("cls", [eg.TextureA2A, eg.StftMorphA2A])
def test_a2a_keeps_texture_not_waveform(cls: type, source_env: np.ndarray) -> None:
    y = _run(cls, 4.0, 0, source_env, "city_street")
    n = min(len(y), len(source_env))
    corr = np.corrcoef(y[:n], source_env[:n])[0, 1]
    assert abs(corr) < 0.2
    assert abs(rms_dbfs(y) - rms_dbfs(source_env)) < 1.0
    assert np.corrcoef(_band_db(y), _band_db(source_env))[0, 1] > 0.8
    with pytest.raises(ConfigError, match="source_env"):
        cls().generate(sample_rate=SR, duration=1.0, prompt="wind")
