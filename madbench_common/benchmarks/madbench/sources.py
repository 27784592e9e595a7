"""Source listings: a folder of videos or a CSV with ``path`` and optional metadata columns.

Everything a listing names is confined to its sources root (:func:`_resolve`); listings are
read through the media guard and an unusable row is quarantined alone with its reason
(:func:`read_listing`). :func:`listing_identity` is what ingest's fingerprint hashes: the
listing's bytes and the content of every file it names (sha256 of local files, the ETag
of S3 objects), never the text of the ``--sources`` argument.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import tempfile
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from madbench_common.core.errors import ConfigError, InputRejected
from madbench_common.core.store import S3Store, check_uri
from madbench_common.media.guard import MediaLimits, guarded_call
from madbench_common.media.listing import CsvRow, FolderEntry, printable

__all__ = [
    "MAX_CLIP_ID",
    "MAX_DERIVED_ID",
    "VIDEO_EXTENSIONS",
    "SourceListing",
    "SourceSpec",
    "bounded_id",
    "clip_id_of",
    "fetch_source",
    "id_key",
    "list_sources",
    "listing_identity",
    "local_sha256",
    "read_listing",
    "source_files",
    "source_size",
]

VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v")
MAX_CLIP_ID = 128
"""Characters of a clip id: with the suffixes later stages add, store keys stay well
under the 255 bytes a file name may have."""
MAX_DERIVED_ID = 160
"""Characters of an id built from clip ids (a component of one clip with another's
voice): :func:`bounded_id` keeps it, and the file names made from it, under the file
store's 255-byte name limit; S3 keys are the same, so both stores hold the same keys."""
_OPTIONAL = ("clip_id", "speaker", "gender", "source_group", "transcript", "scene_caption",
             "speech_stem", "env_stem")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PATH_MAX = getattr(os, "PATH_MAX", 4096)
_NAME_MAX = 255
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class SourceSpec:
    """One requested source clip: where it is and what the user told us about it."""

    clip_id: str
    path: str
    """Where to read it: a resolved local path or an ``s3://`` URI (empty if unusable)."""
    speaker: str = ""
    gender: str = ""
    source_group: str = ""
    transcript: str = ""
    scene_caption: str = ""
    speech_stem: str = ""
    env_stem: str = ""
    name: str = ""
    """How rows and messages name the file: as the listing spells it."""
    given_id: str = ""
    """The clip id as the listing spells it (its ``clip_id`` or, without one, the path)."""
    problem: str = ""
    """A reason code when the row cannot be ingested (its detail in :attr:`detail`)."""
    detail: str = ""

    @property
    def label(self) -> str:
        return self.name or self.path


@dataclass(frozen=True)
class SourceListing:
    """A listing read: its root, the sha256 of its bytes (or of a folder's names), specs."""

    uri: str
    root: str
    digest: str
    specs: list[SourceSpec] = field(default_factory=list)


# ---------------------------------------------------------------- locations


def clip_id_of(text: str, path: str = "") -> str:
    """The clip id a listing row gets (from its ``clip_id``, else its file name): what
    ingest stores, and what anything matching rows of a sources CSV to a run (the
    dataset card's licences) must compare against."""
    return _clip_id(text, path)[0]


def bounded_id(text: str, limit: int = MAX_DERIVED_ID) -> str:
    """``text`` if it has at most ``limit`` characters, else its first characters and a
    stable hash of all of it (``…_h<16 hex>``): distinct ids stay distinct, the same id
    is the same on every store and in every run."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:limit - 18]}_h{digest}"


def id_key(clip_id: str) -> str:
    """Two clip ids with one key are one on a case-insensitive file system: a collision."""
    return clip_id.casefold()


def _clip_id(text: str, fallback_path: str) -> tuple[str, str]:
    """A safe clip id from ``text`` (or the file name), and a problem if it is too long.
    Unicode is NFKC-normalised first, so one name in NFC or NFD (or full-width) form is
    one id; what is left outside ``[A-Za-z0-9._-]`` becomes ``_``."""
    raw = text or PurePosixPath(fallback_path.replace("\\", "/")).stem
    cid = _UNSAFE.sub("_", unicodedata.normalize("NFKC", raw)).strip("._") or "clip"
    if len(cid) <= MAX_CLIP_ID:
        return cid, ""
    short = f"{cid[:100]}_{hashlib.sha256(cid.encode()).hexdigest()[:12]}"
    return short, f"clip id of {len(cid)} characters > {MAX_CLIP_ID} ({cid[:40]}…)"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _locate(text: str, root: str) -> tuple[str, bool]:
    """(where ``text`` points, whether that is inside ``root``); raises
    :class:`InputRejected` for a location no reader supports."""
    if text.startswith("s3://"):
        uri = check_uri(text, "source")
        parsed = urlparse(uri)
        key = posixpath.normpath(parsed.path.lstrip("/"))
        location = f"s3://{parsed.netloc}/{key}"
        return location, root.startswith("s3://") and _inside(location, root)
    if text.startswith("file://"):
        parsed = urlparse(text)
        if parsed.netloc not in ("", "localhost") or parsed.query or parsed.fragment:
            raise InputRejected(text, "unsupported_location", "only file:///absolute/path")
        text = unquote(parsed.path)
    elif _SCHEME.match(text):
        raise InputRejected(text, "unsupported_location",
                            "sources are local paths or s3:// URIs")
    if root.startswith("s3://") and not os.path.isabs(text):
        bucket, _, prefix = root.removeprefix("s3://").partition("/")
        key = posixpath.normpath(posixpath.join(prefix, text))
        return f"s3://{bucket}/{key}", not key.startswith("../") and _inside(
            f"s3://{bucket}/{key}", root)
    real = os.path.realpath(os.path.join(root, text) if not root.startswith("s3://")
                            else text)
    return real, not root.startswith("s3://") and _inside(real, root)


def _shorten(text: str, keep: int = 100) -> str:
    return text if len(text) <= keep else f"{text[:keep // 2]}…{text[-keep // 2:]}"


def _check_length(text: str, location: str, what: str) -> None:
    """:class:`InputRejected` (``path_too_long``) for a local path the system cannot open:
    over ``PATH_MAX`` bytes, or with a component over ``NAME_MAX`` bytes."""
    raw = os.fsencode(location)
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if len(raw) >= _PATH_MAX or longest > _NAME_MAX:
        raise InputRejected(_shorten(text), "path_too_long",
                            f"{what} {_shorten(text)!r}: {len(raw)} bytes (limit "
                            f"{_PATH_MAX - 1}), longest name {longest} bytes (limit "
                            f"{_NAME_MAX}); shorten it")


def _resolve(text: str, root: str, allow_outside: bool, what: str) -> str:
    """The location of ``text`` (a ``what``) if it may be read, else :class:`InputRejected`.

    Everything a listing names is confined to its **sources root**: the CSV's folder (or
    the folder given), resolved with every symbolic link followed; on S3, the CSV's bucket
    and prefix (or the prefix given). A path that leaves it (``../``, an absolute path,
    ``file://``, a symbolic link pointing out, another bucket, or a local path in a CSV on
    S3) is ``outside_sources`` unless the run allows it (``--allow-outside-sources``,
    ingest parameter ``allow_outside_sources``)."""
    location, inside = _locate(text, root)
    if not location.startswith("s3://"):
        _check_length(text, location, what)
    if not inside and not allow_outside:
        raise InputRejected(text, "outside_sources",
                            f"{what} {text!r} is {location}, outside the sources root {root} "
                            "(--allow-outside-sources reads it anyway)")
    return location


# ---------------------------------------------------------------- listings


def _spec_from_fields(fields: dict[str, str], root: str, allow_outside: bool,
                      where: str) -> SourceSpec:
    opt = {k: (fields.get(k) or "").strip() for k in _OPTIONAL}
    text = (fields.get("path") or "").strip()
    given = opt.pop("clip_id")
    cid, too_long = _clip_id(given, text)
    spec = SourceSpec(cid, "", name=text, given_id=given or text, **opt)
    if too_long:
        return replace(spec, problem="bad_clip_id", detail=f"{where}: {too_long}")
    if not text:
        return replace(spec, problem="missing", detail=f"{where}: the path is empty")
    try:
        stems = {k: _resolve(opt[k], root, allow_outside, k) if opt[k] else ""
                 for k in ("speech_stem", "env_stem")}
        return replace(spec, path=_resolve(text, root, allow_outside, "path"), **stems)
    except InputRejected as exc:
        return replace(spec, problem=exc.reason, detail=f"{where}: {exc.detail}")


def _from_csv_rows(uri: str, root: str, rows: list[CsvRow], allow_outside: bool
                   ) -> list[SourceSpec]:
    """Specs of a CSV's rows; details name the CSV by its file name only, so the manifest
    is the same whichever path named the CSV."""
    csv_name = PurePosixPath(uri).name
    specs = []
    for row in rows:
        where = f"{csv_name} line {row.line}"
        if row.problem:
            cid, _ = _clip_id(row.fields.get("clip_id", ""), row.fields.get("path", "")
                              or f"line{row.line}")
            specs.append(SourceSpec(cid, "", name=row.fields.get("path", ""),
                                    problem=row.problem, detail=f"{csv_name} {row.detail}"))
            continue
        specs.append(_spec_from_fields(row.fields, root, allow_outside, where))
    return specs


def _read_csv(uri: str, limits: MediaLimits) -> tuple[str, str, list[CsvRow]]:
    """(root, sha256 of the bytes, rows) of a local or S3 CSV, parsed in the guarded child."""
    if uri.startswith("s3://"):
        parent, _, name = uri.rpartition("/")
        store = S3Store(parent)
        size = store.size(name)
        if size is None:
            raise ConfigError(f"sources {uri}: no such object")
        if size > limits.max_listing_bytes:
            raise ConfigError(f"sources {uri}: {size} bytes > {limits.max_listing_bytes}")
        with tempfile.TemporaryDirectory(prefix="mb-sources-") as tmp:
            local = store.get_file(name, Path(tmp) / "sources.csv")
            return (store.root, *_parse_csv(str(local), uri, limits))
    path = Path(uri)
    if not path.is_file():
        raise ConfigError(f"sources {uri}: " + ("not a regular file" if path.exists()
                                                 else "no such file"))
    return (os.path.realpath(path.parent), *_parse_csv(str(path), uri, limits))


def _parse_csv(path: str, uri: str, limits: MediaLimits) -> tuple[str, list[CsvRow]]:
    try:
        digest, _, rows = guarded_call("read_csv", (os.path.abspath(path), "path",
                                                    limits.max_sources,
                                                    limits.max_listing_bytes), limits, uri)
    except InputRejected as exc:
        raise ConfigError(f"sources {uri}: {exc.detail or exc.reason}") from None
    return str(digest), list(rows)


def _from_folder(uri: str, allow_outside: bool, limits: MediaLimits
                 ) -> tuple[str, str, list[SourceSpec]]:
    if uri.startswith("s3://"):
        store = S3Store(uri)
        names = [k for k in store.list() if k.lower().endswith(VIDEO_EXTENSIONS)]
        if len(names) > limits.max_sources:
            raise ConfigError(f"sources {uri}: more than {limits.max_sources} videos")
        specs = [_spec_from_fields({"path": n}, store.root, allow_outside, n) for n in names]
        return store.root, _digest_names(n.encode() for n in names), specs
    root = os.path.realpath(uri)
    try:
        entries: list[FolderEntry] = guarded_call(
            "walk_folder", (root, VIDEO_EXTENSIONS, limits.max_sources), limits, uri)
    except InputRejected as exc:
        raise ConfigError(f"sources {uri}: {exc.detail or exc.reason}") from None
    specs = [_folder_spec(e.relpath, root, allow_outside) for e in entries]
    return root, _digest_names(e.relpath for e in entries), specs


def _folder_spec(relpath: bytes, root: str, allow_outside: bool) -> SourceSpec:
    text = os.fsdecode(relpath)
    shown = printable(text)
    if shown != text:
        cid, _ = _clip_id("", shown.replace("\\", "_"))
        return SourceSpec(cid, "", name=shown, problem="bad_file_name",
                          detail=f"the file name \"{shown}\" is not UTF-8; rename it")
    return _spec_from_fields({"path": text}, root, allow_outside, text)


def _digest_names(names: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update(name + b"\0")
    return digest.hexdigest()


def read_listing(uri: str, allow_outside: bool = False, limits: MediaLimits | None = None
                 ) -> SourceListing:
    """Every source ``uri`` names (a CSV or a folder, local or on S3), in listing order.

    Read through the guarded child of :mod:`madbench_common.media.guard` (a CSV of at most
    ``max_listing_bytes``, a folder of at most ``max_sources`` entries); a row that cannot
    be used (bytes that are not UTF-8, a file name that is not, a clip id over
    :data:`MAX_CLIP_ID` characters, an unsupported location) comes with a reason code, so
    that row alone is quarantined."""
    limits = limits or MediaLimits()
    uri = check_uri(uri.strip(), "sources")
    uri = uri.removeprefix("file://")
    if uri.lower().endswith(".csv"):
        root, digest, rows = _read_csv(uri, limits)
        return SourceListing(uri, root, digest, _from_csv_rows(uri, root, rows, allow_outside))
    if uri.startswith("s3://") or Path(uri).is_dir():
        return SourceListing(uri, *_from_folder(uri, allow_outside, limits))
    raise ConfigError(f"sources {uri!r}: not a CSV file or a folder of videos")


def list_sources(uri: str, allow_outside: bool = False) -> list[SourceSpec]:
    """Specs for every source under ``uri`` (CSV or folder), in listing order."""
    return read_listing(uri, allow_outside).specs


# ---------------------------------------------------------------- content identity


_HASHES: dict[tuple[str, tuple[int, ...], int], str] = {}
"""sha256 of local files by (path, device, inode, size, mtime, ctime, size cap): in one
process a file is hashed once; any write to it changes its ctime, so a new key."""


def _stamp(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _hash_batch(todo: list[tuple[str, tuple[int, ...]]], limits: MediaLimits) -> None:
    size = sum(stamp[2] for _, stamp in todo)
    result: dict[str, str] = guarded_call(
        "hash_files", ([os.path.abspath(p) for p, _ in todo], limits.max_file_bytes), limits,
        "source files", timeout=limits.timeout + size / 20e6)
    if len(_HASHES) > 1 << 18:
        _HASHES.clear()
    for path, stamp in todo:
        _HASHES[(path, stamp, limits.max_file_bytes)] = result[os.path.abspath(path)]


def local_sha256(path: str, limits: MediaLimits) -> str:
    """sha256 of a local source file (read in the guarded child, memoised per process), or
    ``missing``, ``not_a_file``, ``too_large:<bytes>``, ``error:<errno>``."""
    stamp = _stamp(path)
    if stamp is None:
        return "missing"
    key = (path, stamp, limits.max_file_bytes)
    if key not in _HASHES:
        _hash_batch([(path, stamp)], limits)
    return _HASHES[key]


def _prefetch(locations: list[str], limits: MediaLimits) -> None:
    """Hash every local file not hashed yet, 256 to a guarded child."""
    todo = []
    for loc in dict.fromkeys(locations):
        stamp = None if loc.startswith("s3://") else _stamp(loc)
        if stamp is not None and (loc, stamp, limits.max_file_bytes) not in _HASHES:
            todo.append((loc, stamp))
    for start in range(0, len(todo), 256):
        _hash_batch(todo[start:start + 256], limits)


@lru_cache(maxsize=64)
def _s3_etags(prefix: str) -> dict[str, str]:
    """``s3://…/key → ETag`` of every object under ``prefix`` (one listing; per process)."""
    store = S3Store(prefix)
    return {f"{store.root}/{k}": e for k, e in store.list_etags().items()}


def _s3_etag(location: str) -> str:
    parent, _, name = location.rpartition("/")
    etag = S3Store(parent).etag(name)
    return etag or "missing"


def listing_identity(listing: SourceListing, limits: MediaLimits) -> dict[str, Any]:
    """What ingest's fingerprint hashes for ``listing``: its bytes' sha256 and, per row,
    the content identity of the source and its stems (never their path text)."""
    _s3_etags.cache_clear()  # a fresh S3 listing per fingerprint: objects may change
    files = [loc for s in listing.specs if not s.problem
             for loc in (s.path, s.speech_stem, s.env_stem) if loc]
    _prefetch(files, limits)
    rows = []
    for s in listing.specs:
        ids = [("" if not loc else _s3_identity(loc) if loc.startswith("s3://")
                else local_sha256(loc, limits)) for loc in (s.path, s.speech_stem, s.env_stem)]
        rows.append([s.clip_id, s.problem, *ids] if not s.problem else [s.clip_id, s.problem])
    return {"listing": listing.digest, "rows": rows}


def _s3_identity(location: str) -> str:
    parent = location.rpartition("/")[0]
    return _s3_etags(parent).get(location) or _s3_etag(location)


# ---------------------------------------------------------------- reading one source


def source_size(path: str) -> int | None:
    """Bytes of a source without reading it (``None`` when it does not exist)."""
    if not path.startswith("s3://"):
        local = Path(path)
        return local.stat().st_size if local.is_file() else None
    parent, _, name = path.rpartition("/")
    return S3Store(parent).size(name)


def fetch_source(path: str, dest_dir: Path, max_bytes: int | None = None) -> Path:
    """A local path for ``path``: itself if local, else a download into ``dest_dir`` (of
    at most ``max_bytes``)."""
    if not path.startswith("s3://"):
        return Path(path)
    parent, _, name = path.rpartition("/")
    dest = dest_dir / f"{hashlib.sha256(path.encode()).hexdigest()[:16]}.bin"
    try:
        return S3Store(parent).download(name, dest, max_bytes)
    except FileNotFoundError:
        raise InputRejected(path, "missing", "no such object") from None
    except ValueError as exc:
        raise InputRejected(path, "file_too_large", str(exc)) from None


def source_files(sources: str | None) -> list[str]:
    """What a stage in a container must read of a local sources listing: its root (CSV or
    folder) and every file its rows name (those outside the root included; ingest itself
    refuses them unless allowed). ``s3://`` or no sources: nothing to mount."""
    if not sources or sources.startswith("s3://"):
        return []
    root = str(Path(sources.removeprefix("file://")).resolve())
    files = [f for s in list_sources(root, allow_outside=True)
             for f in (s.path, s.speech_stem, s.env_stem)]
    return [root, *(f for f in files if f)]
