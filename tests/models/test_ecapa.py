"""ECAPA speaker-embedding adapter on a tiny random ECAPA-TDNN in speechbrain's layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from madbench_common.media.audio import resample
from madbench_common.models.weights import WeightsMissing
from tests.models._qc import VENV, demo_stem
from tests.models.device import DEVICE


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("speechbrain", reason=VENV)
    from madbench_common.models.adapters.ecapa import EcapaEmbedder
    from madbench_common.models.tiny.qc import install_tiny_ecapa

    root = tmp_path_factory.mktemp("weights")
    snap = install_tiny_ecapa(root)
    before = sorted(p.name for p in snap.iterdir())
    model = EcapaEmbedder(device=DEVICE, root=root)
    assert sorted(p.name for p in snap.iterdir()) == before  # used in place, nothing written
    return model


def test_unit_norm_embeddings_of_real_speech(embedder: Any) -> None:
    a, b = demo_stem("speech", "demo_001"), demo_stem("speech", "demo_005")
    ea, eb = embedder.embed(a, 16000), embedder.embed(b, 16000)
    assert ea.shape == eb.shape == (16,) and ea.dtype == np.float32
    assert np.linalg.norm(ea) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_array_equal(ea, embedder.embed(a, 16000))
    assert not np.allclose(ea, eb)


def test_rates_and_very_short_inputs(embedder: Any) -> None:
    x = demo_stem("speech")[:16000]
    e44 = embedder.embed(resample(x, 16000, 44100), 44100)
    assert float(e44 @ embedder.embed(x, 16000)) > 0.9
    short = embedder.embed(x[:80], 16000)
    assert np.isfinite(short).all() and np.linalg.norm(short) == pytest.approx(1.0, abs=1e-5)


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    pytest.importorskip("speechbrain", reason=VENV)
    from madbench_common.models.adapters.ecapa import EcapaEmbedder

    with pytest.raises(WeightsMissing, match="madbench weights fetch --image qc"):
        EcapaEmbedder(device=DEVICE, root=tmp_path)
