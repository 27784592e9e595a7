"""ImageBind adapter on a tiny ImageBindModel (upstream class, reduced depth and width)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("imagebind") is None:
    pytest.skip("run make adapter-test IMAGE=enc-imagebind", allow_module_level=True)

import torch

from madbench_common.models.adapters.imagebind import (
    WEIGHTS,
    ImageBindEncoder,
    clip_starts,
    spatial_crops,
)

from .tiny import demo_audio, demo_frames, embed_modes, tiny_root, weights_env


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImageBindEncoder]:
    from madbench_common.models.tiny.eval import imagebind

    with weights_env(tiny_root(tmp_path_factory, imagebind)):
        yield ImageBindEncoder()  # the registry's call: the sidecar gives the tiny arch


def test_tiny_checkpoint_is_the_tiny_architecture(tmp_path: Path) -> None:
    from madbench_common.models.tiny.eval import IMAGEBIND_TINY, imagebind

    imagebind(tmp_path)
    state = torch.load(tmp_path / "files" / "enc-imagebind" / WEIGHTS, weights_only=True)
    assert state["modality_heads.audio.2.weight"].shape == (IMAGEBIND_TINY["out_embed_dim"],
                                                           IMAGEBIND_TINY["audio_embed_dim"])


def test_clip_sampler_matches_pytorchvideo_formula() -> None:
    assert clip_starts(8.0, 2.0, 3) == [0.0, 2.0, 4.0]
    assert clip_starts(1.5, 2.0, 5) == [0.0] * 5
    clip = np.arange(2 * 2 * 4 * 6, dtype=np.float32).reshape(2, 2, 4, 6)
    crops = spatial_crops(clip, 4)
    assert [c.shape for c in crops] == [(2, 2, 4, 4)] * 3
    assert [c[0, 0, 0, 0] for c in crops] == [0.0, 1.0, 2.0]  # left, centre, right


def test_audio_input_is_upstreams_fbank_layout(encoder: ImageBindEncoder) -> None:
    audio, rate = demo_audio(1, 5.0)
    x, seconds = encoder.audio_input(audio, rate)
    assert tuple(x.shape) == (1, 3, 1, 128, 204) and seconds == pytest.approx(5.0, abs=1e-3)
    short, _ = encoder.audio_input(audio[:8000], rate)  # 0.5 s: zero-padded to 204 frames
    pad = short[0, 0, 0, :, 60:]  # zero fbank frames, normalised: (0 + 4.268) / 9.138
    assert torch.allclose(pad, torch.full_like(pad, 4.268 / 9.138))


def test_modes_and_fusion_on_demo_media(encoder: ImageBindEncoder) -> None:
    m = embed_modes(encoder, 2, 4.0, fps=5.0, size=224, max_frames=20)
    a, v, av = m.a, m.v, m.av
    assert a.vector.shape == (16,) and v.vector.shape == (16,) and av.vector.shape == (48,)
    assert np.allclose(av.vector[:16], a.vector, atol=1e-5)
    assert np.allclose(av.vector[16:32], v.vector, atol=1e-5)
    assert np.allclose(av.vector[32:], a.vector * v.vector, atol=1e-5)
    assert av.spec.video_size == 224 and av.spec.audio_rate == 16000
    other, _ = demo_frames(13, fps=5.0, size=224, max_frames=20)
    shuffled = encoder.embed(mode="AV", audio=m.audio, sample_rate=m.rate, frames=other,
                             fps=m.fps)
    assert not np.allclose(shuffled.vector[16:32], av.vector[16:32])
    assert np.allclose(shuffled.vector[:16], av.vector[:16], atol=1e-5)
    with pytest.raises(ValueError, match="needs video"):
        encoder.embed(mode="AV", audio=m.audio, sample_rate=m.rate)
