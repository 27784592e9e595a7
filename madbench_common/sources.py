"""Source listings: a folder of videos or a CSV with ``path`` and optional metadata columns."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from madbench_common.errors import ConfigError
from madbench_common.store import S3Store

__all__ = ["VIDEO_EXTENSIONS", "SourceSpec", "fetch_source", "list_sources", "source_size"]

VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v")
_OPTIONAL = ("clip_id", "speaker", "gender", "source_group", "transcript", "scene_caption",
             "speech_stem", "env_stem")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class SourceSpec:
    """One requested source clip: where it is and what the user told us about it."""

    clip_id: str
    path: str
    """A local path or an ``s3://`` URI."""
    speaker: str = ""
    gender: str = ""
    source_group: str = ""
    transcript: str = ""
    scene_caption: str = ""
    speech_stem: str = ""
    env_stem: str = ""


def _clip_id(name: str) -> str:
    return _UNSAFE.sub("_", PurePosixPath(name).stem).strip("._") or "clip"


def _join(base: str, rel: str) -> str:
    if not rel or urlparse(rel).scheme in ("s3", "file") or rel.startswith("/"):
        return rel.removeprefix("file://")
    if base.startswith("s3://"):
        return f"{base.rstrip('/')}/{rel}"
    return str(Path(base) / rel)


def _read_text(uri: str) -> str:
    if uri.startswith("s3://"):
        parent, _, name = uri.rpartition("/")
        return S3Store(parent).get_bytes(name).decode("utf-8-sig")
    return Path(uri).read_text(encoding="utf-8-sig")


def _from_csv(uri: str) -> list[SourceSpec]:
    base = uri.rpartition("/")[0] if uri.startswith("s3://") else str(Path(uri).parent)
    reader = csv.DictReader(io.StringIO(_read_text(uri)))
    if not reader.fieldnames or "path" not in reader.fieldnames:
        raise ConfigError(f"{uri}: a sources CSV needs a 'path' column")
    specs = []
    for row in reader:
        fields = {k: (row.get(k) or "").strip() for k in _OPTIONAL}
        fields["clip_id"] = _UNSAFE.sub("_", fields["clip_id"]) or _clip_id(row["path"])
        for stem in ("speech_stem", "env_stem"):
            fields[stem] = _join(base, fields[stem])
        specs.append(SourceSpec(path=_join(base, row["path"].strip()), **fields))
    return specs


def _from_folder(uri: str) -> list[SourceSpec]:
    if uri.startswith("s3://"):
        store = S3Store(uri)
        names = [k for k in store.list() if k.lower().endswith(VIDEO_EXTENSIONS)]
        return [SourceSpec(_clip_id(n), f"{store.root}/{n}") for n in names]
    root = Path(uri)
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in VIDEO_EXTENSIONS)
    return [SourceSpec(_clip_id(p.name), str(p)) for p in files]


def list_sources(uri: str) -> list[SourceSpec]:
    """Specs for every source under ``uri`` (CSV or folder), in listing order."""
    uri = uri.removeprefix("file://")
    if uri.lower().endswith(".csv"):
        if not uri.startswith("s3://") and not Path(uri).is_file():
            raise ConfigError(f"sources {uri}: no such file")
        return _from_csv(uri)
    if uri.startswith("s3://") or Path(uri).is_dir():
        return _from_folder(uri)
    raise ConfigError(f"sources {uri!r}: not a CSV file or a folder of videos")


def source_size(path: str) -> int | None:
    """Bytes of a source without reading it (``None`` when it does not exist)."""
    if not path.startswith("s3://"):
        local = Path(path)
        return local.stat().st_size if local.is_file() else None
    parent, _, name = path.rpartition("/")
    return S3Store(parent).size(name)


def fetch_source(path: str, dest_dir: Path) -> Path:
    """A local path for ``path``: itself if local, else a download into ``dest_dir``."""
    if not path.startswith("s3://"):
        return Path(path)
    parent, _, name = path.rpartition("/")
    return S3Store(parent).get_file(name, dest_dir / name)
