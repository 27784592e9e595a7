"""Run lease: one holder at a time, fail fast or wait, crash takeover, renewal, loss."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from madbench_common.core.errors import RunLocked
from madbench_common.core.store import FileStore, RunStore, open_store
from madbench_common.pipeline.lease import LOCK_KEY, RunLease


def _lock(run: RunStore, host: str, pid: int, renewed: float, lease: float = 60.0) -> None:
    run.put_bytes(LOCK_KEY, json.dumps({"owner": "other", "host": host, "pid": pid,
                                        "renewed": renewed, "lease": lease}).encode())


@pytest.fixture
def run(tmp_path: Path) -> RunStore:
    return RunStore(FileStore(tmp_path), "r")


def test_second_runner_fails_fast_naming_the_holder(run: RunStore) -> None:
    with RunLease(run):
        start = time.monotonic()
        with pytest.raises(RunLocked, match=r"locked by another runner on .* pid \d+") as err:
            RunLease(run).acquire()
        assert time.monotonic() - start < 2
        assert err.value.exit_code == 75
    with RunLease(run) as second:  # released: the next one gets it
        assert second.token is not None
    assert not run.exists(LOCK_KEY)


def test_waiting_runner_gets_the_lease_when_it_expires(run: RunStore) -> None:
    _lock(run, "elsewhere", 1, renewed=time.time(), lease=1.0)
    with pytest.raises(RunLocked, match="elsewhere"):
        RunLease(run).acquire()
    start = time.monotonic()
    with RunLease(run, wait=10):
        assert 0.3 < time.monotonic() - start < 5


def test_lease_of_a_crashed_local_runner_is_taken_over_at_once(run: RunStore) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    import socket

    _lock(run, socket.gethostname(), int(dead.stdout), renewed=time.time())
    with RunLease(run) as lease:
        assert json.loads(run.get_bytes(LOCK_KEY))["owner"] == lease.owner


def test_heartbeat_keeps_a_live_lease(run: RunStore) -> None:
    with RunLease(run, lease=0.6):
        time.sleep(1.5)  # more than two leases: only renewal keeps it
        with pytest.raises(RunLocked):
            RunLease(run, lease=0.6).acquire()


def test_a_runner_whose_lease_was_taken_stops(run: RunStore) -> None:
    lease = RunLease(run, lease=0.6).acquire()
    try:
        _lock(run, "elsewhere", 1, renewed=time.time())  # someone took it over
        time.sleep(0.8)
        with pytest.raises(RunLocked, match="taken over"):
            lease.check()
    finally:
        lease.release()
    assert run.exists(LOCK_KEY), "a lost lease must not delete the new holder's lock"


def _contend(run: RunStore) -> int:
    holders, overlaps = [0], [0]

    def worker() -> None:
        for _ in range(4):
            with RunLease(run, wait=30):
                holders[0] += 1
                overlaps[0] += holders[0] > 1
                time.sleep(0.05)
                holders[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return overlaps[0]


def test_contending_runners_never_overlap_on_files(run: RunStore) -> None:
    assert _contend(run) == 0


@pytest.mark.s3
def test_contending_runners_never_overlap_on_s3(s3_uri: str) -> None:
    assert _contend(RunStore(open_store(s3_uri), "r")) == 0
