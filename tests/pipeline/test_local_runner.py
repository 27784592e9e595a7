"""Local runner: ordering, sharding, skip-on-rerun, fingerprints, resume, quarantine."""

from __future__ import annotations

from pathlib import Path

import pytest

from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.pipeline.local import EMBEDDED_IMAGE, LocalRunner, RunOptions
from madbench_common.pipeline.stage import make_context, run_shard, shard_items
from madbench_common.pipeline.status import collect_status
from tests.pipeline.toystages import ToyRow, calls, toy_graph


def _opts(tmp: Path, counter: Path, run_id: str = "r", **kw: object) -> RunOptions:
    params = {"numbers": {"counter": str(counter)}, "total": {"counter": str(counter)}}
    params["numbers"].update(kw.pop("numbers", {}))  # type: ignore[arg-type]
    return RunOptions(store=str(tmp / "store"), run_id=run_id, params=params, progress=False,
                      **kw)  # type: ignore[arg-type]


def _manifest(tmp: Path, run_id: str, stage: str) -> bytes:
    return (tmp / "store" / run_id / stage / "manifest.parquet").read_bytes()


@pytest.mark.parametrize(("n", "k"), [(10, 4), (3, 4), (0, 2), (7, 1)])
def test_shards_partition_items(n: int, k: int) -> None:
    items = [str(i) for i in range(n)]
    parts = [shard_items(items, i, k) for i in range(k)]
    assert [item for part in parts for item in part] == items
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_run_then_rerun_skips_everything(tmp_path: Path) -> None:
    counter = tmp_path / "calls.txt"
    reports = LocalRunner(toy_graph, _opts(tmp_path, counter)).execute()
    assert [r.stage for r in reports] == ["numbers", "total"]
    assert len(calls(counter)) == 11
    rows = read_manifest_bytes(ToyRow, _manifest(tmp_path, "r", "total"))
    assert rows[0].value == 3 * sum(range(10))
    again = LocalRunner(toy_graph, _opts(tmp_path, counter)).execute()
    assert all(r.skipped for r in again)
    assert len(calls(counter)) == 11
    logs = (tmp_path / "store" / "r" / "_logs").iterdir()
    assert len(list(logs)) == 2


def test_param_change_reruns_downstream(tmp_path: Path) -> None:
    counter = tmp_path / "calls.txt"
    LocalRunner(toy_graph, _opts(tmp_path, counter)).execute()
    LocalRunner(toy_graph, _opts(tmp_path, counter, numbers={"n": 4})).execute()
    assert calls(counter)[11:] == [f"numbers c{i:02d}" for i in range(4)] + ["total"]
    rows = read_manifest_bytes(ToyRow, _manifest(tmp_path, "r", "total"))
    assert rows[0].value == 3 * sum(range(4))


def test_row_schema_bump_reruns_the_stage(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A new manifest schema version recomputes the stage (and what reads it) instead of
    keeping the old manifest, which the next reader would refuse."""
    counter = tmp_path / "calls.txt"
    LocalRunner(toy_graph, _opts(tmp_path, counter)).execute()
    monkeypatch.setattr(ToyRow, "SCHEMA_VERSION", ToyRow.SCHEMA_VERSION + 1)
    again = LocalRunner(toy_graph, _opts(tmp_path, counter)).execute()
    assert not any(r.skipped for r in again)
    assert len(calls(counter)) == 22
    rows = read_manifest_bytes(ToyRow, _manifest(tmp_path, "r", "total"))
    assert rows[0].value == 3 * sum(range(10))


def test_workers_do_not_change_results(tmp_path: Path) -> None:
    counter = tmp_path / "calls.txt"
    LocalRunner(toy_graph, _opts(tmp_path, counter, run_id="a", workers=1)).execute()
    LocalRunner(toy_graph, _opts(tmp_path, counter, run_id="b", workers=2,
                                 shards={"numbers": 3})).execute()
    a = read_manifest_bytes(ToyRow, _manifest(tmp_path, "a", "numbers"))
    b = read_manifest_bytes(ToyRow, _manifest(tmp_path, "b", "numbers"))
    assert [(r.clip_id, r.value, r.sha256) for r in a] == [(r.clip_id, r.value, r.sha256)
                                                            for r in b]


def test_interrupted_stage_resumes_without_repeating_shards(tmp_path: Path) -> None:
    counter = tmp_path / "calls.txt"
    opts = _opts(tmp_path, counter)
    run = RunStore(FileStore(opts.store), "r")
    ctx = make_context(run, toy_graph(), "numbers", opts.params["numbers"], EMBEDDED_IMAGE, 0)
    run_shard(ctx, 0, 4)  # a runner that died after its first shard
    run_shard(ctx, 1, 4)
    done_before = list(calls(counter))
    reports = LocalRunner(toy_graph, opts).execute()
    assert reports[0].shards_skipped == 2
    redone = [c for c in calls(counter)[len(done_before):] if c.startswith("numbers")]
    assert not set(redone) & set(done_before)
    clean_counter = tmp_path / "clean.txt"
    LocalRunner(toy_graph, _opts(tmp_path, clean_counter, run_id="clean")).execute()
    resumed = read_manifest_bytes(ToyRow, _manifest(tmp_path, "r", "total"))
    clean = read_manifest_bytes(ToyRow, _manifest(tmp_path, "clean", "total"))
    assert resumed == clean


def test_rejected_inputs_are_quarantined_and_the_run_goes_on(tmp_path: Path) -> None:
    counter = tmp_path / "calls.txt"
    LocalRunner(toy_graph, _opts(tmp_path, counter, numbers={"bad": [2, 5]})).execute()
    status = collect_status(RunStore(FileStore(tmp_path / "store"), "r"), toy_graph())
    assert [(q.stage, q.item, q.reason) for q in status.quarantine] == [
        ("numbers", "c02", "unreadable"), ("numbers", "c05", "unreadable")]
    assert "/data/c02.mp4" in status.quarantine[0].detail
    total = read_manifest_bytes(ToyRow, _manifest(tmp_path, "r", "total"))
    assert total[0].value == 3 * (sum(range(10)) - 2 - 5)


def test_isolated_shards_give_the_same_rows_and_their_own_peak_memory(tmp_path: Path) -> None:
    counter = tmp_path / "calls.txt"
    LocalRunner(toy_graph, _opts(tmp_path, counter, run_id="a")).execute()
    reports = LocalRunner(toy_graph, _opts(tmp_path, counter, run_id="b",
                                           isolate=True)).execute()
    assert _manifest(tmp_path, "a", "total") == _manifest(tmp_path, "b", "total")
    assert all(0 < r.peak_rss < 2 << 30 for r in reports)
    assert sorted(reports[0].executed) == [0, 1, 2, 3]
