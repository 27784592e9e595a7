"""CLAP prompt-score adapter on a tiny random unfused CLAP with an offline tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from madbench_common.models.weights import WeightsMissing
from tests.models._qc import VENV, demo_stem
from tests.models.device import DEVICE
from tests.models.tiny import tiny_root


@pytest.fixture(scope="module")
def scorer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("transformers", reason=VENV)
    from madbench_common.models.adapters.clap import ClapScorer
    from madbench_common.models.tiny.qc import install_tiny_clap

    return ClapScorer(device=DEVICE, root=tiny_root(tmp_path_factory, install_tiny_clap))


def test_scores_are_cosines_one_per_text(scorer: Any) -> None:
    env = demo_stem("env")[:16000 * 4]
    texts = ["birds singing in a forest", "busy city traffic", "rain falling on a tin roof"]
    got = scorer.score_texts(env, 16000, texts)
    assert len(got) == 3 and all(-1.0 <= s <= 1.0 for s in got)
    text = scorer._text_embeddings(texts)
    np.testing.assert_allclose(np.linalg.norm(text, axis=1), 1.0, atol=1e-5)
    audio = scorer._audio_embedding(env, 16000)
    np.testing.assert_allclose(got, text @ audio, atol=1e-6)
    assert scorer.score_texts(env, 16000, []) == []


def test_long_clips_are_scored_deterministically(scorer: Any) -> None:
    x = np.tile(demo_stem("env"), 3)[:16000 * 25]
    first = scorer.score_texts(x, 16000, ["busy city traffic"])
    assert first == scorer.score_texts(x, 16000, ["busy city traffic"])


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason=VENV)
    from madbench_common.models.adapters.clap import ClapScorer

    with pytest.raises(WeightsMissing, match="madbench weights fetch --image qc"):
        ClapScorer(device=DEVICE, root=tmp_path)


def test_a_prompt_longer_than_the_text_positions_is_truncated(scorer: Any) -> None:
    """MADBench's scene prompts tokenise past a text tower's positions (the tiny tower's 80
    here); the rehearsal rejected every environment component with an index error."""
    env = demo_stem("env")[:16000 * 2]
    long = "a busy kitchen with clattering pans, running water and a humming fridge " * 20
    (got,) = scorer.score_texts(env, 16000, [long])
    assert -1.0 <= got <= 1.0


def test_the_text_token_limit_follows_roberta_positions() -> None:
    from madbench_common.models.adapters.clap import text_token_limit

    assert text_token_limit(514, 1, 512) == 512  # laion/clap-htsat-unfused
    assert text_token_limit(514, 1, 77) == 77  # a tokenizer that stops earlier
    assert text_token_limit(80, 1, 0) == 78  # no tokenizer limit
    with pytest.raises(ValueError):
        text_token_limit(2, 1, 0)
