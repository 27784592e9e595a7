"""`madbench stage run/merge` (what Argo pods run): pod logs, verbatim parameters, and a
damaged shard found at merge time invalidated for the resubmission."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from madbench_common.cli import main
from madbench_common.core.store import FileStore, RunStore


def _stage(verb: str, store: Path, sources: Path, *extra: str) -> int:
    return main(["stage", verb, "--stage", "ingest", "--num-shards", "2", "--store",
                 str(store), "--run-id", "r", "--image", "img@sha256:" + "0" * 64,
                 "--param", f"sources={sources}", *extra])


def test_pods_log_time_memory_and_retries(demo_sources: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert _stage("run", store, demo_sources, "--shard", "0") == 0
    assert _stage("run", store, demo_sources, "--shard", "1") == 0
    assert _stage("merge", store, demo_sources) == 0
    run = RunStore(FileStore(store), "r")
    logs = [json.loads(run.get_bytes(k)) for k in run.list("_logs/stage/ingest")]
    assert sorted((r["verb"], r["shard"]) for r in logs) == [
        ("merge", None), ("run", 0), ("run", 1)]
    assert all(r["peak_rss"] > 0 and r["s3_retries"] == {} for r in logs)
    marker = json.loads(run.get_bytes("ingest/_SUCCESS"))
    assert marker["rows"] == 4 and marker["image"].startswith("img@sha256:")


def test_damaged_shard_at_merge_is_invalidated(demo_sources: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    _check_damaged_shard_resubmitted(
        lambda verb, *extra: _stage(verb, store, demo_sources, *extra), store, "ingest", capsys)


def _check_damaged_shard_resubmitted(stage: Callable[..., int], store: Path, name: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Both shards of ``name`` run (``stage(verb, *extra)``) into ``store``; a byte flipped in
    shard 1 fails the merge with exit 3 and drops that shard's marker, so resubmitting
    shard 1 redoes it and the merge then succeeds."""
    for shard in ("0", "1"):
        assert stage("run", "--shard", shard) == 0
    damaged = next((store / "r" / name).rglob("00001-of-00002.parquet"))
    with open(damaged, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\xff\xfe")
    assert stage("merge") == 3
    err = capsys.readouterr().err
    assert "sha256 mismatch" in err and "resubmit with the same run id" in err
    assert not damaged.with_name("00001-of-00002._SUCCESS").exists()
    assert stage("run", "--shard", "1") == 0  # the resubmission
    assert stage("merge") == 0


def _deaf_stage(verb: str, store: Path, sentences: Path, *extra: str) -> int:
    return main(["deaf", "stage", verb, "--stage", "deaf_sentences", "--num-shards", "2",
                 "--store", str(store), "--run-id", "r", "--param", f"sentences={sentences}",
                 *extra])


def test_deaf_pods_share_the_pod_path(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """DEAF's pods used to skip ``_pod_work``, so they wrote no ``_logs/stage`` record
    and a damaged shard failed every resubmission. They now go through the same path."""
    sentences = tmp_path / "s.csv"
    sentences.write_text("sentence_id,conflict,subdim,condition,label,text\n"
                         "e1,esc,,explicit,happy,I am so happy that you came.\n"
                         "e2,esc,,explicit,sad,I feel so sad and alone today.\n")
    store = tmp_path / "store"
    _check_damaged_shard_resubmitted(
        lambda verb, *extra: _deaf_stage(verb, store, sentences, *extra), store,
        "deaf_sentences", capsys)
    run = RunStore(FileStore(store), "r")
    logs = [json.loads(run.get_bytes(k)) for k in run.list("_logs/stage/deaf_sentences")]
    assert sorted((r["verb"], r["shard"]) for r in logs) == [
        ("merge", None), ("run", 0), ("run", 1), ("run", 1)]
    assert all(r["peak_rss"] > 0 and r["stage"] == "deaf_sentences" for r in logs)


def _python(*lines: str) -> subprocess.CompletedProcess[str]:
    """``lines`` as a program in a fresh interpreter (what a pod's process does at exit)."""
    return subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True,
                          text=True, timeout=300)


def test_leave_runs_exit_handlers_flushes_and_keeps_the_code() -> None:
    """``madbench`` leaves with ``os._exit`` (pyarrow's pool can abort in interpreter teardown,
    apache/arrow#34314); what teardown would have done still happens: atexit handlers, logging
    shutdown, buffered output."""
    done = _python("import atexit, logging, sys",
                   "from madbench_common.cli import leave",
                   "atexit.register(lambda: print('handler ran'))",
                   "sys.stdout.write('buffered, no newline')",
                   "leave(7)")
    assert done.returncode == 7, done.stderr
    assert done.stdout == "buffered, no newlinehandler ran\n"


def test_importing_every_module_runs_no_command() -> None:
    """``make image-test`` imports every madbench_common module in the image
    (``imagetest.check_imports``); ``cli/__main__`` ran the CLI on import, so the check
    exited 2 with madbench's usage for the image test's own argv."""
    done = _python("import sys",
                   "sys.argv = ['imagetest', 'check-models']",
                   "from madbench_common.testing.imagetest import check_imports",
                   "missing = check_imports()",
                   "print('imported; missing packages only:',"
                   " all('(needs ' in m for m in missing))")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "imported; missing packages only: True" in done.stdout
