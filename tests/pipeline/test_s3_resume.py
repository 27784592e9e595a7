"""Resume on S3, proven: a missing marker is "not done", and a store fault that reaches a
worker, a stage or the CLI is one line with exit 75 (transient) or 3 (a refusal), never a
traceback. Stage-level faults run against a real SeaweedFS (through a fault proxy that
answers one stage's shard requests with a refusal or drops their connections); the raw
exception types a store can raise are classified here one by one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from madbench_common.core.errors import (
    EXIT_DETERMINISTIC,
    EXIT_TRANSIENT,
    ConfigError,
    StoreUnavailable,
)
from madbench_common.core.s3client import store_failure
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.failures import row_failure, stage_failure
from madbench_common.pipeline.stage import shard_key
from madbench_common.testing import S3FaultProxy, SeaweedS3
from madbench_common.testing.faults import demo_sources, executed_markers, manifests

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"


def _client_error(status: int, code: str, op: str = "GetObject") -> Exception:
    from botocore.exceptions import ClientError

    error = {"Code": code, "Message": "x"} if code else {"Code": str(status), "Message": ""}
    return ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}, op)


def test_executed_markers_count_a_stage_whose_marker_is_missing_as_not_done(
        tmp_path: Path) -> None:
    """The sweep's own check read each stage's ``_SUCCESS`` bare: a run log naming a stage
    killed before its merge (shards done, no marker) was a ``FileNotFoundError``."""
    run = RunStore(open_store(str(tmp_path)), "r")
    done = shard_key("separate/0f0f", 0, 2, "_SUCCESS")
    run.put_bytes(done, b'{"sha256": "x", "rows": 1}')
    record = {"stages": [{"stage": "separate", "skipped": False, "executed": [0],
                          "shards": 2},
                         {"stage": "split", "skipped": False, "executed": [0], "shards": 1}]}
    assert executed_markers(run, record) == {done}
    from madbench_common.benchmarks.madbench.graph import build_graph

    assert manifests(run, build_graph()) == {}  # no marker, no manifest: nothing finished


@pytest.mark.parametrize(("exc", "code"), [
    (_client_error(503, "SlowDown"), EXIT_TRANSIENT),
    (_client_error(500, "InternalError"), EXIT_TRANSIENT),
    (_client_error(502, ""), EXIT_TRANSIENT),
    (_client_error(429, ""), EXIT_TRANSIENT),
    (_client_error(403, "AccessDenied"), EXIT_DETERMINISTIC),
    (_client_error(403, "", "HeadObject"), EXIT_DETERMINISTIC),  # HEAD: a code-less 403
    (_client_error(404, "NoSuchBucket"), EXIT_DETERMINISTIC),
    (ConnectionResetError(104, "Connection reset by peer"), EXIT_TRANSIENT),
    (TimeoutError("timed out"), EXIT_TRANSIENT),
])
def test_raw_store_faults_get_an_exit_code(exc: Exception, code: int) -> None:
    failure = store_failure(exc)
    assert failure is not None and failure.exit_code == code
    assert "\n" not in str(failure)
    # a whole shard that failed on it: the same class, not "StageFailed" (exit 3)
    assert stage_failure(exc, "stage separate shard 1/2").exit_code == code


def test_botocore_connection_errors_are_transient_and_never_a_quarantined_row() -> None:
    from botocore.exceptions import ConnectionClosedError, EndpointConnectionError

    for exc in (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"),
                ConnectionClosedError(endpoint_url="http://127.0.0.1:9")):
        assert isinstance(store_failure(exc), StoreUnavailable)
        with pytest.raises(StoreUnavailable):  # was: row quarantined as item_failed
            row_failure(exc, "clip")
    with pytest.raises(ConfigError, match="AccessDenied"):
        row_failure(_client_error(403, "AccessDenied"), "clip")
    wrapped = RuntimeError("decoding failed")
    wrapped.__cause__ = _client_error(503, "SlowDown")
    assert isinstance(store_failure(wrapped), StoreUnavailable)  # found in the chain
    assert store_failure(ValueError("bad input")) is None
    # an item's own socket error (a decoder, a model API) stays that item's
    assert row_failure(ConnectionResetError(104, "reset"), "clip").reason == "io_error"


@pytest.mark.s3
def test_a_code_less_403_is_a_refusal_not_an_outage(s3_server: SeaweedS3) -> None:
    """HEAD replies carry no error code: a 403 on ``exists`` was retried for the whole
    outage window (120 s), then reported as transient (exit 75)."""
    env = s3_server.env() | {"AWS_SECRET_ACCESS_KEY": "wrong", "MADBENCH_S3_OUTAGE_SECONDS": "30"}
    probe = ("from madbench_common.core.store import open_store\n"
             "open_store('s3://madbench/x').exists('a/b')\n")
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120)
    assert "ConfigError" in done.stderr and "S3 refused (AccessDenied)" in done.stderr, \
        done.stderr[-1500:]


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (DEMO / "sources.csv").exists():
        pytest.skip("data/demo not built")
    return demo_sources(tmp_path_factory.mktemp("s3fault"), ("demo_002", "demo_004"))


@pytest.fixture
def proxy_for(s3_server: SeaweedS3) -> Iterator[Callable[[str], S3FaultProxy]]:
    opened: list[S3FaultProxy] = []

    def make(fault: str) -> S3FaultProxy:
        # separate's shards, which only its forked workers touch (the runner reads them
        # when it merges, after the workers are done)
        proxy = S3FaultProxy(s3_server.endpoint, every=1, offset=0, faults=(fault,),
                             match=r"/separate/[^/]+/shards/").start()
        opened.append(proxy)
        return proxy

    yield make
    for proxy in opened:
        proxy.stop()


def _run_until_separate(s3_server: SeaweedS3, proxy: S3FaultProxy, sources: Path,
                        run_id: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **s3_server.env(), "AWS_ENDPOINT_URL": proxy.endpoint,
           "MADBENCH_S3_OUTAGE_SECONDS": "3", "MADBENCH_S3_MAX_ATTEMPTS": "2",
           "COLUMNS": "1000"}
    return subprocess.run([sys.executable, "-m", "madbench_common.cli", "run", "--sources",
                           str(sources), "--store", "s3://madbench/worker-faults", "--run-id",
                           run_id, "--workers", "2", "--until", "separate", "--no-progress"],
                          env=env, capture_output=True, text=True, timeout=900)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


def _worker_fault(s3_server: SeaweedS3, sources: Path,
                  proxy_for: Callable[[str], S3FaultProxy], fault: str,
                  code: int) -> tuple[S3FaultProxy, str, RunStore]:
    """Run until ``separate`` with the workers' shard writes answered by ``fault`` (the run
    id is the fault's name): it exits ``code``. Returns the proxy, the one error line the
    run printed and the run's store."""
    proxy = proxy_for(fault)
    done = _run_until_separate(s3_server, proxy, sources, fault)
    assert done.returncode == code, done.stderr[-3000:]
    return proxy, _one_line(done), RunStore(open_store("s3://madbench/worker-faults"), fault)


@pytest.mark.s3
@pytest.mark.slow
def test_a_refusal_in_a_worker_is_one_line_and_exit_3(
        s3_server: SeaweedS3, sources: Path, proxy_for: Callable[[str], S3FaultProxy]) -> None:
    proxy, line, run = _worker_fault(s3_server, sources, proxy_for, "AccessDenied",
                                     EXIT_DETERMINISTIC)
    assert "S3 refused (AccessDenied)" in line and "/separate/" in line
    assert proxy.injected["AccessDenied"] >= 1
    assert run.exists("ingest/_SUCCESS") and not run.exists("separate/_SUCCESS")


@pytest.mark.s3
@pytest.mark.slow
def test_dropped_connections_in_a_worker_are_one_line_and_exit_75(
        s3_server: SeaweedS3, sources: Path, proxy_for: Callable[[str], S3FaultProxy]) -> None:
    proxy, line, run = _worker_fault(s3_server, sources, proxy_for, "Reset", EXIT_TRANSIENT)
    assert "unreachable" in line and "MADBENCH_S3_OUTAGE_SECONDS" in line
    assert proxy.injected["Reset"] >= 2
    # the refusal is over: the same command resumes and finishes
    proxy.every = 0
    again = _run_until_separate(s3_server, proxy, sources, "Reset")
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(run.get_bytes("separate/_SUCCESS"))["rows"] == 2


@pytest.mark.s3
def test_a_dead_endpoint_is_one_line_and_exit_75(s3_server: SeaweedS3, sources: Path) -> None:
    from madbench_common.testing import free_port

    env = {**os.environ, **s3_server.env(), "MADBENCH_S3_OUTAGE_SECONDS": "2",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}", "COLUMNS": "1000"}
    done = subprocess.run([sys.executable, "-m", "madbench_common.cli", "run", "--sources",
                           str(sources), "--store", "s3://madbench/dead", "--run-id", "r",
                           "--until", "ingest", "--no-progress"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_TRANSIENT, done.stderr[-3000:]
    assert "unreachable" in _one_line(done)
