"""``madbench run|status|report|stage --pipeline NAME``: one command surface for every
benchmark of the pipelines table."""

from __future__ import annotations

from pathlib import Path

import pytest

from madbench_common.cli import main, pipeline_argv
from madbench_common.core.errors import ConfigError


def test_the_option_resolves_to_the_pipelines_own_commands() -> None:
    store = ["--store", "s", "--run-id", "r"]
    assert pipeline_argv(["status", "--pipeline", "deaf", *store]) == ["deaf", "status", *store]
    assert pipeline_argv(["report", *store, "--pipeline=deaf"]) == ["deaf", "report", *store]
    assert pipeline_argv(["stage", "run", "--pipeline", "deaf", "--stage", "x"]) == \
        ["deaf", "stage", "run", "--stage", "x"]
    assert pipeline_argv(["run", "--pipeline", "madbench", *store]) == ["run", *store]
    assert pipeline_argv(["run", *store]) == ["run", *store]  # MADBench by default
    assert pipeline_argv(["plan", "--pipeline", "deaf"]) == ["plan", "--pipeline", "deaf"]


def test_an_unknown_pipeline_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown pipeline 'deff'; known: madbench, deaf"):
        pipeline_argv(["status", "--pipeline", "deff"])
    with pytest.raises(ConfigError, match="--pipeline needs a name"):
        pipeline_argv(["status", "--store", "s", "--pipeline"])


def test_status_of_a_deaf_run_through_the_option(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = ["--store", str(tmp_path / "store"), "--run-id", "r", "--models", "qwen2_audio"]
    assert main(["deaf", "status", *store]) == 0
    direct = capsys.readouterr().out
    assert main(["status", "--pipeline", "deaf", *store]) == 0
    assert capsys.readouterr().out == direct
    assert "deaf_trials" in direct and "answer_qwen2_audio" in direct
    assert main(["status", *store[:4]]) == 0  # MADBench's graph on the same empty run
    assert "source_qc" in capsys.readouterr().out


def test_a_bad_name_exits_with_the_configuration_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--pipeline", "nope", "--store", "s", "--run-id", "r"]) == 3
    assert "unknown pipeline 'nope'" in capsys.readouterr().err
