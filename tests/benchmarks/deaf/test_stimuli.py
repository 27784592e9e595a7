"""DEAF CPU references: emotion prosody, age transform, background library and SNR mixing."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.benchmarks.deaf.design import ENVIRONMENTS
from madbench_common.benchmarks.deaf.envlib import (
    library_entries,
    load_background,
    loop_to,
    mix_at_snr,
)
from madbench_common.benchmarks.deaf.stages_stimuli import repo_library
from madbench_common.core.errors import ConfigError
from madbench_common.media.audio import rms_dbfs
from madbench_common.media.dsp import f0_track
from madbench_common.models.reference.deaf_prosody import ReferenceEmotionTTSB
from madbench_common.models.reference.deaf_voices import ReferenceVoices

TEXT = "The meeting has been moved to the afternoon."


def _median_f0(x: np.ndarray) -> float:
    f0 = f0_track(x, 16000)
    return float(np.median(f0[f0 > 0]))


def test_emotion_prosody_moves_pitch_level_and_rate() -> None:
    tts = ReferenceEmotionTTSB()
    clips = {e: tts.synthesise(TEXT, e, 16000) for e in ("neutral", "happy", "sad", "angry")}
    f0 = {e: _median_f0(x) for e, x in clips.items()}
    assert f0["happy"] > f0["neutral"] * 1.1 and f0["sad"] < f0["neutral"] * 0.95
    assert len(clips["sad"]) > len(clips["neutral"]) > len(clips["angry"])  # slower / faster
    # angry aims at -20 dBFS; the 0.95 peak limit may hold it lower, never at neutral's -26
    assert rms_dbfs(clips["angry"]) > rms_dbfs(clips["neutral"]) + 2.0
    assert rms_dbfs(clips["sad"]) == pytest.approx(-32.0, abs=0.5)
    with pytest.raises(ConfigError, match="unknown emotion"):
        tts.synthesise(TEXT, "bored", 16000)


def test_voice_profiles_differ_by_gender_and_age() -> None:
    voices = ReferenceVoices()
    f0 = {p: _median_f0(voices.synthesise(TEXT, p, 16000)) for p in
          ("young_male", "elderly_male", "young_female", "elderly_female")}
    assert min(f0["young_female"], f0["elderly_female"]) > max(f0["young_male"],
                                                                 f0["elderly_male"])
    assert f0["young_female"] > f0["elderly_female"] and f0["young_male"] > f0["elderly_male"]
    with pytest.raises(ConfigError, match="unknown voice profile"):
        voices.synthesise(TEXT, "child", 16000)


def test_mix_hits_the_requested_snr() -> None:
    t = np.arange(16000) / 16000
    speech = (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
    noise = (0.05 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)  # loops seamlessly
    for snr in (-10, 0, 10):
        mix = mix_at_snr(speech, noise, snr, 16000, np.random.default_rng(1))
        assert len(mix) == 16000 + 16000  # 0.5 s of background either side
        # the background alone is in the pads; its level there gives the mixing gain
        bg = np.concatenate([mix[:8000], mix[-8000:]])
        speech_part = mix[8000:24000]
        p_bg = np.mean(bg.astype(np.float64) ** 2)
        p_speech = np.mean(speech_part.astype(np.float64) ** 2) - p_bg
        assert 10 * np.log10(p_speech / p_bg) == pytest.approx(snr, abs=0.2)
        assert rms_dbfs(mix) == pytest.approx(-26.0, abs=0.1)


def test_loop_to_crossfades_to_length() -> None:
    x = np.ones(1000, np.float32)
    y = loop_to(x, 3500, 16000)
    assert len(y) == 3500 and np.allclose(y, 1.0, atol=1e-6)


def test_offline_library_covers_13_of_18_and_names_the_missing() -> None:
    entries = {e.env.code: e for e in library_entries(repo_library())}
    assert set(entries) == {e.code for e in ENVIRONMENTS}
    missing = sorted(c for c, e in entries.items() if not e.path)
    assert missing == ["OHALLWAY", "OMEETING", "OOFFICE", "PCAFETER", "SCAFE"]
    river = entries["NRIVER"]
    assert river.quality == "recording" and river.licence == "CC0" and river.attribution
    audio = load_background(river, 16000, 5.0)
    assert len(audio) == 80000 and rms_dbfs(audio) > -45


def test_demand_layout_is_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import soundfile as sf

    (tmp_path / "DKITCHEN").mkdir()
    sf.write(tmp_path / "DKITCHEN" / "ch01.wav", np.zeros(48000, np.float32) + 0.01, 48000)
    entries = {e.env.code: e for e in library_entries(demand=str(tmp_path))}
    assert entries["DKITCHEN"].source == "demand" and entries["DKITCHEN"].path
    assert not entries["TBUS"].path
    assert len(load_background(entries["DKITCHEN"], 16000, 10.0)) == 16000
