"""BA-TFD+ adapter on a tiny upstream BatfdPlus (C3D/CNN encoders at 4 channels, the real
512-frame boundary modules), saved and loaded as a pytorch_lightning checkpoint."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("pytorch_lightning") is None:
    pytest.skip("run make adapter-test IMAGE=det-batfd", allow_module_level=True)
if importlib.util.find_spec("model") is None:
    pytest.skip("run make adapter-test IMAGE=det-batfd (ControlNet/LAV-DF)",
                allow_module_level=True)


from madbench_common.models.adapters.batfd import AUDIO_PAD, FRAMES, BatfdPlusDetector
from madbench_common.models.tiny.det import batfd

from .tiny import assert_refused, demo_audio, demo_frames, tiny_root, weights_env


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> BatfdPlusDetector:
    with weights_env(tiny_root(tmp_path_factory, batfd)):
        return BatfdPlusDetector()


def test_inputs_follow_the_lavdf_loader(detector: BatfdPlusDetector) -> None:
    audio, rate = demo_audio(5, 3.0)
    frames, fps = demo_frames(5, fps=25.0, size=224, max_frames=40)
    v, a, n, fallback = detector.inputs(audio, rate, frames, fps)
    assert tuple(v.shape) == (1, 3, FRAMES, 96, 96) and tuple(a.shape) == (1, 64, 2048)
    assert n == round(len(frames) * 25.0 / fps) and float(v[0, :, n:].abs().max()) == 0.0
    assert float(v.min()) >= 0.0 and float(v.max()) <= 1.0
    assert fallback == "" or fallback.startswith(("no_face:", "face_held:"))
    assert AUDIO_PAD == 327680


def test_score_and_pooled_features(detector: BatfdPlusDetector) -> None:
    audio, rate = demo_audio(5, 3.0)
    f1, fps = demo_frames(5, fps=25.0, size=224, max_frames=40)
    f2, _ = demo_frames(14, fps=25.0, size=224, max_frames=40)
    out = detector.embed(mode="AV", audio=audio, sample_rate=rate, frames=f1, fps=fps)
    assert out.vector.shape == (16 + 16 + 4,) and out.score_kind == "prob"
    assert out.score is not None and 0.0 <= out.score <= 1.0
    assert out.spec.video_fps == 25.0 and out.spec.video_size == 96
    other = detector.embed(mode="AV", audio=audio, sample_rate=rate, frames=f2, fps=fps)
    assert not np.allclose(other.vector[:16], out.vector[:16])  # video features follow video
    assert np.allclose(other.vector[16:32], out.vector[16:32], atol=1e-6)  # audio ones do not
    assert detector.score(audio, rate, frames=f1, fps=fps) == pytest.approx(out.score)
    with pytest.raises(ValueError, match="mode AV"):
        detector.embed(mode="A", audio=audio, sample_rate=rate)


def test_a_checkpoint_with_other_weights_is_refused(tmp_path: Path) -> None:
    import torch

    batfd(tmp_path)
    path = tmp_path / "files" / "det-batfd" / "batfd_plus_default.ckpt"
    ckpt = torch.load(path)
    ckpt["state_dict"] = {k: v for k, v in ckpt["state_dict"].items()
                          if not k.startswith("audio_encoder.")}
    torch.save(ckpt, path)
    assert_refused(BatfdPlusDetector, tmp_path, "not a BA-TFD\\+ checkpoint")
