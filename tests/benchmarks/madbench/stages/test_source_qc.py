"""Source QC as the paper states it (§3.2): English, no speech in ê by VAD and ASR, no music."""

from __future__ import annotations

import numpy as np

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.stages.source_qc import (
    SourceQCStage,
    asr_detects_speech,
    content_words,
    eligibility,
    env_checks,
    recovered_words,
    word_recall,
)
from madbench_common.models.reference.separator import consistent_mask
from madbench_common.models.reference.tagger import TonalMusicTagger, sustained_tone_share
from madbench_common.models.roles import Transcript
from madbench_common.pipeline.paramspec import build_params, params_dict
from madbench_common.pipeline.stage import stage_params

PARAMS = build_params(SourceQCStage.Params, stage_params(build_graph()["source_qc"], {}),
                      "source_qc")
OK = {"speech_coverage": 0.6, "asr_coverage": None, "transcript": "hello world",
      "env_leakage": 0.0, "env_rms_dbfs": -40.0, "clip_fraction": 0.0}


def test_any_vad_speech_in_the_residual_fails() -> None:
    """The paper reports no speech in any residual; 35 % used to pass."""
    assert eligibility(OK, PARAMS) == ()
    assert eligibility(OK | {"env_leakage": 0.02}, PARAMS) == ("speech_leakage_in_env",)
    assert eligibility(OK | {"env_rms_dbfs": -70.0}, PARAMS) == ("low_env_energy",)


def test_language_asr_leakage_and_music_checks() -> None:
    assert env_checks({"language": "en", "language_prob": 0.9, "env_asr_speech": False,
                       "music_prob": 0.1, "speech_music_prob": 0.2}, PARAMS) == ()
    assert env_checks({"language": "de", "language_prob": 0.9}, PARAMS) == ("not_english",)
    assert env_checks({"language": ""}, PARAMS) == ()  # ASR without language id: not applied
    assert env_checks({"env_asr_speech": True}, PARAMS) == ("asr_speech_in_env",)
    assert env_checks({"music_prob": 0.7}, PARAMS) == ("music_or_media",)
    # music the separator moved into ŝ is music in the clip too
    assert env_checks({"music_prob": 0.1, "speech_music_prob": 0.7}, PARAMS) == (
        "music_or_media",)


def test_word_recall_by_hand() -> None:
    # content words: please, enter, password (3); "a" short, "the"/"your" function words
    assert content_words("please enter a the your password") == ["please", "enter", "password"]
    assert word_recall("please enter a the your password", "enter your password now") == 2 / 3
    assert recovered_words("please enter a the your password", "enter your password now") == 2
    assert word_recall("please enter your password", "and the you") == 0.0
    assert word_recall("", "anything") == 0.0


def _heard(text: str, no_speech: float | None, avg_logprob: float | None = None) -> Transcript:
    return Transcript(text=text, coverage=0.5, no_speech_prob=no_speech,
                      avg_logprob=avg_logprob)


def test_asr_detection_with_a_no_speech_signal() -> None:
    """Whisper-like ASR: openai-whisper's rule (transcribe.py: silent when no_speech_prob >
    0.6 unless avg_logprob > -1.0), and 2+ content words."""
    assert PARAMS.no_speech_threshold == 0.6 and PARAMS.min_content_words == 2
    assert PARAMS.logprob_threshold == -1.0
    ref = "please enter your password"  # unused when the ASR has its own signal
    assert asr_detects_speech(_heard("the market opens at nine today", 0.1), ref, PARAMS)
    # a hallucination Whisper itself flags as no speech
    assert not asr_detects_speech(_heard("thank you for watching", 0.9), ref, PARAMS)
    # confident, but one content word ("thank") is not speech content
    assert not asr_detects_speech(_heard("thank you", 0.2), ref, PARAMS)
    # openai-whisper skips only when no_speech_prob is *above* 0.6: 0.6 itself is speech
    assert asr_detects_speech(_heard("market opens today", 0.6), ref, PARAMS)
    # above 0.6 but the decoder was confident (avg_logprob > -1): whisper keeps the words
    assert asr_detects_speech(_heard("market opens today", 0.8, -0.4), ref, PARAMS)
    # above 0.6 and unsure (avg_logprob <= -1): silent
    assert not asr_detects_speech(_heard("market opens today", 0.8, -1.0), ref, PARAMS)
    assert not asr_detects_speech(_heard("market opens today", 0.8, -2.5), ref, PARAMS)


def test_asr_detection_without_a_no_speech_signal_needs_the_clips_own_words() -> None:
    """PocketSphinx-like ASR (no signal): its words on ambience are not speech; two of
    the clip's content words heard again in order are."""
    ref = "that number is not valid please try again"  # content: number valid please try again
    assert not asr_detects_speech(_heard("unhinged and leaves get used", None), ref, PARAMS)
    assert not asr_detects_speech(_heard("the number and it", None), ref, PARAMS)  # one word
    assert asr_detects_speech(_heard("a number was valid", None), ref, PARAMS)
    assert not asr_detects_speech(_heard("valid number", None), ref, PARAMS)  # out of order


def test_music_tagger_separates_a_melody_from_noise_and_hum() -> None:
    sr, rng = 16000, np.random.default_rng(0)
    notes = []
    for _ in range(16):
        t = np.arange(int(0.4 * sr)) / sr
        f0 = 220 * 2 ** (int(rng.integers(0, 12)) / 12)
        notes.append(sum(np.sin(2 * np.pi * f0 * h * t) / h for h in range(1, 6))
                     * np.exp(-2 * t))
    melody = (0.1 * np.concatenate(notes)).astype(np.float32)
    noise = (0.1 * rng.standard_normal(6 * sr)).astype(np.float32)
    hum = (0.1 * np.sin(2 * np.pi * 100 * np.arange(6 * sr) / sr)).astype(np.float32)
    tagger = TonalMusicTagger()
    assert tagger.tag(melody, sr)["Music"] > 0.9
    n = min(len(melody), len(noise))
    assert tagger.tag(melody[:n] + noise[:n] * 0.3, sr)["Music"] > 0.5
    assert sustained_tone_share(noise, sr) == 0.0 and tagger.tag(hum, sr)["Music"] < 0.01


def test_consistent_mask_moves_speech_dominated_bins_to_the_speech_stem() -> None:
    """A DFN3-like estimate at half level leaves half the speech in ê; the mask does not."""
    sr, rng = 16000, np.random.default_rng(1)
    t = np.arange(2 * sr) / sr
    speech = (0.3 * np.sin(2 * np.pi * 200 * t) * (t < 1.0)).astype(np.float32)
    env = (0.003 * rng.standard_normal(len(t))).astype(np.float32)
    x = speech + env
    s_hat = consistent_mask(x, 0.5 * speech)
    residual = x - s_hat
    on = slice(int(0.2 * sr), int(0.8 * sr))
    leak = float(np.sqrt(np.mean((residual[on] - env[on]) ** 2)))
    assert leak < 0.01 * 0.3  # under −40 dB of the speech (was −6 dB: 0.5 × speech)
    assert np.allclose(s_hat + residual, x)


def test_the_asr_hears_the_whole_residual_not_only_the_speech_regions() -> None:
    """§3.2 "no speech in any environmental residual": speech leaking into ê outside the
    source speech regions must reach the ASR. A recording ASR shows what it is given:
    ŝ over the speech regions (its words, the reference), all of ê."""
    from types import SimpleNamespace

    from madbench_common.models.roles import Segment

    heard: list[np.ndarray] = []

    class RecordingASR:
        slug, version = "rec", "1"

        def transcribe(self, audio: np.ndarray, rate: int) -> Transcript:
            heard.append(np.asarray(audio).copy())
            return Transcript(text="", coverage=0.0)

    class NoMusic:
        def tag(self, audio: np.ndarray, rate: int) -> dict[str, float]:
            return {}

    rate = 16000
    speech = np.zeros(4 * rate, np.float32)
    env = np.zeros(4 * rate, np.float32)
    env[3 * rate:] = 0.5  # leakage in the last second, after the only speech region
    stage = SourceQCStage.__new__(SourceQCStage)
    stage.__dict__.update(asr=RecordingASR(), tagger=NoMusic(),
                          ctx=SimpleNamespace(params=params_dict(PARAMS)), p=PARAMS)
    stage._env_scores(speech, env, rate, [Segment(0.0, 1.0)])
    assert len(heard) == 2
    assert len(heard[1]) == len(env) and np.array_equal(heard[1], env)
