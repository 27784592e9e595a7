"""The reference transcript a speech generator is given (paper §3.3), hand-worked."""

from __future__ import annotations

import pytest

from madbench_common.benchmarks.madbench.rows import ComponentRow
from madbench_common.benchmarks.madbench.stages.speech_gen import reference_text
from madbench_common.core.errors import InputRejected


def _plan(branch: str, target: str = "", ref_text: str = "") -> ComponentRow:
    return ComponentRow(component_id=f"c.{branch}", clip_id="c", component="speech",
                        branch=branch, target_clip_id=target, prompt="the source says this",
                        ref_text=ref_text)


def test_cross_identity_tts_conditions_on_the_targets_own_words() -> None:
    assert reference_text(_plan("tts_cross", "t", "the target says that")) == \
        "the target says that"


def test_cross_identity_tts_without_a_target_transcript_is_rejected() -> None:
    """It used to fall back to the source's transcript: the target's audio paired
    with words it never says."""
    with pytest.raises(InputRejected) as err:
        reference_text(_plan("tts_cross", "t", "  "))
    assert err.value.reason == "no_target_transcript"


def test_same_identity_and_voice_conversion_are_unaffected() -> None:
    assert reference_text(_plan("tts_same")) == "the source says this"
    assert reference_text(_plan("vc", "t", "")) == "the source says this"  # VC reads no text
