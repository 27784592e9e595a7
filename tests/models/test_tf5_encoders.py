"""PE-AV, WavLM and XLS-R adapters on tiny random models built from transformers' own configs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers", reason="run make adapter-test IMAGE=enc-tf5")
pytest.importorskip("timm", reason="run make adapter-test IMAGE=enc-tf5")


from .tiny import assert_fetch_named, demo_audio, demo_frames, embed_modes


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from madbench_common.models.tiny.eval import tf5

    return tf5(tmp_path_factory.mktemp("weights"))


@pytest.fixture
def env(weights: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(weights))
    return weights


def test_peav_modes_shapes_and_recorded_input(env: Path) -> None:
    from madbench_common.models.adapters.tf5 import PeAvEncoder

    m = embed_modes(PeAvEncoder(), 1, 2.0, fps=4.0, size=48, max_frames=6)
    a, v, av = m.a, m.v, m.av
    assert a.vector.shape == (32,) and v.vector.shape == (32,) and av.vector.shape == (128,)
    assert np.isclose(np.linalg.norm(a.vector), 1, atol=1e-5)
    # the A-V audio part equals the audio-only embedding: one tower, one input
    assert np.allclose(av.vector[:32], a.vector, atol=1e-4)
    assert np.allclose(av.vector[64:96], av.vector[:32] * av.vector[32:64])
    assert a.spec.audio_rate == 48000 and a.spec.audio_seconds == pytest.approx(2.0, abs=0.05)
    assert (av.spec.video_frames, av.spec.video_size) == (len(m.frames), 32)
    assert av.spec.video_fps == pytest.approx(m.fps) and "no crop" in av.spec.crop
    assert a.score is None


def test_peav_av_depends_on_the_video_and_a_does_not(env: Path) -> None:
    from madbench_common.models.adapters.tf5 import PeAvEncoder

    enc = PeAvEncoder()
    audio, rate = demo_audio(2, 2.0)
    f1, fps = demo_frames(1, size=48, max_frames=4)
    f2, _ = demo_frames(12, size=48, max_frames=4)
    paired = enc.embed(mode="AV", audio=audio, sample_rate=rate, frames=f1, fps=fps).vector
    shuffled = enc.embed(mode="AV", audio=audio, sample_rate=rate, frames=f2, fps=fps).vector
    again = enc.embed(mode="AV", audio=audio, sample_rate=rate, frames=f1, fps=fps).vector
    assert np.array_equal(paired, again)
    assert not np.allclose(paired[32:64], shuffled[32:64])  # the video part changed
    with pytest.raises(ValueError, match="needs video"):
        enc.embed(mode="AV", audio=audio, sample_rate=rate)
    with pytest.raises(ValueError, match="needs audio"):
        enc.embed(mode="A")


def test_wavlm_mean_pools_16k(env: Path) -> None:
    from madbench_common.models.adapters.tf5 import WavLMEncoder

    enc = WavLMEncoder()
    audio, rate = demo_audio(3, 1.5)
    out = enc.embed(mode="A", audio=audio, sample_rate=rate)
    assert out.vector.shape == (32,) and np.isfinite(out.vector).all()
    assert out.spec.audio_rate == 16000 and "mean over" in out.spec.pooling
    at_48k = np.interp(np.arange(int(audio.size * 3)) / 3, np.arange(audio.size), audio)
    resampled = enc.embed(mode="A", audio=at_48k.astype(np.float32), sample_rate=48000)
    assert resampled.spec.audio_seconds == pytest.approx(out.spec.audio_seconds, abs=1e-3)
    assert np.corrcoef(out.vector, resampled.vector)[0, 1] > 0.9  # same speech, resampled
    with pytest.raises(ValueError, match="audio only"):
        enc.embed(mode="AV", audio=audio, sample_rate=rate)


def test_xlsr_mean_pools_16k_from_its_own_checkpoint(env: Path) -> None:
    """The model added by following models/catalog/README.md: Wav2Vec2Model's real forward
    on the tiny checkpoint, 16 kHz, mean-pooled; a different network from WavLM's."""
    from madbench_common.models.adapters.tf5 import WavLMEncoder, XlsrEncoder

    enc = XlsrEncoder()
    assert type(enc.model).__name__ == "Wav2Vec2Model" and enc.modes == ("A",)
    audio, rate = demo_audio(3, 1.5)
    out = enc.embed(mode="A", audio=audio, sample_rate=rate)
    assert out.vector.shape == (32,) and np.isfinite(out.vector).all()
    assert out.spec.audio_rate == 16000 and out.spec.audio_seconds == pytest.approx(1.5, abs=1e-3)
    assert "mean over 74 frames" in out.spec.pooling  # 1.5 s through the 320-sample conv stack
    assert out.score is None
    wavlm = WavLMEncoder().embed(mode="A", audio=audio, sample_rate=rate)
    assert not np.allclose(out.vector, wavlm.vector)
    again = XlsrEncoder().embed(mode="A", audio=audio, sample_rate=rate)
    assert np.array_equal(out.vector, again.vector)  # eval mode: deterministic
    with pytest.raises(ValueError, match="audio only"):
        enc.embed(mode="AV", audio=audio, sample_rate=rate)


def test_missing_weights_name_the_fix(tmp_path: Path) -> None:
    from madbench_common.models.adapters.tf5 import WavLMEncoder

    assert_fetch_named(WavLMEncoder, "enc-tf5", tmp_path)
