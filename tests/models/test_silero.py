"""qc-silero-vad: the QC image's VAD is Silero VAD itself, and its window probabilities."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.models._qc import demo_mixture, demo_stem


@pytest.fixture(scope="module")
def vad() -> Any:
    pytest.importorskip("silero_vad", reason="silero-vad is not installed")
    from madbench_common.models.adapters.silero import QCSileroVAD

    return QCSileroVAD()


def test_same_segments_as_the_reference_and_labelled_as_qc(vad: Any) -> None:
    from madbench_common.models.reference.vad import SileroVAD

    x = demo_mixture()
    assert vad.slug == "qc-silero-vad" and vad.reference is False
    assert vad.segments(x, 16000) == SileroVAD().segments(x, 16000)


def test_window_probabilities_separate_speech_from_ambience(vad: Any) -> None:
    speech, env = demo_stem("speech"), demo_stem("env")
    p_speech, p_env = vad.speech_probs_many([speech, env], 16000)
    assert len(p_speech) == -(-len(speech) // 512) and len(p_env) == -(-len(env) // 512)
    assert float(np.mean(p_speech)) > 0.5 > float(np.mean(p_env))
    segs = vad.segments_many([speech], 16000)[0]
    assert segs and all(0 <= s.start < s.end <= len(speech) / 16000 for s in segs)
