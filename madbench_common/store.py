"""Object store: one interface over the local file system and S3, scoped to a run prefix.

Every stage reads and writes through :class:`RunStore`, which confines keys to
``<store>/<run_id>/`` and verifies checksums on read. Writes are atomic on both
backends (rename on the file system; single PUT / completed multipart upload on S3).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from madbench_common.errors import ChecksumError, ConfigError, StoreKeyError
from madbench_common.types import Key, Uri

__all__ = [
    "FileStore",
    "ObjectInfo",
    "RunStore",
    "S3Store",
    "Store",
    "open_store",
    "sha256_bytes",
    "sha256_file",
]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_KEY_PART = re.compile(r"^[A-Za-z0-9._=+@,-]+$")
_MULTIPART_THRESHOLD = 64 * 1024 * 1024


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, streamed."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ObjectInfo:
    """What a write returns: where the object is and what it hashes to."""

    uri: Uri
    sha256: str
    size: int


def check_key(key: str) -> Key:
    """Return ``key`` normalised, or raise if it is absolute, empty or climbs out."""
    if not key or key.startswith("/") or "\\" in key:
        raise StoreKeyError(f"invalid object key {key!r}: must be relative and use '/'")
    parts = key.split("/")
    for part in parts:
        if part in ("", ".", "..") or not _KEY_PART.match(part):
            raise StoreKeyError(f"invalid object key {key!r}: bad component {part!r}")
    return posixpath.join(*parts)


class Store(ABC):
    """A flat key→bytes namespace under a root URI."""

    root: Uri

    @abstractmethod
    def put_bytes(self, key: Key, data: bytes) -> ObjectInfo:
        """Write ``data`` at ``key`` atomically."""

    @abstractmethod
    def put_file(self, key: Key, path: str | Path) -> ObjectInfo:
        """Copy a local file to ``key`` atomically."""

    @abstractmethod
    def _read(self, key: Key) -> tuple[bytes, str | None]:
        """Return the bytes at ``key`` and the sha256 recorded with them, if any."""

    @abstractmethod
    def exists(self, key: Key) -> bool:
        """Whether an object exists at ``key``."""

    @abstractmethod
    def list(self, prefix: Key = "") -> list[Key]:
        """Every key under ``prefix`` (recursive; the whole store if empty), sorted."""

    @abstractmethod
    def delete(self, key: Key) -> None:
        """Remove one object; missing objects are ignored."""

    @abstractmethod
    def uri(self, key: Key) -> Uri:
        """The absolute URI of ``key``."""

    def get_bytes(self, key: Key, sha256: str | None = None) -> bytes:
        """Read ``key``; verify against ``sha256`` or the checksum stored with the object."""
        data, recorded = self._read(check_key(key))
        expected = sha256 or recorded
        if expected is not None and sha256_bytes(data) != expected:
            raise ChecksumError(f"{self.uri(key)}: sha256 mismatch (expected {expected[:12]}…)")
        return data

    def get_file(self, key: Key, dest: str | Path, sha256: str | None = None) -> Path:
        """Read ``key`` into a local file (atomically) and return its path."""
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(dest, self.get_bytes(key, sha256))
        return dest


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()
"""What ``open(path, "w")`` would give: readable by other users (e.g. uid 10001 in an image
reading a store a host run wrote) unless the umask says otherwise."""


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)  # mkstemp makes 0600; artifacts are shared like any file
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileStore(Store):
    """A store on the local file system (``file:///abs/dir`` or a plain path)."""

    def __init__(self, root: str | Path) -> None:
        self.base = Path(root).expanduser().resolve()
        self.base.mkdir(parents=True, exist_ok=True)
        self.root = self.base.as_uri()

    def _path(self, key: Key) -> Path:
        return self.base / check_key(key)

    def put_bytes(self, key: Key, data: bytes) -> ObjectInfo:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, data)
        return ObjectInfo(self.uri(key), sha256_bytes(data), len(data))

    def put_file(self, key: Key, path: str | Path) -> ObjectInfo:
        return self.put_bytes(key, Path(path).read_bytes())

    def _read(self, key: Key) -> tuple[bytes, str | None]:
        path = self._path(key)
        if not path.is_file():
            raise FileNotFoundError(f"{self.uri(key)}: no such object")
        return path.read_bytes(), None

    def exists(self, key: Key) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: Key = "") -> list[Key]:
        top = self._path(prefix) if prefix else self.base
        if not top.is_dir():
            return []
        return sorted(
            p.relative_to(self.base).as_posix()
            for p in top.rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )

    def delete(self, key: Key) -> None:
        self._path(key).unlink(missing_ok=True)

    def uri(self, key: Key) -> Uri:
        return (self.base / key).as_uri()


class S3Store(Store):
    """A store on any S3-compatible server, via boto3.

    Endpoint, region and credentials come from the standard AWS environment
    variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, …) or profile; none
    are ever written to manifests or logs.
    """

    def __init__(self, uri: Uri, client: Any = None) -> None:
        parsed = urlparse(uri)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ConfigError(f"not an s3:// URI: {uri!r}")
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self.root = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.client = client or _s3_client()

    def _key(self, key: Key) -> str:
        key = check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_bytes(self, key: Key, data: bytes) -> ObjectInfo:
        digest = sha256_bytes(data)
        self.client.put_object(
            Bucket=self.bucket, Key=self._key(key), Body=data, Metadata={"sha256": digest}
        )
        return ObjectInfo(self.uri(key), digest, len(data))

    def put_file(self, key: Key, path: str | Path) -> ObjectInfo:
        size = os.path.getsize(path)
        if size < _MULTIPART_THRESHOLD:
            return self.put_bytes(key, Path(path).read_bytes())
        digest = sha256_file(path)
        self.client.upload_file(
            str(path), self.bucket, self._key(key), ExtraArgs={"Metadata": {"sha256": digest}}
        )
        return ObjectInfo(self.uri(key), digest, size)

    def _read(self, key: Key) -> tuple[bytes, str | None]:
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except self.client.exceptions.NoSuchKey as exc:
            raise FileNotFoundError(f"{self.uri(key)}: no such object") from exc
        return obj["Body"].read(), obj.get("Metadata", {}).get("sha256")

    def exists(self, key: Key) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:  # botocore ClientError: 404 / NoSuchKey
            if _is_not_found(exc):
                return False
            raise
        return True

    def list(self, prefix: Key = "") -> list[Key]:
        if prefix:
            full = self._key(prefix).rstrip("/") + "/"
        else:
            full = f"{self.prefix}/" if self.prefix else ""
        strip = len(self.prefix) + 1 if self.prefix else 0
        return sorted(key[strip:] for key in self._iter_keys(full))

    def _iter_keys(self, prefix: str) -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield item["Key"]

    def delete(self, key: Key) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def uri(self, key: Key) -> Uri:
        return f"{self.root}/{key}"


def _is_not_found(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    return code in ("404", "NoSuchKey", "NotFound")


def _s3_client() -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": 8, "mode": "adaptive"},
        s3={"addressing_style": os.environ.get("MADBENCH_S3_ADDRESSING", "path")},
    )
    return boto3.session.Session().client("s3", config=config)


def open_store(uri: str) -> Store:
    """Open ``file://…``, a plain local path, or ``s3://bucket/prefix``."""
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        return S3Store(uri)
    if parsed.scheme == "file":
        return FileStore(parsed.path)
    if parsed.scheme in ("", ) or (len(parsed.scheme) == 1 and os.name == "nt"):
        return FileStore(uri)
    raise ConfigError(f"unsupported store URI {uri!r}: use file://, a path, or s3://")


class RunStore:
    """A :class:`Store` confined to one run's prefix: ``<store>/<run_id>/``."""

    def __init__(self, store: Store, run_id: str) -> None:
        if not _RUN_ID.match(run_id):
            raise ConfigError(f"invalid run id {run_id!r}: use letters, digits, '.', '_', '-'")
        self.store = store
        self.run_id = run_id

    def _k(self, key: Key) -> Key:
        return f"{self.run_id}/{check_key(key)}"

    def put_bytes(self, key: Key, data: bytes) -> ObjectInfo:
        return self.store.put_bytes(self._k(key), data)

    def put_file(self, key: Key, path: str | Path) -> ObjectInfo:
        return self.store.put_file(self._k(key), path)

    def get_bytes(self, key: Key, sha256: str | None = None) -> bytes:
        return self.store.get_bytes(self._k(key), sha256)

    def get_file(self, key: Key, dest: str | Path, sha256: str | None = None) -> Path:
        return self.store.get_file(self._k(key), dest, sha256)

    def exists(self, key: Key) -> bool:
        return self.store.exists(self._k(key))

    def list(self, prefix: Key) -> list[Key]:
        strip = len(self.run_id) + 1
        return [k[strip:] for k in self.store.list(self._k(prefix))]

    def delete(self, key: Key) -> None:
        self.store.delete(self._k(key))

    def uri(self, key: Key) -> Uri:
        return self.store.uri(self._k(key))

    def key_of(self, uri: Uri) -> Key:
        """Inverse of :meth:`uri` for objects of this run; raises for foreign URIs."""
        head = self.store.uri(self.run_id) + "/"
        if not uri.startswith(head):
            raise StoreKeyError(f"{uri!r} is outside run prefix {head!r}")
        return check_key(uri[len(head):])
