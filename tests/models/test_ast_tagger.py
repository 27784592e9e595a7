"""AST AudioSet tagger adapter on a tiny random AST classifier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from madbench_common.models._hf import even_windows
from madbench_common.models.weights import WeightsMissing
from tests.models._qc import VENV, demo_mixture
from tests.models.device import DEVICE
from tests.models.tiny import tiny_root


@pytest.fixture(scope="module")
def tagger(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("transformers", reason=VENV)
    from madbench_common.models.adapters.ast_tagger import ASTTagger
    from madbench_common.models.tiny.qc import install_tiny_ast

    return ASTTagger(device=DEVICE, root=tiny_root(tmp_path_factory, install_tiny_ast))


def test_even_windows_cover_the_signal() -> None:
    assert even_windows(30, 40) == [(0, 30)]
    assert even_windows(100, 40) == [(0, 40), (30, 70), (60, 100)]
    assert even_windows(80, 40) == [(0, 40), (40, 80)]


def test_tags_real_audio_by_audioset_label_name(tagger: Any) -> None:
    got = tagger.tag(demo_mixture()[:48000], 16000)
    assert {"Music", "Speech", "Television", "Radio"} <= set(got)
    assert all(0.0 < p < 1.0 for p in got.values())


def test_long_clips_average_evenly_spaced_windows(tagger: Any) -> None:
    x = np.concatenate([demo_mixture("demo_001"), demo_mixture("demo_002")])[:16000 * 15]
    size = 163840
    windows = even_windows(len(x), size)
    assert len(windows) == 2
    parts = [tagger.tag(x[s:e], 16000) for s, e in windows]
    whole = tagger.tag(x, 16000)
    for label, p in whole.items():
        assert p == pytest.approx((parts[0][label] + parts[1][label]) / 2, abs=1e-5)


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason=VENV)
    from madbench_common.models.adapters.ast_tagger import ASTTagger

    with pytest.raises(WeightsMissing, match="madbench weights fetch --image qc"):
        ASTTagger(device=DEVICE, root=tmp_path)
