"""Batched WavLM and XLS-R (``embed_batch``) against batch 1 on tiny random models.

The tiny WavLM has the released Base+'s group-norm conv feature encoder (a batch groups
inputs of one length); the tiny XLS-R the release's layer-norm one (a batch pads with an
attention mask). Either way each input's features must equal its batch-1 features within
:data:`~madbench_common.models.batching.EQUIVALENCE_ATOL` on the CPU (``GPU_BATCH_ATOL``
of ``tests/models/device.py`` on a GPU), mixed lengths included.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("transformers", reason="run make adapter-test IMAGE=enc-tf5")

from madbench_common.models.batching import EQUIVALENCE_ATOL, embed_batch, embed_each

from .device import batch_atol
from .tiny import demo_audio

SECONDS = (1.5, 1.0, 1.5, 0.62, 2.0, 1.0)
"""Mixed lengths, two of them twice (a WavLM batch groups those)."""


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from madbench_common.models.tiny.eval import _wavlm, _xlsr
    from madbench_common.models.weights_layout import install_local_snapshot

    root = tmp_path_factory.mktemp("weights")
    with tempfile.TemporaryDirectory() as tmp:
        for repo, build in (("microsoft/wavlm-base-plus", _wavlm),
                            ("facebook/wav2vec2-xls-r-300m", _xlsr)):
            src = Path(tmp) / repo.split("/")[1]
            src.mkdir()
            build(src)
            install_local_snapshot(root, repo, src)
    return root


@pytest.fixture
def env(weights: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(weights))
    return weights


def _inputs() -> list[dict[str, Any]]:
    out = []
    for clip, seconds in enumerate(SECONDS, start=1):
        audio, rate = demo_audio(clip, seconds)
        out.append({"mode": "A", "audio": audio, "sample_rate": rate})
    return out


def _encoder(name: str) -> Any:
    from madbench_common.models.adapters import tf5

    return getattr(tf5, name)()


@pytest.mark.parametrize(("name", "pads"), [("WavLMEncoder", False), ("XlsrEncoder", True)])
def test_batch_equals_batch_one_with_mixed_lengths(env: Path, name: str, pads: bool,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    enc = _encoder(name)
    assert enc.pads is pads  # group norm (WavLM Base+) groups; layer norm (XLS-R) pads
    inputs = _inputs()
    one = embed_each(enc, inputs)
    many = embed_batch(enc, inputs)
    assert len(many) == len(one) == len(inputs)
    worst = max(float(np.abs(a.vector - b.vector).max()) for a, b in zip(one, many))
    with capsys.disabled():
        print(f"\n{name} on {enc.device}: max |batch {len(inputs)} - batch 1| = {worst:.2e}")
    assert worst <= batch_atol(enc.device), f"{name}: batch-N differs from batch 1 by {worst:g}"
    for a, b in zip(one, many):
        assert a.spec == b.spec  # the same frames pooled, the same seconds recorded
        assert b.vector.dtype == np.float32 and b.score is None
    # a padded batch is a real batch: its longest input is not what the others pooled
    assert len({m.spec.pooling for m in many}) == len(set(SECONDS))


def test_padding_without_the_mask_would_change_features(env: Path) -> None:
    """The check above can fail: padding XLS-R's short input and pooling its padded frames
    (what a batch without per-item lengths would do) moves the features well past the
    tolerance."""
    import torch

    enc = _encoder("XlsrEncoder")
    short, long = _inputs()[3], _inputs()[4]
    alone = embed_each(enc, [short])[0].vector
    values = [enc._input_values(**kw) for kw in (short, long)]
    batch = torch.zeros(2, values[1].shape[-1])
    batch[0, :values[0].shape[-1]], batch[1] = values[0][0], values[1][0]
    with torch.no_grad():
        naive = enc.model(batch.to(enc.device)).last_hidden_state[0].mean(dim=0).cpu().numpy()
    assert np.abs(naive - alone).max() > 100 * EQUIVALENCE_ATOL


def test_a_bad_input_fails_the_batch_and_batch_one_still_runs(env: Path) -> None:
    enc = _encoder("XlsrEncoder")
    inputs = _inputs()[:3]
    bad = [*inputs[:1], {"mode": "A", "audio": np.zeros(0, np.float32),
                         "sample_rate": 16000}, *inputs[1:]]
    with pytest.raises(ValueError, match="empty"):
        enc.embed_batch(bad)
    ok = embed_batch(enc, inputs)
    assert all(np.isfinite(e.vector).all() for e in ok)


def test_cpu_timing_batch_one_and_four(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the seconds of batch 1 and batch 4 on equal-length inputs (a record, not
    a threshold: tiny models on a shared CPU); both give the same features."""
    enc = _encoder("XlsrEncoder")
    audio, rate = demo_audio(1, 2.0)
    inputs = [{"mode": "A", "audio": audio * (0.5 + i / 8), "sample_rate": rate}
              for i in range(8)]
    seconds, vectors = {}, {}
    for size in (1, 4):
        start = time.perf_counter()
        out = [e for i in range(0, len(inputs), size)
               for e in embed_batch(enc, inputs[i:i + size])]
        seconds[size] = time.perf_counter() - start
        vectors[size] = np.stack([e.vector for e in out])
    assert vectors[1].shape == (len(inputs), 32)
    assert np.abs(vectors[1] - vectors[4]).max() <= batch_atol(enc.device)
    with capsys.disabled():
        print(f"\ntiny XLS-R on {enc.device}, 8 x 2 s: batch 1 {seconds[1]:.3f} s, "
              f"batch 4 {seconds[4]:.3f} s")
