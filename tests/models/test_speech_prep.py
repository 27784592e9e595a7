"""Shared speech-generator pre/post-processing on real demo speech (main venv and images)."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.stages.clips import length_fields
from madbench_common.media.audio import resample
from madbench_common.models.speech_prep import (
    GenerationFailed,
    check_text,
    fit_speech,
    guard_oom,
    prepare_reference,
    seed_all,
)

from .speech_cases import RATE, assert_placed, demo_case, place


def test_check_text_collapses_whitespace_and_names_failures() -> None:
    assert check_text("  Hello,\n  world. ") == "Hello, world."
    with pytest.raises(GenerationFailed, match="empty_text: ref_text is empty") as err:
        check_text(" \t", what="ref_text")
    assert err.value.why == "empty_text"
    latin = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    assert check_text("It's 5 — fine!", supported=latin.__contains__) == "It's 5 — fine!"
    with pytest.raises(GenerationFailed, match=r"unsupported_characters: text has .*: Пвеирт"):
        check_text("При вет", supported=latin.__contains__)


def test_prepare_reference_trims_and_refuses_short_speech() -> None:
    case = demo_case("demo_002")
    padded = np.concatenate([np.zeros(RATE, np.float32), case.active, np.zeros(RATE, np.float32)])
    ref = prepare_reference(padded, RATE, min_seconds=1.0)
    assert len(case.active) - RATE // 10 <= len(ref) <= len(case.active) + RATE // 50
    with pytest.raises(GenerationFailed, match=r"reference_too_short: 0\.50 s"):
        prepare_reference(np.concatenate([np.zeros(RATE, np.float32), case.active[:RATE // 2]]),
                          RATE, min_seconds=1.0)
    with pytest.raises(GenerationFailed, match="source_too_short"):
        prepare_reference(np.zeros(RATE, np.float32), RATE, min_seconds=0.5, what="source")


@pytest.mark.parametrize("model_rate", [22050, 24000, 16000])
def test_fit_speech_resamples_trims_and_stretches_to_the_exact_length(model_rate: int) -> None:
    case = demo_case("demo_002")
    speech = resample(case.active, RATE, model_rate)
    padded = np.concatenate([np.zeros(model_rate // 2, np.float32), speech,
                             np.zeros(model_rate // 3, np.float32)])
    out, report = fit_speech(padded, model_rate, sample_rate=RATE, duration=case.duration * 1.2,
                             duration_control="time_stretch", settings={"seed": 3})
    assert out.dtype == np.float32 and len(out) == round(case.duration * 1.2 * RATE)
    assert report.raw_seconds == pytest.approx(case.duration, abs=0.06)
    assert report.length_correction == pytest.approx(1.2, abs=0.03)
    assert report.as_settings() == {
        "model_rate": model_rate, "seed": 3, "raw_seconds": round(report.raw_seconds, 4),
        "duration_control": "time_stretch",
        "length_correction": round(report.length_correction, 6)}
    assert_placed(place(out, case), case)


def test_fit_speech_refuses_silence() -> None:
    with pytest.raises(GenerationFailed, match="empty_output"):
        fit_speech(np.zeros(24000, np.float32), 24000, sample_rate=RATE, duration=1.0,
                   duration_control="time_stretch")


def test_seed_all_makes_torch_and_numpy_repeat() -> None:
    torch = pytest.importorskip("torch")
    seed_all(11)
    a = (torch.randn(4), np.random.rand(3))
    seed_all(11)
    b = (torch.randn(4), np.random.rand(3))
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_guard_oom_turns_cuda_oom_into_a_component_failure() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(GenerationFailed, match="out_of_memory: CUDA out of memory"), guard_oom():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB\nmore")
    with pytest.raises(ValueError, match="other"), guard_oom():
        raise ValueError("other")


def test_stage_copies_the_generator_report_onto_the_row() -> None:
    from madbench_common.models.speech_prep import ReportingGenerator

    case = demo_case("demo_002")
    gen = ReportingGenerator()
    assert gen.last_settings == {} and length_fields(gen.last_settings, case.duration) == {}
    _, gen.last_report = fit_speech(case.active, RATE, sample_rate=RATE, duration=case.duration,
                                    duration_control="model:fix_duration")
    fields = length_fields(gen.last_settings, case.duration)
    assert fields["duration_control"] == "model:fix_duration"
    assert fields["length_correction"] == pytest.approx(1.0, abs=0.02)
    assert length_fields({"steps": 50}, 1.0) == {}
