"""Object store: one interface over the local file system and S3, scoped to a run prefix.

Every stage reads and writes through :class:`RunStore`, which confines keys to
``<store>/<run_id>/`` and verifies checksums on read. Writes are atomic on both backends
(rename on the file system; single PUT / completed multipart upload on S3), and each object
records its sha256 (S3 metadata; a ``user.madbench.sha256`` extended attribute where the
file system has them), so damage is detected on every read. Runs are relocatable: the
store hands out **run-relative** references and resolves them at read time
(:meth:`RunStore.key_of`), so a run copied to another store reads and hashes the same.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import posixpath
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from madbench_common.core.errors import ChecksumError, ConfigError, StoreKeyError, StoreWriteError
from madbench_common.core.s3client import (
    call_s3,
    is_not_found,
    is_precondition_failed,
    make_s3_client,
    redact_uri,
)
from madbench_common.core.types import Key, Uri

__all__ = [
    "FileStore",
    "ObjectInfo",
    "RunStore",
    "S3Store",
    "Store",
    "check_key",
    "check_uri",
    "copy_run",
    "open_store",
    "sha256_bytes",
    "sha256_file",
]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_KEY_PART = re.compile(r"^[A-Za-z0-9._=+@,-]+$")
_MULTIPART_THRESHOLD = 64 * 1024 * 1024
_XATTR = "user.madbench.sha256"
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


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
    """What a write returns: a reference to the object and what it hashes to.

    From a :class:`RunStore`, ``uri`` is run-relative (store these in manifests);
    from a bare :class:`Store`, it is the absolute URI.
    """

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


def check_uri(uri: str, what: str = "store") -> str:
    """``uri`` if it can name a store or a sources location; :class:`ConfigError` if not.

    Refused (never silently dropped): credentials in it (``user:secret@``, or any ``@``
    before the path; the message never repeats them: endpoint and keys come from the
    standard AWS variables or a profile), a query string or a fragment of an ``s3://``
    or ``file://`` URI, an S3 bucket that is not a bucket name, and ``.``, ``..`` or
    empty segments in an S3 prefix.
    """
    parsed = urlparse(uri)
    shown = redact_uri(uri)
    if parsed.scheme not in ("s3", "file"):
        return uri
    if "@" in parsed.netloc or "@" in parsed.path or parsed.password is not None:
        raise ConfigError(f"{what} URI {parsed.scheme}://… (not shown: it holds an '@'): "
                          "credentials do not belong in a URI; set AWS_ACCESS_KEY_ID / "
                          "AWS_SECRET_ACCESS_KEY or a profile")
    if parsed.query or parsed.fragment or uri.endswith(("?", "#")):
        raise ConfigError(f"{what} URI {shown!r}: a query string or fragment names nothing "
                          "here; remove it")
    if parsed.scheme == "s3":
        if not _BUCKET.match(parsed.netloc):
            raise ConfigError(f"{what} URI {shown!r}: {parsed.netloc!r} is not a bucket name")
        parts = parsed.path.strip("/").split("/") if parsed.path.strip("/") else []
        if any(p in ("", ".", "..") for p in parts):
            raise ConfigError(f"{what} URI {shown!r}: '.', '..' and empty segments are not "
                              "allowed in an S3 prefix")
    return uri


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

    @abstractmethod
    def read_versioned(self, key: Key) -> tuple[bytes, str] | None:
        """The bytes at ``key`` and a version token, or ``None`` when absent."""

    @abstractmethod
    def put_if_absent(self, key: Key, data: bytes) -> str | None:
        """Create ``key`` only if it does not exist; the new version token, else ``None``."""

    @abstractmethod
    def put_if_match(self, key: Key, data: bytes, token: str) -> str | None:
        """Replace ``key`` only if it is still at version ``token``; new token, else ``None``."""

    @abstractmethod
    def delete_if_match(self, key: Key, token: str) -> bool:
        """Delete ``key`` only if it is still at version ``token``."""

    def get_bytes(self, key: Key, sha256: str | None = None) -> bytes:
        """Read ``key``; verify against ``sha256`` or the checksum stored with the object."""
        data, recorded = self._read(check_key(key))
        expected = sha256 or recorded
        if expected is not None:
            actual = sha256_bytes(data)
            if actual != expected:
                raise ChecksumError(f"{self.uri(key)}: sha256 mismatch (expected "
                                    f"{expected[:12]}…, read {actual[:12]}…)", key=key)
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


def _atomic_write(path: Path, data: bytes, digest: str | None = None) -> None:
    """Write a temporary file, fsync, record the sha256 xattr, rename over ``path``."""
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), _FILE_MODE)  # mkstemp makes 0600; artifacts are shared
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            if digest is not None:
                _set_xattr(fh.fileno(), digest)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        if exc.errno in _NO_SPACE:
            raise StoreWriteError(
                f"{path}: no space left on the device while writing {len(data)} bytes "
                f"({exc.strerror}); nothing was written under this name: free space "
                "and rerun, finished work is kept") from None
        raise
    except BaseException:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise


def _set_xattr(fd: int, digest: str) -> None:
    try:
        os.setxattr(fd, _XATTR, digest.encode())
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise
        # file systems without user xattrs: reads then verify against manifests only


def _get_xattr(path: Path) -> str | None:
    try:
        return os.getxattr(path, _XATTR).decode()
    except OSError:
        return None


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
        digest = sha256_bytes(data)
        _atomic_write(path, data, digest)
        return ObjectInfo(self.uri(key), digest, len(data))

    def put_file(self, key: Key, path: str | Path) -> ObjectInfo:
        return self.put_bytes(key, Path(path).read_bytes())

    def _read(self, key: Key) -> tuple[bytes, str | None]:
        path = self._path(key)
        if not path.is_file():
            raise FileNotFoundError(f"{self.uri(key)}: no such object")
        return path.read_bytes(), _get_xattr(path)

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

    @contextmanager
    def _guard(self, key: Key) -> Iterator[Path]:
        """An exclusive ``flock`` on a hidden sibling: conditional ops on one host are atomic."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / f".{path.name}.lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield path
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def read_versioned(self, key: Key) -> tuple[bytes, str] | None:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        return data, sha256_bytes(data)

    def put_if_absent(self, key: Key, data: bytes) -> str | None:
        with self._guard(key) as path:
            if path.exists():
                return None
            return self.put_bytes(key, data).sha256

    def put_if_match(self, key: Key, data: bytes, token: str) -> str | None:
        with self._guard(key) as path:
            if not path.exists() or sha256_file(path) != token:
                return None
            return self.put_bytes(key, data).sha256

    def delete_if_match(self, key: Key, token: str) -> bool:
        with self._guard(key) as path:
            if not path.exists() or sha256_file(path) != token:
                return False
            path.unlink()
            return True


class S3Store(Store):
    """A store on any S3-compatible server, via boto3.

    Endpoint, region and credentials come from the standard AWS environment
    variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, …) or profile; none
    are ever written to manifests or logs. Requests retry with adaptive backoff
    (:mod:`madbench_common.core.s3client`); conditional writes (``If-None-Match`` /
    ``If-Match``) implement the run lock.

    A store used across ``fork()`` (``madbench run``'s shard workers are forked from the
    runner, and inherit the stores it has opened) makes a new client in the child: a
    boto3 client keeps its connections open, and a child using the parent's sockets
    writes its requests on the same connection as its siblings and reads their replies
    (a 404 for an object that exists, a read that times out). A client passed in is
    used as it is.
    """

    def __init__(self, uri: Uri, client: Any = None) -> None:
        parsed = urlparse(check_uri(uri))
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ConfigError(f"not an s3:// URI: {redact_uri(uri)!r}")
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self.root = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self._own_client = client is None
        self._client = client or make_s3_client()
        self._pid = os.getpid()

    @property
    def client(self) -> Any:
        """This process's boto3 client (a new one after ``fork()``, see the class doc)."""
        if self._own_client and self._pid != os.getpid():
            self._client = make_s3_client()
            self._pid = os.getpid()
        return self._client

    def _key(self, key: Key) -> str:
        key = check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _put(self, key: Key, data: bytes, **cond: str) -> tuple[ObjectInfo, str]:
        digest = sha256_bytes(data)
        reply = call_s3(self.client, self.uri(key), self.client.put_object, Bucket=self.bucket,
                        Key=self._key(key), Body=data, Metadata={"sha256": digest}, **cond)
        return ObjectInfo(self.uri(key), digest, len(data)), str(reply.get("ETag", ""))

    def put_bytes(self, key: Key, data: bytes) -> ObjectInfo:
        return self._put(key, data)[0]

    def put_file(self, key: Key, path: str | Path) -> ObjectInfo:
        size = os.path.getsize(path)
        if size < _MULTIPART_THRESHOLD:
            return self.put_bytes(key, Path(path).read_bytes())
        digest = sha256_file(path)
        call_s3(self.client, self.uri(key), self.client.upload_file, Filename=str(path),
                Bucket=self.bucket, Key=self._key(key), ExtraArgs={"Metadata": {"sha256": digest}})
        return ObjectInfo(self.uri(key), digest, size)

    def _get(self, key: Key) -> tuple[bytes, dict[str, Any]]:
        """The object's bytes and its ``get_object`` reply. Reading the body is part of the
        request: a reply that stalls or breaks off mid-body is retried like any other
        transient failure, then a :class:`StoreUnavailable` naming the object."""
        client = self.client

        def fetch() -> tuple[bytes, dict[str, Any]]:
            obj: dict[str, Any] = client.get_object(Bucket=self.bucket, Key=self._key(key))
            return obj["Body"].read(), obj

        try:
            return call_s3(client, self.uri(key), fetch)
        except Exception as exc:
            if is_not_found(exc):
                raise FileNotFoundError(f"{self.uri(key)}: no such object") from None
            raise

    def _read(self, key: Key) -> tuple[bytes, str | None]:
        data, obj = self._get(key)
        return data, obj.get("Metadata", {}).get("sha256")

    def size(self, key: Key) -> int | None:
        """Bytes of ``key`` from its metadata (``None`` when absent)."""
        try:
            head = call_s3(self.client, self.uri(key), self.client.head_object,
                           Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:  # botocore ClientError: 404 / NoSuchKey
            if is_not_found(exc):
                return None
            raise
        return int(head.get("ContentLength", 0))

    def exists(self, key: Key) -> bool:
        return self.size(key) is not None

    def etag(self, key: str) -> str | None:
        """The ETag of ``key`` (any object name, not only a store key), ``None`` if absent."""
        try:
            head = call_s3(self.client, f"{self.root}/{key}", self.client.head_object,
                           Bucket=self.bucket, Key=self._raw_key(key))
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise
        return str(head.get("ETag", "")).strip('"')

    def _raw_key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def download(self, key: str, dest: Path, max_bytes: int | None = None) -> Path:
        """Stream object ``key`` (any object name) to ``dest``; ``ValueError`` past
        ``max_bytes`` (nothing is kept), ``FileNotFoundError`` if absent."""
        def fetch() -> Path:
            try:
                obj = self.client.get_object(Bucket=self.bucket, Key=self._raw_key(key))
            except Exception as exc:
                if is_not_found(exc):
                    raise FileNotFoundError(f"{self.root}/{key}: no such object") from None
                raise
            dest.parent.mkdir(parents=True, exist_ok=True)
            total = 0
            with open(dest, "wb") as out:
                for chunk in obj["Body"].iter_chunks(1 << 20):
                    total += len(chunk)
                    if max_bytes is not None and total > max_bytes:
                        out.close()
                        dest.unlink()
                        raise ValueError(f"{self.root}/{key}: more than {max_bytes} bytes")
                    out.write(chunk)
            return dest

        return call_s3(self.client, f"{self.root}/{key}", fetch)

    def list(self, prefix: Key = "") -> list[Key]:
        return sorted(self.list_etags(prefix))

    def list_etags(self, prefix: Key = "") -> dict[Key, str]:
        """``key → ETag`` of every object under ``prefix`` (one paginated listing)."""
        if prefix:
            full = self._key(prefix).rstrip("/") + "/"
        else:
            full = f"{self.prefix}/" if self.prefix else ""
        strip = len(self.prefix) + 1 if self.prefix else 0
        items = call_s3(self.client, f"{self.root}/{prefix}", lambda: list(self._iter_keys(full)))
        return {key[strip:]: etag for key, etag in items}

    def _iter_keys(self, prefix: str) -> Iterator[tuple[str, str]]:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield item["Key"], str(item.get("ETag", "")).strip('"')

    def delete(self, key: Key) -> None:
        call_s3(self.client, self.uri(key), self.client.delete_object, Bucket=self.bucket,
                Key=self._key(key))

    def uri(self, key: Key) -> Uri:
        return f"{self.root}/{key}"

    def read_versioned(self, key: Key) -> tuple[bytes, str] | None:
        try:
            data, obj = self._get(key)
        except FileNotFoundError:
            return None
        return data, str(obj["ETag"])

    def _conditional(self, key: Key, data: bytes, **cond: str) -> str | None:
        try:
            return self._put(key, data, **cond)[1]
        except Exception as exc:
            if is_precondition_failed(exc) or is_not_found(exc):
                return None
            raise

    def put_if_absent(self, key: Key, data: bytes) -> str | None:
        return self._conditional(key, data, IfNoneMatch="*")

    def put_if_match(self, key: Key, data: bytes, token: str) -> str | None:
        return self._conditional(key, data, IfMatch=token)

    def delete_if_match(self, key: Key, token: str) -> bool:
        try:
            call_s3(self.client, self.uri(key), self.client.delete_object, Bucket=self.bucket,
                    Key=self._key(key), IfMatch=token)
        except Exception as exc:
            if is_precondition_failed(exc) or is_not_found(exc):
                return False
            raise
        return True


def open_store(uri: str) -> Store:
    """Open ``file://…``, a plain local path, or ``s3://bucket/prefix`` (see :func:`check_uri`
    for what is refused)."""
    parsed = urlparse(check_uri(uri))
    if parsed.scheme == "s3":
        return S3Store(uri)
    if parsed.scheme == "file":
        return FileStore(parsed.path)
    if parsed.scheme in ("", ) or (len(parsed.scheme) == 1 and os.name == "nt"):
        return FileStore(uri)
    raise ConfigError(f"unsupported store URI {redact_uri(uri)!r}: use file://, a path, "
                      "or s3://")


class RunStore:
    """A :class:`Store` confined to one run's prefix: ``<store>/<run_id>/``."""

    def __init__(self, store: Store, run_id: str) -> None:
        if not _RUN_ID.match(run_id):
            raise ConfigError(f"invalid run id {run_id!r}: use letters, digits, '.', '_', '-'")
        self.store = store
        self.run_id = run_id

    def _k(self, key: Key) -> Key:
        return f"{self.run_id}/{check_key(key)}"

    def _info(self, key: Key, info: ObjectInfo) -> ObjectInfo:
        return ObjectInfo(check_key(key), info.sha256, info.size)

    def put_bytes(self, key: Key, data: bytes) -> ObjectInfo:
        """Write ``data``; the returned ``uri`` is the run-relative reference."""
        return self._info(key, self.store.put_bytes(self._k(key), data))

    def put_file(self, key: Key, path: str | Path) -> ObjectInfo:
        return self._info(key, self.store.put_file(self._k(key), path))

    def get_bytes(self, key: Key, sha256: str | None = None) -> bytes:
        try:
            return self.store.get_bytes(self._k(key), sha256)
        except ChecksumError as exc:
            raise ChecksumError(str(exc), key=check_key(key)) from None

    def get_file(self, key: Key, dest: str | Path, sha256: str | None = None) -> Path:
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(dest, self.get_bytes(key, sha256))
        return dest

    def exists(self, key: Key) -> bool:
        return self.store.exists(self._k(key))

    def list(self, prefix: Key = "") -> list[Key]:
        strip = len(self.run_id) + 1
        return [k[strip:] for k in self.store.list(self._k(prefix) if prefix else self.run_id)]

    def delete(self, key: Key) -> None:
        self.store.delete(self._k(key))

    def read_versioned(self, key: Key) -> tuple[bytes, str] | None:
        return self.store.read_versioned(self._k(key))

    def put_if_absent(self, key: Key, data: bytes) -> str | None:
        return self.store.put_if_absent(self._k(key), data)

    def put_if_match(self, key: Key, data: bytes, token: str) -> str | None:
        return self.store.put_if_match(self._k(key), data, token)

    def delete_if_match(self, key: Key, token: str) -> bool:
        return self.store.delete_if_match(self._k(key), token)

    def uri(self, key: Key) -> Uri:
        """The absolute URI of ``key`` in this store (for messages and users, not manifests)."""
        return self.store.uri(self._k(key))

    def key_of(self, ref: Uri) -> Key:
        """The key of a reference to an object of this run.

        Accepts a run-relative reference (what :meth:`put_bytes` returns), an absolute
        URI under this run in this store, or an absolute URI of the same run in
        another store (manifests written before references became relative, or a run
        copied from elsewhere): its path after the last ``/<run_id>/`` segment.
        """
        if "://" not in ref:
            return check_key(ref)
        head = self.store.uri(self.run_id) + "/"
        if ref.startswith(head):
            return check_key(ref[len(head):])
        parsed = urlparse(ref)
        marker = f"/{self.run_id}/"
        if parsed.scheme in ("file", "s3") and marker in parsed.path:
            return check_key(parsed.path.rsplit(marker, 1)[1])
        raise StoreKeyError(f"{ref!r} is not an object of run {self.run_id!r}")


def copy_run(src: RunStore, dst: RunStore) -> int:
    """Copy every object of ``src`` to ``dst`` (checksum-verified); returns the count.

    The run lock is not copied. Manifests hold run-relative references, so the
    copy is a complete run wherever it lives.
    """
    count = 0
    for key in src.list():
        if key == "_LOCK":
            continue
        dst.put_bytes(key, src.get_bytes(key))
        count += 1
    return count
