"""The DEAF graph end to end on a tiny sentence set: stimuli, stubbed API models, judges,
metrics and report; a rerun skips every stage and the answers come from the cache."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from madbench_common.benchmarks.deaf.graph import PAPER_MODELS, build_deaf_graph
from madbench_common.benchmarks.deaf.rows import (
    AnswerRow,
    MetricRow,
    ReportRow,
    StimulusRow,
    TrialRow,
    VerdictRow,
)
from madbench_common.cli import main
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.stage import read_marker, stage_params

SENTENCES = """sentence_id,conflict,subdim,condition,label,text
e1,esc,,explicit,happy,I am so happy that you came to see me.
e2,esc,,neutral,neutral,The bus stops in front of the post office.
b1,bsc,,explicit,DKITCHEN,I'm in the kitchen chopping onions for dinner.
b2,bsc,,implicit,STRAFFIC,The cars are honking because the light turned green.
b3,bsc,,neutral,neutral,Let me know which option you prefer.
s1,sic,gender,explicit,female,As a mother of three my mornings are always busy.
s2,sic,neutral,neutral,neutral,The package arrived this morning.
"""


def _rows(run: RunStore, stage: str, kind: type) -> list:  # type: ignore[type-arg]
    marker = read_marker(run, stage)
    assert marker is not None, stage
    return read_manifest_bytes(kind, run.get_bytes(f"{stage}/manifest.parquet"))


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sentences CSV and a store whose run ``t`` is done up to ``deaf_trials`` (the
    stimuli: TTS and mixing, most of a tiny run's time), made once; each test works on its
    own copy of the store."""
    tmp = tmp_path_factory.mktemp("deaf-trials")
    csv = tmp / "sentences.csv"
    csv.write_text(SENTENCES)
    assert main(["deaf", "run", "--store", str(tmp / "store"), "--run-id", "t", "--models",
                 "gemini_25_flash,gpt_4o_audio", "--sentences", str(csv), "--snrs", "0",
                 "--no-progress", "--until", "deaf_trials"]) == 0
    return csv, tmp / "store"


def _copy(trials: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    shutil.copytree(trials[1], tmp_path / "store")
    return trials[0], tmp_path / "store"


@pytest.mark.slow
def test_deaf_run_end_to_end(trials: tuple[Path, Path], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    csv, _ = _copy(trials, tmp_path)
    argv = ["deaf", "run", "--store", str(tmp_path / "store"), "--run-id", "t",
            "--models", "gemini_25_flash,gpt_4o_audio", "--sentences", str(csv),
            "--snrs", "0", "--repeats", "2", "--stub-apis", "--no-progress",
            "--set", "deaf_metrics.n_boot=200"]
    assert main(argv) == 0
    run = RunStore(open_store(str(tmp_path / "store")), "t")

    clips = [r for s in ("esc_tts_a", "esc_tts_b", "esc_tts_c", "bsc_mix", "sic_tts")
             for r in _rows(run, s, StimulusRow)]
    assert sum(c.conflict == "esc" for c in clips) == 2 * 4 * 3
    assert sum(c.conflict == "sic" for c in clips) == 2 + 4
    missing = [c for c in clips if not c.ok]
    assert missing and {c.reason for c in missing} == {"environment_missing"}  # SCAFE
    assert all(c.reference for c in clips if c.ok)

    trials = _rows(run, "deaf_trials", TrialRow)
    ok = [t for t in trials if t.ok]
    queries = {t.test_query for t in ok} | {t.control_query for t in ok if t.control_query}
    answers = _rows(run, "answer_gemini_25_flash", AnswerRow)
    assert len(answers) == 2 * len(queries) and all(a.ok and a.text for a in answers)
    assert answers[0].model_version == "gemini-2.5-flash@env:MADBENCH_API_STUB+thinking:-1"

    verdicts = _rows(run, "deaf_judge", VerdictRow)
    # the paper's protocol: the LLM judge labels every answer (the stub's judge says O)
    assert {v.judge for v in verdicts} == {"llm:stub-judge"}
    assert {v.label for v in verdicts} == {"O"}
    # b3 (neutral) is over TMETRO, OMEETING (not in the offline library) and PSTATION: no
    # paper L2 trial survives (A.3 has claims for Street/Nature/Office only); the L2x
    # trials have same-sentence controls, and PSTATION's Within claim (PCAFETER, not in
    # the library) has none, so it is not built and is counted
    bsc_l2 = [t for t in ok if t.level in ("L2", "L2x") and t.conflict == "bsc"]
    assert {(t.level, t.subdim, t.claim) for t in bsc_l2} == {
        ("L2x", "within", "TBUS"), ("L2x", "cross", "NRIVER"), ("L2x", "cross", "DWASHING")}
    assert all(t.control_stimulus.startswith("bsc-b3-") for t in bsc_l2)
    assert [(t.level, t.claim, t.reason) for t in trials if not t.ok] == [
        ("L2x", "PCAFETER", "control_missing")]

    metrics = {(m.model, m.conflict, m.level, m.group, m.metric): m
               for m in _rows(run, "deaf_metrics", MetricRow)}
    assert metrics[("answer_gemini_25_flash", "bsc", "L2x", "control_missing",
                    "not_built")].value == 1
    esc_l2 = metrics[("answer_gemini_25_flash", "esc", "L2", "all", "other")]
    assert esc_l2.value == 1.0 and esc_l2.repeats == 2
    report = {r.name: r for r in _rows(run, "deaf_report", ReportRow)}
    assert set(report) == {"report.md", "report.json", "report.html", "radar.png", "radar.svg"}
    png = run.get_bytes(run.key_of(report["radar.png"].uri), report["radar.png"].sha256)
    assert png.startswith(b"\x89PNG")
    md = run.get_bytes(run.key_of(report["report.md"].uri)).decode()
    assert "local stub server: not the model's answers" in md and "Table 5" in md
    assert "| answer_gemini_25_flash | stub-judge | 100.0 | 0.0 | 0.0 | 0.0 |" in md
    assert f"| answer_gemini_25_flash | {len(answers)} | 0 | 0.0 | 0 |" in md  # no empty
    assert json.loads(run.get_bytes(run.key_of(report["report.json"].uri)))["metrics"]
    out = capsys.readouterr().out
    assert "Table 3: Acoustic Robustness Score" in out
    assert "paper §3.5" not in out  # MADBench's Table 1 is not DEAF's

    assert main(argv) == 0  # rerun (a new stub port): every stage is skipped
    log = sorted(run.list("_logs"))[-1]
    assert all(s["skipped"] for s in json.loads(run.get_bytes(log))["stages"])


def test_graph_declares_the_paper_models_and_secrets() -> None:
    graph = build_deaf_graph()
    answer = [s for s in graph if s.name.startswith("answer_")]
    assert [s.model for s in answer] == [m.slug for m in PAPER_MODELS]
    assert graph["answer_gemini_25_flash"].secrets == ("GEMINI_API_KEY",)
    assert graph["answer_qwen2_audio"].in_profile("full").image == "deaf-tf5"
    assert graph["deaf_judge"].inputs == ("deaf_trials", *(s.name for s in answer))
    full = graph.profiled("full")
    assert stage_params(full["deaf_judge"], {})["judge_model_id"] == "deepseek/deepseek-r1"
    assert full["sic_tts"].model == "deaf-elevenlabs"
    custom = build_deaf_graph(("qwen2_audio", "mine=deaf-gemini-3-flash"))
    assert [s.name for s in custom if s.name.startswith("answer_")] == [
        "answer_qwen2_audio", "answer_mine"]


@pytest.mark.slow
def test_a_failed_answer_stage_leaves_judge_metrics_and_report_running(
        trials: tuple[Path, Path], tmp_path: Path) -> None:
    """What the pods of workflows/deaf.yaml do when one model's answer stage fails (exit 3:
    no API key): the judge, metrics and report run on the other model, and the report
    names the absent one. (tests/pipeline/test_argo_deaf.py checks that Argo schedules them.)"""
    from madbench_common.benchmarks.deaf.local_run import stub_apis
    from madbench_common.benchmarks.deaf.stage_report import ABSENT

    csv, copied = _copy(trials, tmp_path)
    store, models = str(copied), "gemini_25_flash,gpt_4o_audio"
    assert main(["deaf", "run", "--store", store, "--run-id", "t", "--models", models,
                 "--sentences", str(csv), "--snrs", "0", "--no-progress",
                 "--until", "deaf_trials"]) == 0

    def pods(stage: str, params: dict[str, object]) -> int:
        common = ["--stage", stage, "--store", store, "--run-id", "t", "--models", models,
                  "--params-json", json.dumps(params)]
        code = main(["deaf", "stage", "run", "--shard", "0", *common])
        return code or main(["deaf", "stage", "merge", *common])

    graph = build_deaf_graph(tuple(models.split(",")))
    params: dict[str, dict[str, object]] = {}
    with stub_apis(graph, params):
        os.environ.pop("OPENAI_API_KEY")  # GPT-4o cannot start (exit 3); restored on exit
        assert pods("answer_gpt_4o_audio", {**params["answer_gpt_4o_audio"], "repeats": 1}) == 3
        assert pods("answer_gemini_25_flash",
                    {**params["answer_gemini_25_flash"], "repeats": 1}) == 0
        assert pods("deaf_judge", params["deaf_judge"]) == 0
    assert pods("deaf_metrics", {"n_boot": 50}) == 0
    assert pods("deaf_report", {}) == 0

    run = RunStore(open_store(store), "t")
    assert read_marker(run, "answer_gpt_4o_audio") is None
    assert {v.model for v in _rows(run, "deaf_judge", VerdictRow)} == {"answer_gemini_25_flash"}
    assert {m.model for m in _rows(run, "deaf_metrics", MetricRow)} == {"answer_gemini_25_flash"}
    report = {r.name: r for r in _rows(run, "deaf_report", ReportRow)}
    md = run.get_bytes(run.key_of(report["report.md"].uri)).decode()
    assert "Absent models" in md and "answer_gpt_4o_audio (GPT-4o-Audio)" in md
    assert f"| answer_gpt_4o_audio | deaf-gpt-4o-audio |  | GPT-4o-Audio | {ABSENT} |" in md
    data = json.loads(run.get_bytes(run.key_of(report["report.json"].uri)))
    assert [m["stage"] for m in data["models"] if m["absent"]] == ["answer_gpt_4o_audio"]
