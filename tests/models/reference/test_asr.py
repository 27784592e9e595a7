"""The reference ASR (PocketSphinx) gives each utterance the same transcript whatever the
process decoded before it: resumed runs and other shard orders depend on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from madbench_common.media.audio import decode_audio
from madbench_common.models.reference.asr import PocketSphinxASR

CLIPS = Path(__file__).resolve().parents[3] / "data" / "demo" / "clips"


def test_transcript_does_not_depend_on_earlier_utterances() -> None:
    paths = sorted(CLIPS.glob("*.mp4"))[:4]
    if len(paths) < 4:
        pytest.skip("data/demo not built")
    clips = [decode_audio(p, 16000) for p in paths]
    alone = PocketSphinxASR().transcribe(clips[3], 16000)
    asr = PocketSphinxASR()
    for clip in clips[:3]:  # before the fix these moved the cepstral mean (another text)
        asr.transcribe(clip, 16000)
    after = asr.transcribe(clips[3], 16000)
    assert after.text == alone.text and after.text
    assert after.words == alone.words
