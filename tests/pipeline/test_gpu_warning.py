"""The embedded backend warns about a GPU only where the model a stage runs needs one:
the demo used to print "requests 1 GPU(s); the embedded backend runs it on
the CPU" for each of its 12 generator stages, whose CPU references never use a GPU."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.preflight import gpu_models


def _warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture,
              params: dict[str, dict[str, Any]]) -> list[str]:
    runner = LocalRunner(build_graph, RunOptions(store=str(tmp_path), run_id="r",
                                                 params=params))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="madbench"):
        for stage in runner.graph:
            runner._warn_unsupported(stage)
    return [r.getMessage() for r in caplog.records if "embedded backend" in r.getMessage()]


def test_cpu_references_never_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert [s.name for s in build_graph() if s.gpu]  # stages whose paper models want one
    assert _warnings(tmp_path, caplog, {}) == []


def test_a_gpu_model_swapped_in_warns_once_naming_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    got = _warnings(tmp_path, caplog, {"separate": {"model": "separator-mossformer2"},
                                       "source_qc": {"asr": "qc-whisper"}})
    assert got == [
        "separate: separator-mossformer2 needs a GPU; the embedded backend runs it on the CPU",
        "source_qc: qc-whisper needs a GPU; the embedded backend runs it on the CPU"]


def test_gpu_models_follow_the_profile() -> None:
    full = build_graph().profiled("full")
    assert gpu_models(full["speech_tts_same_a"], {}) == ["tts-f5-same"]
    assert gpu_models(full["split"], {}) == ["qc-ecapa"]
    assert gpu_models(full["pairing"], {}) == []
    assert all(gpu_models(s, {}) == [] for s in build_graph())
