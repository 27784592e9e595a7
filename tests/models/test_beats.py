"""BEATs adapter on a tiny random model of unilm's own BEATs classes (checkpoint layout as
upstream: ``{"cfg": ..., "model": ...}``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("BEATs", reason="run make adapter-test IMAGE=audio-torch (unilm beats/)")


from madbench_common.models.adapters.beats import BeatsEncoder

from .tiny import assert_refused, demo_audio


def _write(root: Path, **cfg: object) -> None:
    from madbench_common.models.tiny.eval import audio_torch

    audio_torch(root, **cfg)


def test_beats_mean_pools_real_speech(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path)
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    enc = BeatsEncoder()
    audio, rate = demo_audio(2, 2.0)
    out = enc.embed(mode="A", audio=audio, sample_rate=rate)
    assert out.vector.shape == (32,) and np.isfinite(out.vector).all()
    assert out.spec.audio_rate == 16000 and out.spec.audio_seconds == pytest.approx(2.0, abs=1e-3)
    # 2 s → 198 fbank frames → 12 × 8 patches of 16 × 16
    assert out.spec.pooling == "mean over 96 patches of the last layer"
    assert np.array_equal(out.vector, enc.embed(mode="A", audio=audio, sample_rate=rate).vector)
    other = enc.embed(mode="A", audio=demo_audio(7, 2.0)[0], sample_rate=rate).vector
    assert not np.allclose(out.vector, other)
    with pytest.raises(ValueError, match="too short"):
        enc.embed(mode="A", audio=audio[:100], sample_rate=rate)


def test_a_finetuned_classifier_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, finetuned_model=True, predictor_class=5)
    assert_refused(BeatsEncoder, tmp_path, "fine-tuned")
