"""Store: key confinement, atomic writes, checksums, relocatable references, disk full,
conditional writes, and the S3 path on a real server."""

from __future__ import annotations

import errno
import multiprocessing
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from madbench_common.core.errors import (
    ChecksumError,
    ConfigError,
    StoreKeyError,
    StoreUnavailable,
    StoreWriteError,
)
from madbench_common.core.store import (
    FileStore,
    RunStore,
    S3Store,
    Store,
    check_key,
    copy_run,
    open_store,
    sha256_bytes,
)
from madbench_common.testing import S3FaultProxy, SeaweedS3, free_port


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a//b", "./a", "a\\b", "..", "a/b/",
                                 "a/ b"])
def test_bad_keys_are_refused(key: str) -> None:
    with pytest.raises(StoreKeyError):
        check_key(key)


def test_run_store_confines_keys(tmp_path: Path) -> None:
    run = RunStore(FileStore(tmp_path), "r1")
    info = run.put_bytes("ingest/x.bin", b"abc")
    assert (tmp_path / "r1" / "ingest" / "x.bin").read_bytes() == b"abc"
    assert info.sha256 == sha256_bytes(b"abc")
    with pytest.raises(StoreKeyError):
        run.put_bytes("../r2/x", b"no")
    with pytest.raises(StoreKeyError):
        run.key_of((tmp_path / "r2" / "x").as_uri())
    assert run.key_of(info.uri) == "ingest/x.bin"
    with pytest.raises(ConfigError):
        RunStore(FileStore(tmp_path), "../escape")


def test_file_store_roundtrip_and_checksum(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    info = store.put_bytes("a/b.bin", b"payload")
    assert store.get_bytes("a/b.bin", info.sha256) == b"payload"
    (tmp_path / "a" / "b.bin").write_bytes(b"tampered")
    with pytest.raises(ChecksumError, match=r"b\.bin"):
        store.get_bytes("a/b.bin", info.sha256)
    assert store.list("a") == ["a/b.bin"]
    store.delete("a/b.bin")
    assert not store.exists("a/b.bin")
    with pytest.raises(FileNotFoundError):
        store.get_bytes("a/b.bin")


def test_file_store_files_get_the_usual_permissions(tmp_path: Path) -> None:
    """Atomic writes go through mkstemp (0600); the file must end as open() would make it,
    so another uid (an image reading a store a host run wrote) can read it."""
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    FileStore(tmp_path).put_bytes("a/b.bin", b"x")
    assert (tmp_path / "a" / "b.bin").stat().st_mode & 0o777 == 0o666 & ~mask


def test_file_store_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileStore(tmp_path)
    store.put_bytes("k", b"old")

    def boom(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError):
        store.put_bytes("k", b"new")
    assert store.get_bytes("k") == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["k"]  # no temp file left behind


def test_open_store_schemes(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path)), FileStore)
    assert isinstance(open_store(tmp_path.as_uri()), FileStore)
    with pytest.raises(ConfigError):
        open_store("gs://bucket/x")


@pytest.mark.s3
def test_s3_roundtrip(s3_uri: str) -> None:
    store = open_store(s3_uri)
    assert isinstance(store, S3Store)
    run = RunStore(store, "r1")
    info = run.put_bytes("stage/x.bin", b"hello")
    assert info.uri == "stage/x.bin"  # run-relative: the run can move
    assert run.uri(info.uri) == f"{s3_uri}/r1/stage/x.bin"
    assert run.get_bytes("stage/x.bin", info.sha256) == b"hello"
    assert run.exists("stage/x.bin") and not run.exists("stage/y.bin")
    assert run.list("stage") == ["stage/x.bin"]
    run.delete("stage/x.bin")
    assert run.list("stage") == []


@pytest.mark.s3
def test_s3_checksum_metadata_is_verified(s3_uri: str, tmp_path: Path) -> None:
    store = S3Store(s3_uri)
    store.client.put_object(Bucket=store.bucket, Key=f"{store.prefix}/bad", Body=b"x",
                            Metadata={"sha256": "0" * 64})
    with pytest.raises(ChecksumError):
        store.get_bytes("bad")
    big = tmp_path / "big.bin"
    big.write_bytes(b"z" * 1000)
    info = store.put_file("big", big)
    assert store.get_file("big", tmp_path / "back.bin", info.sha256).read_bytes() == b"z" * 1000


def _read_in_child(store: Store) -> None:
    """A forked child (as a runner's shard worker is): read what the parent wrote."""
    os._exit(0 if store.get_bytes("a") == b"parent" else 1)


@pytest.mark.s3
def test_s3_store_used_across_fork_opens_its_own_connections(
        s3_server: SeaweedS3, s3_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked from a process that used the store (``madbench run``'s shard workers)
    must not reuse the parent's keep-alive connections: two processes writing requests on
    one socket read each other's replies (a 404 for a marker that exists: a resume on S3
    died with ``FileNotFoundError: …/ingest/_SUCCESS: no such object``; or a read timeout)."""
    with S3FaultProxy(s3_server.endpoint, every=0) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        store = open_store(s3_uri)
        store.put_bytes("a", b"parent")
        assert store.get_bytes("a") == b"parent"  # the connection stays open, idle
        before = len(proxy.connections)
        parents = {port for port, _, _ in proxy.connections}
        child = multiprocessing.get_context("fork").Process(target=_read_in_child,
                                                              args=(store,))
        child.start()
        child.join(60)
        assert child.exitcode == 0
        ports = {port for port, _, _ in proxy.connections[before:]}
        assert ports and not ports & parents, proxy.connections
        assert store.get_bytes("a") == b"parent"  # the parent's own connection still works


class _StalledBody:
    def read(self) -> bytes:
        from botocore.exceptions import ReadTimeoutError

        raise ReadTimeoutError(endpoint_url="None")


class _StallingClient:
    """get_object answers, then the body times out (a server that stalls mid-reply)."""

    class meta:
        endpoint_url = "http://127.0.0.1:9"

    def get_object(self, **kw: object) -> dict[str, object]:
        return {"Body": _StalledBody(), "Metadata": {}, "ETag": '"x"'}


def test_a_body_read_that_times_out_is_a_store_error_naming_the_object(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the reply's body is part of the request: retried through the outage window,
    then a :class:`StoreUnavailable` (exit 75) naming the object, never a raw botocore
    ``ReadTimeoutError`` (which ended a resume in a traceback)."""
    monkeypatch.setenv("MADBENCH_S3_OUTAGE_SECONDS", "0")
    run = RunStore(S3Store("s3://madbench/p", client=_StallingClient()), "r")
    for read in (lambda: run.get_bytes("ingest/_SUCCESS"),
                 lambda: run.read_versioned("ingest/_SUCCESS")):
        with pytest.raises(StoreUnavailable, match=r"s3://madbench/p/r/ingest/_SUCCESS"):
            read()


# ------------------------------------------------------------------ relocatable references


def test_run_references_are_relative_and_resolve_from_any_store(tmp_path: Path) -> None:
    run = RunStore(FileStore(tmp_path / "a"), "r1")
    info = run.put_bytes("ingest/f/x.wav", b"abc")
    assert info.uri == "ingest/f/x.wav"
    assert run.key_of(info.uri) == "ingest/f/x.wav"
    assert run.key_of(run.uri("ingest/f/x.wav")) == "ingest/f/x.wav"
    # an absolute URI written by an older run of the same id in another store
    assert run.key_of("file:///old/store/r1/ingest/f/x.wav") == "ingest/f/x.wav"
    assert run.key_of("s3://bucket/runs/r1/ingest/f/x.wav") == "ingest/f/x.wav"
    for foreign in ("file:///old/store/r2/ingest/x.wav", "http://h/r1/x", "../r2/x"):
        with pytest.raises(StoreKeyError):
            run.key_of(foreign)


def test_copy_run_moves_every_object_but_the_lock(tmp_path: Path) -> None:
    src = RunStore(FileStore(tmp_path / "a"), "r")
    for key in ("s/x.bin", "s/y/z.bin", "_LOCK"):
        src.put_bytes(key, key.encode())
    dst = RunStore(FileStore(tmp_path / "b"), "r")
    assert copy_run(src, dst) == 2
    assert dst.list() == ["s/x.bin", "s/y/z.bin"]
    assert dst.get_bytes("s/y/z.bin") == b"s/y/z.bin"


# ------------------------------------------------------------------ damage and disk full


def test_file_store_detects_damage_without_a_manifest_checksum(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.put_bytes("m/_SUCCESS", b'{"rows": 1}')
    path = tmp_path / "m" / "_SUCCESS"
    if not _has_xattr(path):
        pytest.skip("this file system keeps no user xattrs")
    with open(path, "r+b") as fh:  # flip a byte in place, as bit rot would
        fh.write(b"[")
    with pytest.raises(ChecksumError, match=r"m/_SUCCESS: sha256 mismatch") as err:
        store.get_bytes("m/_SUCCESS")
    assert err.value.key == "m/_SUCCESS"


def _has_xattr(path: Path) -> bool:
    try:
        os.getxattr(path, "user.madbench.sha256")
    except OSError:
        return False
    return True


def test_disk_full_is_a_clear_error_and_leaves_no_partial_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileStore(tmp_path)
    store.put_bytes("k", b"old")
    real_fsync = os.fsync

    def full(fd: int) -> None:  # the write path's flush hits ENOSPC
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("os.fsync", full)
    with pytest.raises(StoreWriteError, match="no space left") as err:
        store.put_bytes("new", b"x" * 1000)
    assert err.value.exit_code == 75
    monkeypatch.setattr("os.fsync", real_fsync)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted for the test (needs root and mount rights)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_on_a_real_small_file_system(tiny_fs: Path) -> None:
    store = FileStore(tiny_fs)
    store.put_bytes("a/small", b"x" * 1000)
    with pytest.raises(StoreWriteError, match=r"a/big.*no space left"):
        store.put_bytes("a/big", os.urandom(2 << 20))
    assert sorted(p.name for p in (tiny_fs / "a").iterdir()) == ["small"]
    assert store.get_bytes("a/small") == b"x" * 1000


# ------------------------------------------------------------------ conditional writes


def _conditional_ops(store: Store) -> None:
    token = store.put_if_absent("lock", b"one")
    assert token is not None
    assert store.put_if_absent("lock", b"two") is None
    data, seen = store.read_versioned("lock") or (b"", "")
    assert data == b"one" and seen == token
    new = store.put_if_match("lock", b"three", token)
    assert new is not None and new != token
    assert store.put_if_match("lock", b"four", token) is None  # stale version loses
    assert not store.delete_if_match("lock", token)
    assert store.delete_if_match("lock", new)
    assert store.read_versioned("lock") is None


def test_file_store_conditional_writes(tmp_path: Path) -> None:
    _conditional_ops(FileStore(tmp_path))


@pytest.mark.s3
def test_s3_conditional_writes(s3_uri: str) -> None:
    _conditional_ops(S3Store(s3_uri))


# ---------------------------------------------------------------- URIs and outages


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import sys

    closed = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}", "AWS_ACCESS_KEY_ID": "x",
              "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "us-east-1",
              "MADBENCH_S3_MAX_ATTEMPTS": "1", "MADBENCH_S3_OUTAGE_SECONDS": "0"}
    return subprocess.run([sys.executable, "-m", "madbench_common.cli", *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **closed, **(env or {})})


@pytest.mark.parametrize(("uri", "words"), [
    ("s3://madbench/runs/../other", "'..'"),
    ("s3://madbench/./runs", "'.'"),
    ("s3://madbench/runs?versionId=3", "query string"),
    ("s3://madbench/runs#frag", "query string"),
    ("file:///tmp/runs?x=1", "query string"),
])
def test_bad_store_uris_are_configuration_errors(uri: str, words: str) -> None:
    """Refused at once with exit 3 (never retried as transient, never silently cut)."""
    done = _cli("status", "--store", uri, "--run-id", "r")
    assert done.returncode == 3, done.stderr[-1000:]
    assert words in done.stderr


def test_credentials_in_a_store_uri_are_refused_and_never_echoed() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzEXAMPLEKEY"
    for uri in (f"s3://AKIAIOSFODNN7EXAMPLE:{secret}@madbench/runs",
                f"s3://madbench/runs@AKIAIOSFODNN7EXAMPLE:{secret}"):
        done = _cli("status", "--store", uri, "--run-id", "r")
        assert done.returncode == 3, done.stderr[-1000:]
        assert "credentials do not belong in a URI" in done.stderr
        assert secret not in done.stdout + done.stderr
        assert "wJalr" not in done.stdout + done.stderr


def test_an_s3_outage_is_ridden_out_for_a_stated_time() -> None:
    """The window is seconds (MADBENCH_S3_OUTAGE_SECONDS), not attempts: a server that
    never answers is retried for that long, then exit 75 says so."""
    import time

    start = time.monotonic()
    done = _cli("status", "--store", "s3://madbench/runs", "--run-id", "r",
                env={"MADBENCH_S3_OUTAGE_SECONDS": "4"})
    seconds = time.monotonic() - start
    assert done.returncode == 75, done.stderr[-1000:]
    assert seconds >= 4, seconds
    assert "a run rides out 4 s" in done.stderr


def test_outage_window_setting_is_checked() -> None:
    done = _cli("status", "--store", "s3://madbench/runs", "--run-id", "r",
                env={"MADBENCH_S3_OUTAGE_SECONDS": "soon"})
    assert done.returncode == 3 and "MADBENCH_S3_OUTAGE_SECONDS" in done.stderr
