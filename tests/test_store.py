"""Store: key confinement, atomic writes, checksums, and the S3 path on a real server."""

from __future__ import annotations

from pathlib import Path

import pytest

from madbench_common.errors import ChecksumError, ConfigError, StoreKeyError
from madbench_common.store import FileStore, RunStore, S3Store, check_key, open_store, sha256_bytes


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
    assert info.uri == f"{s3_uri}/r1/stage/x.bin"
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
