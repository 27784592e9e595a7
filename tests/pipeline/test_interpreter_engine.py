"""madbench run --python STAGE=PATH: a stage's shards and merge under another interpreter."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import SampleRow
from madbench_common.cli import main
from madbench_common.core.errors import ConfigError
from madbench_common.core.manifest import write_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.pipeline.interpreter import InterpreterEngine, parse_interpreters
from madbench_common.pipeline.repair import stage_done
from madbench_common.pipeline.stage import make_context

STAGE = "omni_qwen25omni"


def _assemble(run: RunStore, rows: tuple[SampleRow, ...] = ()) -> None:
    info = run.put_bytes("assemble/manifest.parquet", write_manifest_bytes(SampleRow, rows))
    run.put_bytes("assemble/_SUCCESS", json.dumps(
        {"stage": "assemble", "fingerprint": "x", "manifest_sha256": info.sha256}).encode())


def test_shards_and_merge_run_under_the_interpreter(tmp_path: Path) -> None:
    run = RunStore(FileStore(str(tmp_path)), "r")
    _assemble(run)
    engine = InterpreterEngine(sys.executable, str(tmp_path), "r", workers=2)
    stage = build_graph()[STAGE]
    ticks: list[int] = []
    results = engine.run_shards(stage, {}, 0, 2, lambda: ticks.append(1))
    assert [r.shard for r in results] == [0, 1] and len(ticks) == 2
    marker = engine.merge(stage, {}, 0, 2)
    image = engine.image_ref(stage)
    assert marker["image"] == image == f"venv:{Path(sys.executable).absolute().parents[1].name}"
    assert marker["rows"] == 0  # no model in the embedded profile: nothing planned
    assert stage_done(make_context(run, build_graph(), STAGE, {}, image, 0))


def test_a_configuration_error_in_the_child_is_one_here(tmp_path: Path) -> None:
    run = RunStore(FileStore(str(tmp_path)), "r")
    _assemble(run, (SampleRow(sample_id="s", clip_id="c", variant="R", split="test"),))
    engine = InterpreterEngine(sys.executable, str(tmp_path), "r")
    with pytest.raises(ConfigError, match="exited 3"):
        engine.run_shards(build_graph()[STAGE], {"model": "no-such-model"}, 0, 1, lambda: None)


def test_bad_python_options_fail_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="STAGE=PATH"):
        parse_interpreters(["omni_qwen25omni"])
    with pytest.raises(ConfigError, match="not an executable"):
        parse_interpreters([f"omni_qwen25omni={tmp_path / 'python'}"])
    assert main(["run", "--store", str(tmp_path), "--run-id", "r", "--no-progress",
                 "--python", f"no_such_stage={sys.executable}"]) == 3
