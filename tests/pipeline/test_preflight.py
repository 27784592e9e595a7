"""Fail fast: before the first stage, every missing key, weight, tool,
module and image of the chosen models is listed in one error (exit 3), and nothing runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from madbench_common.benchmarks.deaf.graph import build_deaf_graph
from madbench_common.benchmarks.deaf.stages_eval import JudgeStage
from madbench_common.cli import main
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.local import RunOptions
from madbench_common.pipeline.preflight import Where, check_run, pending_stages
from madbench_common.pipeline.stage import read_marker, stage_params

_KEYS = ("GEMINI_API_KEY", "OPENAI_API_KEY", "JUDGE_API_KEY", "ELEVENLABS_API_KEY",
         "AZURE_SPEECH_KEY")


def _no_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in _KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path / "weights"))


def test_deaf_run_with_default_models_and_no_keys_stops_before_any_stage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The reported case: the default seven models and no keys used to build stimuli for
    17 minutes, then stop on GEMINI_API_KEY. Now one message names every key and every
    open model's weights, and no stage starts."""
    _no_keys(monkeypatch, tmp_path)
    store = str(tmp_path / "store")
    start = time.perf_counter()
    assert main(["deaf", "run", "--store", store, "--run-id", "t", "--no-progress"]) == 3
    assert time.perf_counter() - start < 120
    err = capsys.readouterr().err
    assert err.count("cannot start the run") == 1
    for need in ("$GEMINI_API_KEY", "$OPENAI_API_KEY", "$JUDGE_API_KEY",
                 "Qwen/Qwen2-Audio-7B-Instruct", "nvidia/audio-flamingo-3-hf",
                 "Qwen/Qwen3-Omni-30B-A3B-Instruct", "tsinghua-ee/SALMONN",
                 "--judge-mode rule"):
        assert need in err, need
    run = RunStore(open_store(store), "t")
    assert read_marker(run, "deaf_sentences") is None and not run.list("deaf_sentences")


def test_madbench_run_lists_missing_tools_and_weights(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demo_sources: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """MADBench's graph: the reference TTS stages need flite and espeak-ng; a real model
    swapped in needs its image's weights. All are named at once; nothing runs."""
    _no_keys(monkeypatch, tmp_path)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    store = str(tmp_path / "store")
    code = main(["run", "--store", store, "--run-id", "t", "--sources", str(demo_sources),
                 "--no-progress", "--set", "separate.model=separator-mossformer2"])
    err = capsys.readouterr().err
    assert code == 3
    assert "tool 'flite' not found on PATH" in err and "tool 'espeak-ng' not found" in err
    assert "stage separate (separator-mossformer2): model weights missing" in err
    assert read_marker(RunStore(open_store(store), "t"), "ingest") is None


def test_done_stages_are_not_checked_again(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed run checks only what is still to run: once the stimuli are done, their
    tools are not asked for again; the judge's key still is."""
    store = str(tmp_path / "store")
    csv = tmp_path / "s.csv"
    csv.write_text("sentence_id,conflict,subdim,condition,label,text\n"
                   "e1,esc,,explicit,happy,I am so happy that you came.\n")
    _no_keys(monkeypatch, tmp_path)
    assert main(["deaf", "run", "--store", store, "--run-id", "t", "--no-progress",
                 "--sentences", str(csv), "--until", "deaf_sentences"]) == 0
    graph = build_deaf_graph(("qwen2_audio",))
    run = RunStore(open_store(store), "t")
    params = {"deaf_sentences": {"sentences": str(csv)}}
    pending = [s.name for s in pending_stages(run, graph, None, params, lambda s: "embedded",
                                              RunOptions(store, "t").seed)]
    assert "deaf_sentences" not in pending and "esc_tts_a" in pending
    monkeypatch.setenv("PATH", str(tmp_path))  # no flite, no espeak-ng
    stages = [graph[n] for n in pending if n in ("deaf_judge",)]
    with pytest.raises(Exception, match=r"\$JUDGE_API_KEY") as info:
        check_run(stages, params)
    assert "flite" not in str(info.value)


def test_judge_needs_its_key_unless_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    default = stage_params(build_deaf_graph(("qwen2_audio",))["deaf_judge"], {})
    monkeypatch.delenv("JUDGE_API_KEY", raising=False)
    assert len(JudgeStage.preflight(default)) == 1
    assert JudgeStage.preflight({**default, "mode": "rule"}) == []  # offline keyword rules
    monkeypatch.setenv("JUDGE_API_KEY", "k")
    assert JudgeStage.preflight(default) == []
    assert JudgeStage.preflight({**default, "mode": "llm", "judge_base_url": ""})
    assert JudgeStage.preflight({**default, "mode": "llm", "judge_base_url": "http://h/v1",
                                 "judge_key_env": ""}) == []  # a local vLLM, no key


@pytest.mark.needs_tools("buildah", root=True)
def test_missing_images_are_listed_with_a_container_engine(tmp_path: Path) -> None:
    """With an engine, a stage whose image is not built is named (before any stage)."""
    from madbench_common.pipeline.container import ContainerEngine

    engine = ContainerEngine.create("buildah", str(tmp_path / "store"), "t",
                                    image="localhost/madbench/not-built:0")
    graph = build_deaf_graph(("qwen2_audio",))
    stage = graph["deaf_sentences"]
    with pytest.raises(Exception, match="localhost/madbench/not-built:0 is not built") as info:
        check_run([stage], {}, lambda s: Where(container=True), images=engine.image_ref)
    assert info.value.exit_code == 3  # type: ignore[attr-defined]
