"""CAV-MAE Sync adapter on a tiny CAVMAESync (upstream class, reduced width and depth),
saved as the release is (DataParallel ``module.`` keys)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torchaudio", reason="run make adapter-test IMAGE=enc-cavmae-sync")


from madbench_common.models.adapters.cavmae_sync import (
    CavMaeSyncEncoder,
    segment,
)

from .tiny import assert_refused, demo_audio, demo_frames, tiny_root, weights_env


def _write(root: Path, keep: str = "") -> None:
    from madbench_common.models.tiny.eval import cavmae_sync

    cavmae_sync(root, keep)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> CavMaeSyncEncoder:
    with weights_env(tiny_root(tmp_path_factory, _write)):
        return CavMaeSyncEncoder()  # the tiny arch comes from the checkpoint's sidecar


def test_segments_follow_map_frame_to_spectrogram() -> None:
    assert segment(0, 16, 1024, 416) == (0, 416)
    assert segment(8, 16, 1024, 416) == (304, 720)
    assert segment(15, 16, 1024, 416) == (608, 1024)


def test_inputs_have_the_retrieval_layout(encoder: CavMaeSyncEncoder) -> None:
    audio, rate = demo_audio(5, 4.0)
    a, seconds = encoder.audio_input(audio, rate)
    assert tuple(a.shape) == (16, 416, 128) and seconds == pytest.approx(4.0, abs=1e-3)
    frames, fps = demo_frames(5, fps=4.0, size=224, max_frames=16)
    v = encoder.video_input(frames, fps, seconds)
    assert tuple(v.shape) == (16, 3, 224, 224)


def test_a_ignores_video_and_av_fuses(encoder: CavMaeSyncEncoder) -> None:
    audio, rate = demo_audio(6, 4.0)
    f1, fps = demo_frames(6, fps=4.0, size=224, max_frames=16)
    f2, _ = demo_frames(14, fps=4.0, size=224, max_frames=16)
    a = encoder.embed(mode="A", audio=audio, sample_rate=rate)
    av = encoder.embed(mode="AV", audio=audio, sample_rate=rate, frames=f1, fps=fps)
    sh = encoder.embed(mode="AV", audio=audio, sample_rate=rate, frames=f2, fps=fps)
    assert a.vector.shape == (32,) and av.vector.shape == (96,)
    assert np.allclose(av.vector[:32], a.vector, atol=1e-5)  # audio stream never sees video
    assert np.allclose(av.vector[64:], av.vector[:32] * av.vector[32:64], atol=1e-6)
    assert not np.allclose(sh.vector[32:64], av.vector[32:64])
    assert av.spec.video_frames == 16 and "CLS" in av.spec.pooling


def test_a_checkpoint_missing_encoder_weights_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, keep="decoder")
    assert_refused(CavMaeSyncEncoder, tmp_path, "not the released CAV-MAE Sync checkpoint")
