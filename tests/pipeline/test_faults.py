"""Faults on the real runner and stores: relocation, SIGKILL
(also before the first marker, and resumed with another worker count), S3 outage,
throttling, damage (an artifact, a merged manifest), a second runner, an edited sources
file, a full disk (no mount: RLIMIT_FSIZE), and a runner killed alone (its workers and
decoders must not outlive it). The full sweep (≥ 10 seeds per store) is
``perf/bench_faults.py`` (``make faults``, part of ``make bench``); here, a few seeds."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import SourceRow, SplitRow, StemRow
from madbench_common.core.environ import environ
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore, Store, copy_run, open_store
from madbench_common.testing import S3FaultProxy, SeaweedS3
from madbench_common.testing.faults import (
    LIGHT_EVALUATION,
    check_resume,
    count_markers,
    demo_sources,
    finished_markers,
    kill_run,
    last_run_log,
    manifests,
    run_cli,
    sweep_seed,
    write_sources,
)

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"


@dataclass(frozen=True)
class Clean:
    """A clean run of the whole demo graph on three clips (file store)."""

    store: Path
    sources: Path
    manifests: dict[str, bytes]
    markers: int
    """``_SUCCESS`` markers the clean run wrote (kill points are drawn below it)."""


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Clean:
    if not (DEMO / "sources.csv").exists():
        pytest.skip("data/demo not built")
    tmp = tmp_path_factory.mktemp("clean")
    sources = demo_sources(tmp / "sources")
    done = run_cli(str(tmp / "store"), "clean", sources)
    assert done.returncode == 0, done.stderr[-2000:]
    run = RunStore(open_store(str(tmp / "store")), "clean")
    found = manifests(run, build_graph())
    assert len(found) == len(build_graph().stages)
    return Clean(tmp / "store", sources, found, count_markers(run))


def _all_skipped(run: RunStore) -> None:
    record = last_run_log(run)
    assert [s["stage"] for s in record["stages"] if not s["skipped"]] == []
    assert all(s["executed"] == [] for s in record["stages"])


@pytest.mark.s3
def test_run_moved_between_store_kinds_skips_every_stage(clean: Clean, tmp_path: Path,
                                                         s3_uri: str) -> None:
    """file → S3 (original deleted) → file again: `madbench run` skips every stage."""
    src = tmp_path / "a"
    shutil.copytree(clean.store / "clean", src / "moved")
    graph = build_graph()
    s3 = RunStore(open_store(s3_uri), "moved")
    copied = subprocess.run([sys.executable, "-m", "madbench_common.cli", "copy", "--from",
                             str(src), "--to", s3_uri, "--run-id", "moved"],
                            capture_output=True, text=True, check=True)
    assert "copied" in copied.stdout
    shutil.rmtree(src)
    assert run_cli(s3_uri, "moved", clean.sources).returncode == 0
    _all_skipped(s3)
    assert manifests(s3, graph) == clean.manifests
    back = RunStore(open_store(str(tmp_path / "b")), "moved")
    copy_run(s3, back)
    for key in s3.list():
        s3.delete(key)
    assert run_cli(str(tmp_path / "b"), "moved", clean.sources).returncode == 0
    _all_skipped(back)
    assert manifests(back, graph) == clean.manifests


@pytest.mark.parametrize("seed", [3])
def test_sigkill_then_rerun_on_files(clean: Clean, tmp_path: Path, seed: int) -> None:
    record = sweep_seed(seed, str(tmp_path / "store"), clean.sources, build_graph(),
                        clean.manifests, clean.markers)
    assert record.killed and record.problems == [], record


@pytest.mark.timeout(1800)  # the rerun is a whole demo run: over 600 s at load 14 on 2 cores
def test_sigkill_before_the_first_marker_then_rerun(clean: Clean, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert kill_run(store, "early", clean.sources, markers=0, jitter=0.0)
    run = RunStore(open_store(store), "early")
    assert count_markers(run) == 0 and run.exists("_LOCK")  # killed holding the lease
    # the rerun takes the dead runner's lease over; up to split is enough to show it
    # (the kill-and-resume tests above run the whole graph)
    done = run_cli(store, "early", clean.sources, extra=["--until", "split"])
    assert done.returncode == 0, done.stderr[-2000:]
    got = manifests(run, build_graph())
    assert set(got) == {"ingest", "separate", "source_qc", "split"}
    assert check_resume(run, build_graph(), {s: clean.manifests[s] for s in got}, set()) == []


def test_rerun_with_another_worker_count_is_byte_identical(clean: Clean,
                                                           tmp_path: Path) -> None:
    """Killed with 2 workers once ingest is done, resumed with 1 up to split: the same
    bytes as the clean run (2 workers) and no finished shard computed again. Math threads
    are pinned; they were cores / workers, so split's speaker embeddings differed in
    low-order bits between 1 and 2 workers."""
    store = str(tmp_path / "store")
    assert kill_run(store, "w", clean.sources, markers=1, jitter=0.0, workers=2,
                    when="ingest/_SUCCESS")
    run = RunStore(open_store(store), "w")
    assert not run.exists("split/_SUCCESS")
    before = finished_markers(run)
    done = run_cli(store, "w", clean.sources, workers=1, extra=["--until", "split"])
    assert done.returncode == 0, done.stderr[-2000:]
    got = manifests(run, build_graph())
    assert set(got) == {"ingest", "separate", "source_qc", "split"}
    assert {s: got[s] == clean.manifests[s] for s in got} == {s: True for s in got}
    assert check_resume(run, build_graph(), {s: clean.manifests[s] for s in got},
                        before) == []


@pytest.mark.s3
@pytest.mark.parametrize("seed", [7])
def test_sigkill_then_rerun_on_s3(clean: Clean, s3_uri: str, seed: int) -> None:
    record = sweep_seed(seed, s3_uri, clean.sources, build_graph(), clean.manifests,
                        clean.markers)
    assert record.killed and record.problems == [], record


EARLY = "separate"
"""The seeded S3 kill points below run up to here (ingest and separate: both sharded over
forked workers that write to the store); the whole graph is ``make faults``' sweep."""


@pytest.mark.s3
@pytest.mark.parametrize("seed", [0, 2, 5])
def test_seeded_sigkill_on_s3_resumes_to_the_same_bytes(clean: Clean, s3_uri: str,
                                                        seed: int) -> None:
    """Kill points drawn as the sweep draws them (seed 2: in ingest, after its first
    marker; 5: ingest done, separate starting, resumed with one worker; 0: two of
    separate's shards done), over the markers of ingest and separate: the rerun gives the
    clean run's bytes and computes no finished shard again."""
    stages = [s.name for s in build_graph().until(EARLY)]
    run = RunStore(open_store(str(clean.store)), "clean")
    early = {s: clean.manifests[s] for s in stages}
    record = sweep_seed(seed, s3_uri, clean.sources, build_graph(), early,
                        count_markers(run, stages), workers=2,
                        rerun_workers=1 if seed % 2 else 2, until=EARLY)
    assert record.killed and record.problems == [], record


@pytest.fixture
def own_s3(tmp_path: Path) -> Iterator[SeaweedS3]:
    """A SeaweedFS server of this test alone (it gets killed)."""
    server = SeaweedS3(tmp_path / "weed").start()
    server.create_bucket("madbench")
    yield server
    server.stop()


def _when(check: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.mark.s3
def test_s3_server_killed_and_restarted_mid_run(clean: Clean, own_s3: SeaweedS3) -> None:
    """The outage the runner rides out is stated in time (MADBENCH_S3_OUTAGE_SECONDS,
    120 s by default): here 900 s, longer than a restart can take on a loaded machine."""
    env = own_s3.env() | {"MADBENCH_S3_OUTAGE_SECONDS": "900"}
    store = "s3://madbench/outage"
    run = RunStore(open_store_with(env, store), "r")
    proc = subprocess.Popen([sys.executable, "-m", "madbench_common.cli", "run", "--sources",
                             str(clean.sources), "--store", store, "--run-id", "r",
                             "--until", "ingest", "--no-progress"],
                            env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _when(lambda: run.exists("_LOCK"))  # the runner holds the run: kill the server under it
    own_s3.kill()
    time.sleep(3)
    own_s3.start()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    got = manifests(run, build_graph())
    assert set(got) == {"ingest"}
    assert all(got[s] == clean.manifests[s] for s in got)
    status = json.loads(subprocess.run(
        [sys.executable, "-m", "madbench_common.cli", "status", "--store", store, "--run-id",
         "r", "--json"], env={**os.environ, **env}, capture_output=True, text=True,
        check=True).stdout)
    assert status["s3_retries"].get("total", 0) >= 1  # the outage was ridden out by retries


def open_store_with(env: dict[str, str], uri: str) -> Store:
    with environ(env):
        return open_store(uri)


@pytest.mark.s3
def test_s3_server_gone_fails_clearly_and_leaves_no_false_success(
        clean: Clean, own_s3: SeaweedS3) -> None:
    env = own_s3.env() | {"MADBENCH_S3_OUTAGE_SECONDS": "5"}
    store = "s3://madbench/gone"
    run = RunStore(open_store_with(own_s3.env(), store), "r")
    proc = subprocess.Popen([sys.executable, "-m", "madbench_common.cli", "run", "--sources",
                             str(clean.sources), "--store", store, "--run-id", "r",
                             "--until", "separate", "--no-progress"], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _when(lambda: run.exists("ingest/_SUCCESS"))
    own_s3.kill()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 75, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert lines and "a run rides out 5 s" in lines[-1], err[-2000:]
    own_s3.start()
    for key in run.list():  # every marker vouches for complete, intact output
        if key.endswith("/_SUCCESS") and key.count("/") == 1:
            marker = json.loads(run.get_bytes(key))
            run.get_bytes(key.replace("_SUCCESS", "manifest.parquet"),
                          marker["manifest_sha256"])
        elif key.endswith("._SUCCESS"):
            mark = json.loads(run.get_bytes(key))
            run.get_bytes(key.replace("._SUCCESS", ".parquet"), mark["sha256"])
    assert not run.exists("separate/_SUCCESS")


@pytest.mark.s3
def test_throttling_and_5xx_are_retried_and_counted(clean: Clean, own_s3: SeaweedS3) -> None:
    store = "s3://madbench/throttled"
    with S3FaultProxy(own_s3.endpoint, every=3, faults=("SlowDown", "InternalError",
                                                        "ServiceUnavailable")) as proxy:
        env = own_s3.env() | {"AWS_ENDPOINT_URL": proxy.endpoint}
        done = run_cli(store, "r", clean.sources, env, extra=["--until", "ingest"])
        assert done.returncode == 0, done.stderr[-2000:]
        # what the run log can count: faults before its own PUT (the CLI's closing status
        # table and lease release come after it)
        injected = proxy.faults_before("PUT", "/r/_logs/run-")
    run = RunStore(open_store_with(own_s3.env(), store), "r")
    got = manifests(run, build_graph())
    assert all(got[s] == clean.manifests[s] for s in got) and len(got) == 1
    status = subprocess.run([sys.executable, "-m", "madbench_common.cli", "status", "--store",
                             store, "--run-id", "r"], env={**os.environ, **own_s3.env(),
                                                          "COLUMNS": "200"},
                            capture_output=True, text=True, check=True).stdout
    assert injected >= 8 and f"S3 transient errors retried: {injected} " in status, (
        injected, [e for e in proxy.log if e[2]], status)


def test_damaged_stem_is_detected_and_its_shard_recomputed(clean: Clean, tmp_path: Path
                                                           ) -> None:
    store = tmp_path / "store"
    shutil.copytree(clean.store / "clean", store / "d")
    run = RunStore(open_store(str(store)), "d")
    eligible = {r.clip_id for r in read_manifest_bytes(
        SplitRow, run.get_bytes("split/manifest.parquet"))}
    stem = next(run.key_of(r.speech_uri) for r in read_manifest_bytes(  # what split reads
        StemRow, run.get_bytes("separate/manifest.parquet")) if r.clip_id in eligible)
    path = store / "d" / stem
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with open(path, "r+b") as fh:  # in place: the recorded sha256 stays, the bytes change
        fh.write(bytes(data))
    done = run_cli(str(store), "d", clean.sources, {"COLUMNS": "1000"},
                   extra=["--until", "split", "--set", "split.cluster_threshold=0.21"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sha256 mismatch" in done.stderr and stem in done.stderr.replace("\n", "")
    record = {s["stage"]: s for s in last_run_log(run)["stages"]}
    assert len(record["separate"]["executed"]) == 1  # that shard, and no other
    assert run.get_bytes("separate/manifest.parquet") == clean.manifests["separate"]
    assert path.read_bytes() != bytes(data)


def test_second_runner_fails_fast_while_the_first_runs(clean: Clean, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    first = subprocess.Popen([sys.executable, "-m", "madbench_common.cli", "run", "--sources",
                              str(clean.sources), "--store", store, "--run-id", "two",
                              "--until", "separate", "--no-progress"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = RunStore(open_store(store), "two")
    _when(lambda: run.exists("_LOCK"))
    second = run_cli(store, "two", clean.sources, extra=["--until", "separate"])
    assert second.returncode == 75
    assert f"pid {first.pid}" in second.stderr and "locked by another runner" in second.stderr
    waited: list[subprocess.CompletedProcess[str]] = []
    waiter = threading.Thread(target=lambda: waited.append(run_cli(
        store, "two", clean.sources, extra=["--until", "separate", "--lock-wait", "600"])))
    waiter.start()
    assert first.wait(timeout=600) == 0
    waiter.join(timeout=600)
    assert waited and waited[0].returncode == 0
    _all_skipped(run)  # it waited, then found everything done: no interleaved writes


def _copy(clean: Clean, dest: Path, run_id: str) -> RunStore:
    shutil.copytree(clean.store / "clean", dest / run_id)
    return RunStore(open_store(str(dest)), run_id)


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with open(path, "r+b") as fh:  # in place: the recorded sha256 stays, the bytes change
        fh.write(bytes(data))


def test_damaged_merged_manifest_is_rebuilt_by_run_until_and_by_status(
        clean: Clean, tmp_path: Path) -> None:
    """Was exit 3 in `madbench run --until <stage>` and in `madbench status`."""
    store = tmp_path / "store"
    run = _copy(clean, store, "m")
    _damage(store / "m" / "split" / "manifest.parquet")
    done = run_cli(str(store), "m", clean.sources, {"COLUMNS": "1000"},
                   extra=["--until", "split"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rebuilt from its" in done.stderr
    _all_skipped(run)  # rebuilt from the shards: nothing recomputed
    assert run.get_bytes("split/manifest.parquet") == clean.manifests["split"]
    _damage(store / "m" / "assemble" / "manifest.parquet")
    status = subprocess.run([sys.executable, "-m", "madbench_common.cli", "status", "--store",
                             str(store), "--run-id", "m", "--json"], capture_output=True,
                            text=True)
    assert status.returncode == 0, status.stderr[-2000:]
    assert all(s["done"] for s in json.loads(status.stdout)["stages"])
    assert run.get_bytes("assemble/manifest.parquet") == clean.manifests["assemble"]
    # a manifest whose shards are damaged too cannot be rebuilt: the stage runs again
    _damage(store / "m" / "split" / "manifest.parquet")
    for shard in (store / "m" / "split").rglob("shards/*.parquet"):
        _damage(shard)
    status = subprocess.run([sys.executable, "-m", "madbench_common.cli", "status", "--store",
                             str(store), "--run-id", "m", "--json"], capture_output=True,
                            text=True)
    assert status.returncode == 0, status.stderr[-2000:]
    assert not {s["stage"]: s for s in json.loads(status.stdout)["stages"]}["split"]["done"]
    done = run_cli(str(store), "m", clean.sources, extra=["--until", "split"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert run.get_bytes("split/manifest.parquet") == clean.manifests["split"]


def test_an_edited_sources_file_recomputes_ingest(clean: Clean, tmp_path: Path) -> None:
    """Ingest's fingerprint is the sources' content: the same command after an edit of the
    same CSV is not skipped, and the manifest shows the edit (it kept the old transcript)."""
    import csv as csv_module

    sources = tmp_path / "sources"
    shutil.copytree(clean.sources.parent, sources)
    store = str(tmp_path / "store")
    done = run_cli(store, "e", sources / "sources.csv", extra=["--until", "ingest"])
    assert done.returncode == 0, done.stderr[-2000:]
    run = RunStore(open_store(store), "e")
    with open(sources / "sources.csv", newline="") as fh:
        rows = list(csv_module.DictReader(fh))
    rows[0]["transcript"] = "an edited transcript"
    write_sources(sources / "sources.csv", rows)
    done = run_cli(store, "e", sources / "sources.csv", extra=["--until", "ingest"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert {s["stage"]: s for s in last_run_log(run)["stages"]}["ingest"]["executed"]
    got = {r.clip_id: r for r in read_manifest_bytes(SourceRow, run.get_bytes(
        "ingest/manifest.parquet"))}
    assert got[rows[0]["clip_id"]].transcript == "an edited transcript"


def _fsize_limit(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_disk_full_without_a_mount(clean: Clean, tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes every write past 300 kB fail with EFBIG, as a full disk fails
    with ENOSPC: exit 75 naming it, no partial file, and a rerun gives the clean bytes."""
    store = str(tmp_path / "store")
    until = ["--until", "split"]  # the writes fail in ingest; up to split shows the rerun
    argv = [sys.executable, "-m", "madbench_common.cli", "run", "--sources",
            str(clean.sources), "--store", store, "--run-id", "full", "--workers", "2",
            "--no-progress", *LIGHT_EVALUATION, *until]
    full = subprocess.run(argv, capture_output=True, text=True, timeout=1800,
                          preexec_fn=lambda: _fsize_limit(300_000))
    assert full.returncode == 75, full.stderr[-2000:]
    assert "no space left" in full.stderr
    leftovers = [p for p in (tmp_path / "store").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    run = RunStore(open_store(store), "full")
    before = finished_markers(run)
    done = run_cli(store, "full", clean.sources, extra=until)
    assert done.returncode == 0, done.stderr[-2000:]
    got = manifests(run, build_graph())
    assert set(got) == {"ingest", "separate", "source_qc", "split"}
    assert check_resume(run, build_graph(), {s: clean.manifests[s] for s in got},
                        before) == []


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_killing_only_the_runner_ends_its_workers_and_decoders(clean: Clean,
                                                               tmp_path: Path) -> None:
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "madbench_common.cli", "run", "--sources",
                             str(clean.sources), "--store", str(tmp_path / "store"),
                             "--run-id", "k", "--workers", "2", "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        helpers: set[int] = set()
        while len(helpers) < 3:  # two shard workers and at least one decoder server
            assert proc.poll() is None and time.monotonic() < deadline, "no workers seen"
            time.sleep(0.2)
            helpers = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # the runner alone, not its process group
        proc.wait()
        _when(lambda: not any(_alive(p) for p in helpers), timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
