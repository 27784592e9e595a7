"""Damaged objects: detected on read, named, and their shard recomputed (never used)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from madbench_common.core.errors import ChecksumError
from madbench_common.core.store import FileStore, RunStore
from madbench_common.pipeline.local import EMBEDDED_IMAGE, LocalRunner, RunOptions
from madbench_common.pipeline.repair import invalidate
from madbench_common.pipeline.stage import make_context, run_shard
from tests.pipeline.toystages import calls, toy_graph


def _opts(tmp: Path, counter: Path, factor: int = 1) -> RunOptions:
    return RunOptions(store=str(tmp / "store"), run_id="r", progress=False, params={
        "numbers": {"counter": str(counter)},
        "total": {"counter": str(counter), "factor": factor}})


def _flip(path: Path) -> None:
    """Damage a stored object in place, as bit rot or a bad disk would."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with open(path, "r+b") as fh:
        fh.write(bytes(data))


def _prefix(tmp: Path) -> Path:
    return next(p for p in (tmp / "store" / "r" / "numbers").iterdir() if p.is_dir())


def test_damaged_artifact_recomputes_only_its_shard(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    counter = tmp_path / "calls.txt"
    LocalRunner(toy_graph, _opts(tmp_path, counter)).execute()
    manifest = (tmp_path / "store" / "r" / "numbers" / "manifest.parquet").read_bytes()
    _flip(_prefix(tmp_path) / "c03.txt")
    n = len(calls(counter))
    with caplog.at_level(logging.WARNING, logger="madbench"):
        reports = LocalRunner(toy_graph, _opts(tmp_path, counter, factor=2)).execute()
    assert "numbers/" in caplog.text and "c03.txt: sha256 mismatch" in caplog.text
    redone = calls(counter)[n:]
    assert "numbers c03" in redone and len([c for c in redone if c.startswith("numbers")]) < 10
    by = {r.stage: r for r in reports}
    assert len(by["numbers"].executed) == 1
    assert (tmp_path / "store" / "r" / "numbers" / "manifest.parquet").read_bytes() == manifest
    assert (_prefix(tmp_path) / "c03.txt").read_text() == "9"


def test_damaged_shard_manifest_is_recomputed_before_the_merge(tmp_path: Path) -> None:
    counter = tmp_path / "calls.txt"
    opts = _opts(tmp_path, counter)
    run = RunStore(FileStore(opts.store), "r")
    ctx = make_context(run, toy_graph(), "numbers", opts.params["numbers"], EMBEDDED_IMAGE, 0)
    for shard in range(4):
        run_shard(ctx, shard, 4)
    _flip(_prefix(tmp_path) / "shards" / "00001-of-00004.parquet")
    reports = LocalRunner(toy_graph, opts).execute()
    assert reports[0].executed == [1]
    clean = tmp_path / "clean"
    LocalRunner(toy_graph, _opts(clean, counter)).execute()  # same params, same bytes
    for stage in ("numbers", "total"):
        ours = tmp_path / "store" / "r" / stage / "manifest.parquet"
        assert ours.read_bytes() == (clean / "store" / "r" / stage / "manifest.parquet"
                                     ).read_bytes()


@pytest.mark.parametrize("name", ["manifest.parquet", "_SUCCESS"])
def test_damaged_merge_outputs_are_merged_again(tmp_path: Path, name: str) -> None:
    counter = tmp_path / "calls.txt"
    LocalRunner(toy_graph, _opts(tmp_path, counter)).execute()
    merged = tmp_path / "store" / "r" / "numbers" / "manifest.parquet"
    good = merged.read_bytes()
    _flip(tmp_path / "store" / "r" / "numbers" / name)
    n = len(calls(counter))
    reports = LocalRunner(toy_graph, _opts(tmp_path, counter, factor=3)).execute()
    assert not [c for c in calls(counter)[n:] if c.startswith("numbers")]
    assert reports[0].executed == [] and merged.read_bytes() == good


def test_damage_nothing_can_rebuild_is_reported(tmp_path: Path) -> None:
    run = RunStore(FileStore(tmp_path), "r")
    run.put_bytes("numbers/abc/stray.bin", b"x")
    with pytest.raises(ChecksumError, match="no shard of this run wrote it"):
        invalidate(run, "numbers/abc/stray.bin")


def test_damaged_merged_manifest_is_rebuilt_by_run_until_and_status(tmp_path: Path) -> None:
    """Was exit 3 (a ChecksumError) in `run --until` and `status`."""
    from madbench_common.pipeline.status import collect_status

    counter = tmp_path / "calls.txt"
    LocalRunner(toy_graph, _opts(tmp_path, counter)).execute()
    path = tmp_path / "store" / "r" / "numbers" / "manifest.parquet"
    good, ran = path.read_bytes(), len(calls(counter))
    _flip(path)
    opts = _opts(tmp_path, counter)
    opts.until = "numbers"
    reports = LocalRunner(toy_graph, opts).execute()
    assert reports[0].skipped and len(calls(counter)) == ran  # rebuilt, nothing rerun
    assert path.read_bytes() == good
    _flip(path)
    run = RunStore(FileStore(tmp_path / "store"), "r")
    status = collect_status(run, toy_graph())
    assert all(s.done for s in status.stages) and path.read_bytes() == good
    _flip(path)  # now with a damaged shard too: it cannot be rebuilt, the stage reruns
    _flip(next(_prefix(tmp_path).glob("shards/*.parquet")))
    status = collect_status(run, toy_graph())
    assert [s.stage for s in status.stages if not s.done] == ["numbers"]
    LocalRunner(toy_graph, opts).execute()
    assert path.read_bytes() == good


def test_a_marker_removed_while_it_is_read_is_a_stage_not_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A marker that a repair (or a rerun of its stage) removes between a check that it
    exists and its read: the stage is not done (its inputs' readers say so, and the runner
    computes it), never a ``FileNotFoundError`` out of a shard worker."""
    from madbench_common.core.errors import ManifestError
    from madbench_common.pipeline.stage import read_marker

    counter = tmp_path / "calls.txt"
    LocalRunner(toy_graph, _opts(tmp_path, counter)).execute()
    run = RunStore(FileStore(tmp_path / "store"), "r")
    assert read_marker(run, "numbers") is not None
    run.delete("numbers/_SUCCESS")
    monkeypatch.setattr(RunStore, "exists", lambda self, key: True)  # it was there a moment ago
    assert read_marker(run, "numbers") is None
    with pytest.raises(ManifestError, match="needs 'numbers', which has not finished"):
        make_context(run, toy_graph(), "total", {"counter": str(counter)}, EMBEDDED_IMAGE, 0)
