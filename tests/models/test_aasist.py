"""AASIST adapter: upstream's Model class at its published size, random and real weights."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("AASIST", reason="run make adapter-test IMAGE=audio-torch (clovaai/aasist)")


from madbench_common.models.adapters.aasist import WEIGHTS, AasistDetector
from madbench_common.models.weights import load_spec

from .tiny import ROOT, demo_audio

UPSTREAM = ROOT / "images" / "audio-torch" / ".upstream" / "aasist" / "weights" / WEIGHTS


def _install(root: Path, src: Path | None = None) -> None:
    dest = root / "files" / "audio-torch"
    dest.mkdir(parents=True, exist_ok=True)
    if src is not None:
        shutil.copy(src, dest / WEIGHTS)
        return
    from madbench_common.models.tiny.eval import audio_torch

    audio_torch(root)


def test_score_and_features_on_the_upstream_crop(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _install(tmp_path)
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    det = AasistDetector()
    audio, rate = demo_audio(3, 6.0)
    out = det.embed(mode="A", audio=audio, sample_rate=rate)
    assert out.vector.shape == (160,) and out.score_kind == "prob"
    assert out.score is not None and 0.0 < out.score < 1.0
    assert out.spec.audio_seconds == pytest.approx(64600 / 16000)
    # only the first 64,600 samples count: a different tail changes nothing
    longer = np.concatenate([audio[:64600], np.random.default_rng(0).normal(size=32000)])
    same = det.embed(mode="A", audio=longer.astype(np.float32), sample_rate=rate)
    assert same.score == pytest.approx(out.score) and np.allclose(same.vector, out.vector)
    # a short clip is repeated from its start (1 s → 4.04 s)
    short = det.embed(mode="A", audio=audio[:16000], sample_rate=rate)
    tiled = det.embed(mode="A", audio=np.tile(audio[:16000], 5), sample_rate=rate)
    assert short.score == pytest.approx(tiled.score)
    assert det.score(audio, rate) == pytest.approx(out.score)
    assert np.array_equal(det.features(audio, rate), out.vector)


@pytest.mark.skipif(not UPSTREAM.exists(), reason="upstream AASIST.pth not fetched")
def test_the_published_weights_load_strictly(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec("audio-torch")
    want = next(u.sha256 for u in spec.urls if u.name == WEIGHTS)
    assert hashlib.sha256(UPSTREAM.read_bytes()).hexdigest() == want
    _install(tmp_path, UPSTREAM)
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    out = AasistDetector().embed(mode="A", audio=demo_audio(1, 4.0)[0], sample_rate=16000)
    assert np.isfinite(out.vector).all() and out.score is not None and 0 <= out.score <= 1


def test_batch_equals_batch_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """``embed_batch`` stacks the fixed-length crops: each clip's features and score equal
    its batch-1 ones within the device's bound (``device.batch_atol``), clips of mixed
    lengths (a short one repeated, a long one cut) included; an empty clip fails the
    batch, not the others alone."""
    import torch
    from AASIST import Model

    from madbench_common.models.adapters.aasist import MODEL_CONFIG
    from madbench_common.models.batching import embed_batch, embed_each

    from .device import batch_atol

    dest = tmp_path / "files" / "audio-torch"
    dest.mkdir(parents=True)
    torch.manual_seed(0)  # random weights at the published size
    torch.save(Model(MODEL_CONFIG).state_dict(), dest / WEIGHTS)
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    det = AasistDetector()
    inputs = [{"mode": "A", "audio": demo_audio(c, s)[0], "sample_rate": demo_audio(c, s)[1]}
              for c, s in ((1, 6.0), (2, 1.0), (3, 4.5), (4, 2.5))]
    one, many = embed_each(det, inputs), embed_batch(det, inputs)
    worst = max(float(np.abs(a.vector - b.vector).max()) for a, b in zip(one, many))
    with capsys.disabled():
        print(f"\nAASIST on {det.device}: max |batch 4 - batch 1| = {worst:.2e}")
    atol = batch_atol(det.device)
    assert worst <= atol, f"batch differs from batch 1 by {worst:g}"
    for a, b in zip(one, many):
        assert a.score is not None and b.score is not None
        assert abs(a.score - b.score) <= atol and a.spec == b.spec
    assert len({round(float(e.score or 0), 6) for e in many}) == len(inputs)  # four clips
    with pytest.raises(ValueError, match="empty"):
        det.embed_batch([*inputs[:1], {"mode": "A", "audio": np.zeros(0, np.float32)}])
