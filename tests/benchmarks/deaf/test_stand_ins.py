"""Stand-ins: the embedded (local/demo) profile falls back to the CPU references for the
paper's data sets (committed ESC sentences, WORLD-prosody ESC clips, the Debian background
library) and labels them; the cluster (``full``) profile reads DEMAND and EMIS from the data
volume and a data stage that would fall back fails its preflight instead — in a local
run's preflight and in the pod, where no run-wide preflight runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from madbench_common.benchmarks.deaf.graph import build_deaf_graph
from madbench_common.benchmarks.deaf.stages_stimuli import (
    EnvLibStage,
    EscStage,
    SentencesStage,
)
from madbench_common.cli import main
from madbench_common.core.errors import EXIT_DETERMINISTIC, EnvironmentMissing
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.preflight import check_run, stage_problems
from madbench_common.pipeline.stage import stage_params

_DATA = ("deaf_sentences", "deaf_envlib")


def _params(profile: str, stage: str, **over: Any) -> dict[str, Any]:
    graph = build_deaf_graph(("qwen2_audio",)).profiled(profile)
    return stage_params(graph[stage], over)


def test_cluster_profile_fails_preflight_instead_of_falling_back() -> None:
    """Cluster profile, no data volume here: /data/demand and /data/emis are missing; with
    the copies set to '' the stages would fall back to the stand-ins: refused too."""
    graph = build_deaf_graph(("qwen2_audio",)).profiled("full")
    with pytest.raises(EnvironmentMissing) as err:
        check_run([graph[s] for s in _DATA], {})
    text = str(err.value)
    assert "DEMAND folder /data/demand: not found" in text
    assert "EMIS copy /data/emis: no such folder" in text
    assert "argo submit workflows/data.yaml" in text
    params = {s: {"emis": ""} for s in ("deaf_sentences",)} | {"deaf_envlib": {"demand": ""}}
    with pytest.raises(EnvironmentMissing) as err:
        check_run([graph[s] for s in _DATA], params)
    text = str(err.value)
    assert "stage deaf_envlib: no DEMAND copy (demand='')" in text
    assert "embedded stand-in library" in text
    assert "stage deaf_sentences: no EMIS copy (emis='')" in text


def test_local_profile_still_uses_the_embedded_references() -> None:
    graph = build_deaf_graph(("qwen2_audio",))
    check_run([graph[s] for s in _DATA], {})  # nothing missing: the stand-ins are there
    assert EnvLibStage.preflight(_params("embedded", "deaf_envlib")) == []
    assert SentencesStage.preflight(_params("embedded", "deaf_sentences")) == []
    assert EscStage.preflight(_params("embedded", "esc_tts_a")) == []


def test_an_explicit_opt_in_allows_the_stand_ins_on_the_cluster() -> None:
    for stage, key in (("deaf_envlib", "demand"), ("deaf_sentences", "emis")):
        params = _params("full", stage, **{key: "", "stand_ins": "allow"})
        assert stage_problems(build_deaf_graph(("qwen2_audio",))[stage], params) == []
    bad = _params("full", "deaf_envlib", demand="", stand_ins="maybe")
    assert EnvLibStage.preflight(bad) == ["stand_ins='maybe': expected one of allow, refuse"]


def test_the_esc_slot_refuses_the_cpu_reference_but_takes_a_real_model(tmp_path: Path) -> None:
    """ESC on the cluster: EMIS's clips by default; without them, the emotional-TTS slot
    must hold a model that is not a CPU reference."""
    ref = _params("full", "esc_tts_b", emis="")
    (problem,) = EscStage.preflight(ref)
    assert "ref-deaf-emotion-b in the emotional-TTS slot is a CPU reference" in problem
    real = next(s.slug for s in REGISTRY.values() if not s.reference)
    assert EscStage.preflight({**ref, "model": real}) == []
    (tmp_path / "emis").mkdir()
    assert EscStage.preflight(_params("full", "esc_tts_b", emis=str(tmp_path / "emis"))) == []


def test_a_pod_on_the_cluster_profile_fails_instead_of_falling_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What deaf.yaml's deaf_envlib pod runs, without the data volume: exit 3, not the
    Debian library. The same pod on the embedded defaults builds the stand-in library,
    labelled as such in its rows."""
    store = str(tmp_path / "store")
    argv = ["deaf", "stage", "run", "--stage", "deaf_envlib", "--store", store,
            "--run-id", "r", "--models", "qwen2_audio"]
    code = main([*argv, "--param", "demand=/data/demand", "--param", "stand_ins=refuse"])
    assert code == EXIT_DETERMINISTIC
    err = capsys.readouterr().err
    assert "DEMAND folder /data/demand: not found" in err and "workflows/data.yaml" in err
    code = main([*argv, "--param", "demand=", "--param", "stand_ins=refuse"])
    assert code == EXIT_DETERMINISTIC
    assert "embedded stand-in library" in capsys.readouterr().err
    assert main(argv) == 0
    shards = sorted((tmp_path / "store" / "r" / "deaf_envlib").rglob("*.parquet"))
    rows = pq.read_table(shards[0]).to_pylist()
    assert rows and {r["source"] for r in rows} == {"debian"}


def test_the_report_labels_stand_ins() -> None:
    from madbench_common.benchmarks.deaf import report
    from madbench_common.benchmarks.deaf.rows import EnvRow

    row = EnvRow(code="TBUS", category="Transportation", name="bus", source="debian",
                 quality="recording")
    inp: Any = type("Inp", (), {"envlib": [row], "stimuli": []})()
    _, rows = report._env_table(inp)
    assert rows[0][3] == "debian (stand-in)"
    assert "stand-ins, not the paper's stimuli" in report._stimulus_note(inp)
