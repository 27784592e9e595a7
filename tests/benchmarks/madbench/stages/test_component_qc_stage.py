"""Component QC: verdict rules, WER, and which transcripts count as English."""

from __future__ import annotations

import dataclasses

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import ComponentRow
from madbench_common.benchmarks.madbench.stages.clips import length_fields
from madbench_common.benchmarks.madbench.stages.component_qc import (
    ComponentQCStage,
    english_like,
    qc_verdict,
    word_error_rate,
)
from madbench_common.pipeline.paramspec import build_params
from madbench_common.pipeline.stage import stage_params

P = build_params(ComponentQCStage.Params, stage_params(build_graph()["component_qc"], {}),
                 "component_qc")


def _row(**kw: object) -> ComponentRow:
    base: dict[str, object] = {"component_id": "c.x", "clip_id": "c", "component": "speech",
                               "branch": "tts_same", "duration_error": 0.0, "rms_dbfs": -25.0,
                               "clip_fraction": 0.0, "outside_energy_db": -120.0}
    return ComponentRow(**(base | kw))  # type: ignore[arg-type]


def test_wer_and_english_detection() -> None:
    assert word_error_rate("the cat sat", "the cat sat") == 0.0
    assert word_error_rate("the cat sat", "the dog sat down") == 2 / 3
    assert english_like("The speed dial entry you've accessed is empty")
    assert not english_like("La prueba del eco ha sido completada")
    assert not english_like("Эта услуга недоступна")


def test_each_failure_reason() -> None:
    assert qc_verdict(_row(sim_source=0.9), P) == ()
    assert "duration_mismatch" in qc_verdict(_row(duration_error=0.5), P)
    assert "silent" in qc_verdict(_row(rms_dbfs=-90.0), P)
    assert "clipping" in qc_verdict(_row(clip_fraction=0.1), P)
    assert "speech_outside_regions" in qc_verdict(_row(outside_energy_db=-3.0), P)
    assert "speaker_changed" in qc_verdict(_row(sim_source=0.1), P)
    assert "not_moved_to_target" in qc_verdict(
        _row(branch="vc", sim_source=0.9, sim_target=0.5), P)
    assert qc_verdict(_row(branch="vc", sim_source=0.5, sim_target=0.9), P) == ()
    env = _row(component="env", branch="t2a", speech_leakage=0.9)
    assert qc_verdict(env, P) == ("speech_leakage",)


def test_wer_gates_only_against_english_transcripts() -> None:
    gated = _row(sim_source=0.9, wer=1.0, wer_reference="transcript")
    diag = _row(sim_source=0.9, wer=None, wer_reference="unsupported_language")
    assert "transcript_not_preserved" in qc_verdict(gated, P)
    assert qc_verdict(diag, P) == ()


def test_env_checks_as_the_paper_states_them() -> None:
    """§3.4: "detectable speech or music content" are checks (speech by VAD and ASR, music
    by the tagger at 0.5), valid mismatch pairing filter; AST *event* tags and CLAP are
    diagnostics ("AST-based event checks and CLAP-style audio-prompt matching scores
    serve as diagnostic signals"), the ASR runs on every paradigm."""
    assert P.env_asr_branches == ["t2a", "v2a", "a2a"] and P.music_filter is True
    assert P.max_music_prob == 0.5
    env = {"component": "env", "branch": "t2a", "scene_label": "forest"}
    assert qc_verdict(_row(**env, speech_leakage=0.0, asr_speech=False,
                           music_prob=0.1), P) == ()
    assert qc_verdict(_row(**env, speech_leakage=0.05), P) == ("speech_leakage",)
    assert qc_verdict(_row(**env, asr_speech=True), P) == ("asr_speech_leakage",)
    # a high recall alone is a diagnostic now: the detection rule decides
    assert qc_verdict(_row(**env, asr_leak_recall=0.6, asr_speech=False), P) == ()
    # music is a filter by default (0.5 is the tagger's decision threshold: 0.5 fails,
    # 0.49 passes); music_filter=false keeps it as a diagnostic
    assert qc_verdict(_row(**env, music_prob=0.8), P) == ("music",)
    assert qc_verdict(_row(**env, music_prob=0.5), P) == ("music",)
    assert qc_verdict(_row(**env, music_prob=0.49), P) == ()
    assert qc_verdict(_row(**env, music_prob=0.8), dataclasses.replace(P, music_filter=False)) == ()
    # diagnostics never fail a component, however poor
    assert qc_verdict(_row(**env, prompt_match=-1.0, events=("Music",),
                           event_probs=(0.4,)), P) == ()
    # a mismatched prompt must come from an incompatible scene of the clip's label
    assert qc_verdict(_row(**env, scene_match=False, prompt_label="kitchen"), P) == ()
    assert qc_verdict(_row(**env, scene_match=False, prompt_label="beach"), P) == (
        "invalid_mismatch",)


def test_length_fix_up_is_bounded() -> None:
    """§3.3 "generation duration": 8.0 s of speech stretched to 10.0 s is a correction of
    1.25 (> 1.15): rejected; 9.0 → 10.0 s (1.111) and 10.0 → 9.0 s (0.9) pass; an env
    loop of a 10 s canvas onto 12 s (1.2) fails, onto 11 s (1.1) passes. The fitted
    track's own length (duration_error 0) cannot hide it."""
    assert P.max_length_correction == 0.15
    ok = {"sim_source": 0.9, "duration_error": 0.0}
    assert qc_verdict(_row(**ok, length_correction=10.0 / 8.0), P) == (
        "length_correction_exceeded",)
    assert qc_verdict(_row(**ok, length_correction=10.0 / 9.0), P) == ()
    assert qc_verdict(_row(**ok, length_correction=9.0 / 10.0), P) == ()
    assert qc_verdict(_row(**ok, length_correction=0.8), P) == ("length_correction_exceeded",)
    assert qc_verdict(_row(**ok, length_correction=None), P) == ()  # not reported
    env = {"component": "env", "branch": "v2a", "scene_label": "forest"}
    assert qc_verdict(_row(**env, length_correction=1.2), P) == ("length_correction_exceeded",)
    assert qc_verdict(_row(**env, length_correction=1.1), P) == ()


def test_env_length_fields_from_the_adapters_fit() -> None:
    """A loop of 10 s onto 12 s is a 1.2 fix-up; trim and exact are none; speech reports
    its own correction."""
    assert length_fields({"fit": "loop", "native_seconds": 10.0}, 12.0) == {
        "length_correction": 1.2}
    assert length_fields({"fit": "pad", "native_seconds": 9.96}, 10.0)["length_correction"] \
        == round(10.0 / 9.96, 6)
    assert length_fields({"fit": "trim", "native_seconds": 10.0}, 6.0) == {
        "length_correction": 1.0}
    assert length_fields({"duration_control": "time_stretch", "length_correction": 1.3},
                         5.0) == {"duration_control": "time_stretch", "length_correction": 1.3}
    assert length_fields({}, 5.0) == {}
