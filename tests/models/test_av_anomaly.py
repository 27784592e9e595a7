"""AV Anomaly adapter on upstream's networks at their published sizes (random weights), run
through detect.py's steps on a demo clip; the in-repository AR weights load strictly."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("transformer_component") is None:
    pytest.skip("run make adapter-test IMAGE=det-av-anomaly", allow_module_level=True)
pytest.importorskip("librosa", reason="run make adapter-test IMAGE=det-av-anomaly")


from madbench_common.models.adapters.av_anomaly import FILES, AvAnomalyDetector, build_models
from madbench_common.models.tiny.det import av_anomaly
from madbench_common.models.weights import load_spec

from .tiny import ROOT, assert_refused, demo_audio, demo_frames, tiny_root, weights_env

UPSTREAM = ROOT / "images" / "det-av-anomaly" / ".upstream" / "avforensics"


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> AvAnomalyDetector:
    with weights_env(tiny_root(tmp_path_factory, av_anomaly)):
        return AvAnomalyDetector(max_len=4)  # 4 windows keep the r18 passes few on a CPU


def test_inputs_follow_detect_py(detector: AvAnomalyDetector) -> None:
    audio, rate = demo_audio(6, 1.0)
    frames, fps = demo_frames(6, fps=25.0, size=224, max_frames=20)
    v, a, fallback, windows = detector.inputs(audio, rate, frames, fps)
    t = v.shape[1]
    assert tuple(v.shape) == (3, t, 224, 224) and float(v.max()) > 1.0  # 0-255, not scaled
    assert t == min(round(len(frames) * 25.0 / fps), 25)  # 1 s of audio: 25 frames
    assert a.shape[0] == (t + 30) * 640 and float(a[: 15 * 640].abs().max()) == 0.0
    assert float(a.abs().max()) > 1.0  # int16 sample values, as a pcm_s16le WAV
    assert windows == 4 and fallback.startswith(("no_face", "face_held", ""))


def test_score_features_and_shuffled_video(detector: AvAnomalyDetector) -> None:
    audio, rate = demo_audio(6, 2.0)
    audio = audio[rate:]  # the speech stem is silent for its first second
    f1, fps = demo_frames(6, fps=25.0, size=224, max_frames=20)
    f2, _ = demo_frames(14, fps=25.0, size=224, max_frames=20)
    out = detector.embed(mode="AV", audio=audio, sample_rate=rate, frames=f1, fps=fps)
    assert out.vector.shape == (64,) and out.score_kind == "sigmoid(raw)"
    kl = float(out.vector[62])
    assert kl >= 0 and out.score == pytest.approx(1 / (1 + np.exp(-kl)))
    assert out.vector[:31].sum() == pytest.approx(1.0, abs=1e-5)  # a delay distribution
    assert out.spec.video_fps == 25.0 and out.spec.video_frames == 8
    other = detector.embed(mode="AV", audio=audio, sample_rate=rate, frames=f2, fps=fps)
    assert not np.allclose(other.vector[31:62], out.vector[31:62])  # the video matters
    quiet = detector.embed(mode="AV", audio=audio * 0.01, sample_rate=rate, frames=f1, fps=fps)
    assert not np.allclose(quiet.vector[:31], out.vector[:31], atol=1e-6)  # so does the audio
    assert detector.score(audio, rate, frames=f1, fps=fps) == pytest.approx(out.score)
    with pytest.raises(ValueError, match="mode AV"):
        detector.embed(mode="A", audio=audio, sample_rate=rate)
    with pytest.raises(ValueError, match="at least"):
        detector.embed(mode="AV", audio=audio[:3000], sample_rate=rate, frames=f1, fps=fps)


def test_a_clips_samples_share_the_video_encoder_passes(detector: AvAnomalyDetector) -> None:
    """R/S/E/Q samples and perturbed copies carry one video: each window's r18 pass runs
    once, and a cached output gives the very vector a cold encoder gives."""
    from madbench_common.models.adapters.av_anomaly import VIDEO_WINDOWS_KEPT

    audio, rate = demo_audio(6, 2.0)
    audio = audio[rate:]
    frames, fps = demo_frames(6, fps=25.0, size=224, max_frames=20)
    calls: list[int] = []
    hook = detector.nets["vis_enc"].register_forward_hook(lambda *_: calls.append(1))
    try:
        detector._video.clear()
        first = detector.embed(mode="AV", audio=audio, sample_rate=rate, frames=frames, fps=fps)
        assert len(calls) == 4  # max_len=4 windows
        other = detector.embed(mode="AV", audio=audio * 0.5, sample_rate=rate, frames=frames,
                               fps=fps)
        again = detector.embed(mode="AV", audio=audio, sample_rate=rate, frames=frames, fps=fps)
        assert len(calls) == 4  # the same frames: no new encoder pass
        assert not np.array_equal(other.vector, first.vector)  # the audio still counts
        np.testing.assert_array_equal(again.vector, first.vector)
        detector._video.clear()
        cold = detector.embed(mode="AV", audio=audio * 0.5, sample_rate=rate, frames=frames,
                              fps=fps)
        assert len(calls) == 8
        np.testing.assert_array_equal(cold.vector, other.vector)
        for i in range(VIDEO_WINDOWS_KEPT + 1):  # only the last windows are kept
            detector._encode_video(detector._torch.full((1, 3, 5, 64, 64), float(i)))
        assert len(detector._video) == VIDEO_WINDOWS_KEPT
    finally:
        hook.remove()
        detector._video.clear()


def test_a_broken_sync_checkpoint_is_refused(tmp_path: Path) -> None:
    import torch

    av_anomaly(tmp_path)
    path = tmp_path / "files" / "det-av-anomaly" / FILES["sync"]
    state = torch.load(path)
    torch.save({k: v for k, v in state.items() if not k.startswith("aud_enc.")}, path)
    assert_refused(AvAnomalyDetector, tmp_path, "aud_enc: not the released checkpoint")


@pytest.mark.skipif(not (UPSTREAM / FILES["dist"]).exists(), reason="upstream not fetched")
def test_the_repository_ar_weights_and_pca_load() -> None:
    import pickle

    import torch

    from madbench_common.models.adapters.av_anomaly import pca_transform

    urls = {u.name: u.sha256 for u in load_spec("det-av-anomaly").urls}
    nets = build_models()
    for part, name in (("dist", "dist"), ("avfeature_reg", "avfeature")):
        path = UPSTREAM / FILES[name]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == urls[FILES[name]]
        nets[part].load_state_dict(torch.load(path, map_location="cpu"))  # strict
    pca = pickle.loads((UPSTREAM / FILES["pca"]).read_bytes())
    assert [type(s).__name__ for _, s in pca.steps] == ["StandardScaler", "PCA"]
    y = pca_transform(pca, np.random.default_rng(0).normal(size=(3, 1024)))
    assert y.shape == (3, 31) and np.isfinite(y).all()


def test_pca_transform_matches_scikit_learn(tmp_path: Path) -> None:
    import pickle

    from madbench_common.models.adapters.av_anomaly import pca_transform

    av_anomaly(tmp_path)
    pca = pickle.loads((tmp_path / "files" / "det-av-anomaly" / FILES["pca"]).read_bytes())
    x = np.random.default_rng(1).normal(size=(5, 1024))
    assert np.allclose(pca_transform(pca, x), pca.transform(x), atol=1e-8)
