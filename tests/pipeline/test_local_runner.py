"""Local runner: ordering, sharding, skip-on-rerun, fingerprints, resume, quarantine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import FileStore, RunStore, open_store
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.local import EMBEDDED_IMAGE, LocalRunner, RunOptions
from madbench_common.pipeline.stage import make_context, run_shard, shard_items
from madbench_common.pipeline.status import collect_status
from madbench_common.testing import S3FaultProxy, SeaweedS3
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


def _inline_then_sharded() -> Graph:
    """A one-shard stage (run in the runner's own process), then a sharded one (run by the
    workers): as a resume meets the demo graph's split, then scene."""
    return Graph([
        Stage(name="first", role="core", target="tests.pipeline.toystages:Numbers",
              params={"n": 2}),
        Stage(name="second", role="core", target="tests.pipeline.toystages:Numbers", shards=4,
              inputs=("first",), params={"n": 8}),
    ])


@pytest.mark.s3
def test_shard_workers_on_s3_do_not_share_the_runners_connections(
        s3_server: SeaweedS3, s3_uri: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers are forked once a stage is sharded; the runner had run a one-shard stage
    itself before (the demo's split, on a resume after a kill), with the store client it
    keeps per process. The workers inherited that client and its open connection, wrote
    their requests on it together and read each other's replies: the resume died with
    ``FileNotFoundError: …/ingest/_SUCCESS: no such object`` from a worker (or a 60 s read
    timeout). Every worker request must come on a connection of its own."""
    with S3FaultProxy(s3_server.endpoint, every=0) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        counter = tmp_path / "calls.txt"
        params = {"first": {"counter": str(counter)}, "second": {"counter": str(counter)}}
        opts = RunOptions(store=s3_uri, run_id="r", params=params, progress=False, workers=2)
        reports = LocalRunner(_inline_then_sharded, opts).execute()
        assert [(r.stage, r.shards) for r in reports] == [("first", 1), ("second", 4)]
        seen = proxy.connections
        inline = re.compile(r"/r/first/[0-9a-f]{16}/shards/00000-of-00001\._SUCCESS$")
        last = max(i for i, (_, method, path) in enumerate(seen)
                   if method == "PUT" and inline.search(path))  # the inline shard's end
        port = seen[last][0]  # the connection of the runner's per-process client
        # nothing in the runner uses that client again: a request on its connection
        # after this comes from a worker that inherited it
        assert [c for c in seen[last + 1:] if c[0] == port] == []
        run = RunStore(open_store(s3_uri), "r")
        assert len(read_manifest_bytes(ToyRow, run.get_bytes("second/manifest.parquet"))) == 8


def test_rejections_of_a_row_type_without_an_id_field_are_summarised(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A stage whose rows have no ``*_id`` column (DEAF's environment library: ``code``)
    still gets its one-line-per-reason summary: the id is the row's first own column, not
    the base's ``status`` (read twice, pyarrow refused the duplicate column)."""
    import hashlib
    import io
    import logging

    import pyarrow as pa
    import pyarrow.parquet as pq

    from madbench_common.pipeline.local import _log_rejections

    run = RunStore(open_store(str(tmp_path)), "r")
    table = pa.table({"status": ["ok", "rejected"], "reason": ["", "environment_missing"],
                      "detail": ["", "office"], "code": ["DKITCHEN", "OOFFICE"]})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    run.put_bytes("envlib/manifest.parquet", buf.getvalue())
    stage = Stage(name="envlib", role="x", target="x:y", inputs=(), outputs=("envlib",))
    sha = hashlib.sha256(buf.getvalue()).hexdigest()
    with caplog.at_level(logging.WARNING, logger="madbench"):
        _log_rejections(run, stage, {"manifest_sha256": sha})  # a marker without "key"
    assert "envlib: 1 rejected: environment_missing (e.g. OOFFICE)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="madbench"):  # the marker names the field
        _log_rejections(run, stage, {"manifest_sha256": sha, "key": "detail"})
    assert "envlib: 1 rejected: environment_missing (e.g. office)" in caplog.text
