"""AVH-Align adapter on a tiny AV-HuBERT (the avhubert package's own AVHubertModel, one
transformer layer at the released width, saved and loaded through fairseq's
checkpoint_utils) and AVH-Align's FusionModel at its published size (random weights)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("avhubert") is None or importlib.util.find_spec("fairseq") is None:
    pytest.skip("run make adapter-test IMAGE=det-avh-align", allow_module_level=True)


from madbench_common.models.adapters.avh_align import FUSION, AvhAlignDetector, audio_features
from madbench_common.models.av_prep import at_fps
from madbench_common.models.tiny.det import avh_align

from .tiny import assert_refused, demo_audio, demo_frames, tiny_root, weights_env


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> AvhAlignDetector:
    with weights_env(tiny_root(tmp_path_factory, avh_align)):
        return AvhAlignDetector()


def _clip(n: int) -> tuple[np.ndarray, int, np.ndarray, float]:
    audio, rate = demo_audio(n, 2.5)
    frames, fps = demo_frames(n, fps=25.0, size=360, max_frames=30)
    return audio, rate, frames, fps


def test_audio_features_are_stacked_log_fbanks_at_25_fps() -> None:
    audio, rate = demo_audio(6, 2.0)
    feats = audio_features(audio[rate:])  # 1 s: 100 fbank frames → 25 rows of 4 × 26
    assert feats.shape == (25, 104)
    assert np.allclose(feats.mean(1), 0, atol=1e-5) and np.allclose(feats.std(1), 1, atol=1e-2)


def test_inputs_follow_the_feature_extraction(detector: AvhAlignDetector) -> None:
    audio, rate, frames, fps = _clip(6)
    v, a, fallback = detector.inputs(audio, rate, frames, fps)
    t = v.shape[2]
    assert tuple(v.shape) == (1, 1, t, 88, 88) and tuple(a.shape) == (1, 104, t)
    assert t == min(len(at_fps(frames, fps)), len(audio_features(audio)))
    # grey / 255, then AV-HuBERT's mean 0.421 and std 0.165
    assert float(v.min()) >= -0.421 / 0.165 - 1e-4 and float(v.max()) <= 0.579 / 0.165 + 1e-4
    assert fallback == "" or fallback.startswith(("no_face:", "face_held:"))


def test_score_features_and_shuffled_video(detector: AvhAlignDetector) -> None:
    audio, rate, f1, fps = _clip(6)
    _, _, f2, _ = _clip(14)
    out = detector.embed(mode="AV", audio=audio, sample_rate=rate, frames=f1, fps=fps)
    assert out.vector.shape == (131,) and out.score_kind == "sigmoid(raw)"
    assert out.score is not None and 0.0 < out.score < 1.0
    # logsumexp(-o) >= max(-o) = -min(o) >= -mean(o): the score bounds the pooled stats
    raw = float(np.log(out.score / (1 - out.score)))
    assert raw >= -float(out.vector[128]) - 1e-4
    assert out.spec.video_fps == 25.0 and out.spec.video_size == 88
    other = detector.embed(mode="AV", audio=audio, sample_rate=rate, frames=f2, fps=fps)
    assert other.score != pytest.approx(out.score)
    assert detector.score(audio, rate, frames=f1, fps=fps) == pytest.approx(out.score)
    with pytest.raises(ValueError, match="mode AV"):
        detector.embed(mode="A", audio=audio, sample_rate=rate)


def test_a_fusion_checkpoint_of_another_shape_is_refused(tmp_path: Path) -> None:
    import torch

    avh_align(tmp_path)
    path = tmp_path / "files" / "det-avh-align" / FUSION
    state = torch.load(path)["state_dict"]
    torch.save({"state_dict": {k: v[..., :8] if k.endswith("proj.weight") else v
                               for k, v in state.items()}}, path)
    assert_refused(AvhAlignDetector, tmp_path, "not the released AVH-Align checkpoint")


def test_a_checkpoint_without_its_label_dictionaries_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pre-training task of a fine-tuned release names label files that are not here."""
    avh_align(tmp_path, task_state=False)
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    det = AvhAlignDetector()
    assert not hasattr(det.avhubert, "label_embs_concat")
    audio, rate, frames, fps = _clip(5)
    assert det.embed(mode="AV", audio=audio, sample_rate=rate, frames=frames,
                     fps=fps).vector.shape == (131,)
