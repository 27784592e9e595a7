"""The paper's data sets on the cluster: DEMAND and EMIS, pinned, fetched once, read offline.

``madbench_common/data/paper_data.yaml`` lists each data set (licence, source, members to
unpack) and its files in the shape of ``weights.yaml``'s ``urls``, so the same pin writer
records their digests. ``madbench data fetch`` (the pods of ``workflows/data.yaml``)
downloads a data set's files, refuses one whose digest differs from the pin
(:class:`DataMismatch`) or an unpinned or unverified data set unless allowed
(:class:`UnpinnedData`), unpacks it and writes its lock; :data:`DATA_PATHS` are the
folders ``deaf.yaml``'s full profile reads. The commands and the volume's layout are in
the README (The data volume).
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError
from madbench_common.core.hashing import digest_mismatch, file_digest

__all__ = [
    "DATA_PATHS",
    "DATA_ROOT",
    "SPEC",
    "UNVERIFIED",
    "DataFile",
    "DataMismatch",
    "DataSpec",
    "Dataset",
    "UnpinnedData",
    "data_status",
    "fetch_dataset",
    "load_spec",
    "pin_data",
    "unpinned_reasons",
]

DATA_ROOT = "/data"
"""Where the ``madbench-data`` volume is mounted (read-write in data.yaml, read-only in
deaf.yaml)."""
DATA_PATHS = {"demand": f"{DATA_ROOT}/demand", "emis": f"{DATA_ROOT}/emis"}
"""The folder of each data set on the volume: what deaf.yaml's full profile names."""
SPEC = Path(__file__).resolve().parents[1] / "data" / "paper_data.yaml"
UNVERIFIED = "unverified"
"""A data set's ``licence`` until someone has read it at the source."""
_UNPINNED = "unpinned"
_SET_KEYS = frozenset({"title", "paper", "source", "licence", "extract"})
_FILE_KEYS = frozenset({"name", "dataset", "url", "sha256", "md5"})


class UnpinnedData(ConfigError):
    """A data set with unpinned files or an unverified licence, where pins are required."""


class DataMismatch(ConfigError):
    """A downloaded file is not the one ``paper_data.yaml`` pins (never retried: exit 3)."""


@dataclass(frozen=True)
class DataFile:
    """One downloadable file of a data set; ``sha256`` None while unpinned."""

    name: str
    dataset: str
    url: str
    sha256: str | None
    md5: str = ""


@dataclass(frozen=True)
class Dataset:
    """One data set: its licence and what of its archives is unpacked."""

    name: str
    title: str
    source: str
    licence: str
    extract: tuple[str, ...]
    files: tuple[DataFile, ...]
    paper: str = ""


@dataclass(frozen=True)
class DataSpec:
    path: Path
    datasets: dict[str, Dataset]

    def __getitem__(self, name: str) -> Dataset:
        try:
            return self.datasets[name]
        except KeyError:
            raise ConfigError(f"{self.path}: no data set {name!r}; data sets: "
                              f"{', '.join(self.datasets)}") from None


def _sha(value: Any, where: str) -> str | None:
    if value is None or value == _UNPINNED:
        return None
    if not isinstance(value, str) or len(value) != 64 or set(value) - set("0123456789abcdef"):
        raise ConfigError(f"{where}: sha256 needs 64 hex digits (quoted) or `{_UNPINNED}`")
    if value == "0" * 64:
        raise ConfigError(f"{where}: an all-zero sha256 is a placeholder; write "
                          f"`sha256: {_UNPINNED}` and pin it with madbench data pin")
    return value


def load_spec(path: str | os.PathLike[str] | None = None) -> DataSpec:
    """Parse ``paper_data.yaml`` strictly (unknown keys, unknown data sets are errors)."""
    where = Path(path or SPEC)
    doc = yaml.safe_load(where.read_text(encoding="utf-8")) or {}
    if doc.get("version") != 1 or set(doc) - {"version", "datasets", "urls"}:
        raise ConfigError(f"{where}: expected `version: 1`, `datasets` and `urls`")
    files: dict[str, list[DataFile]] = {}
    seen: set[str] = set()
    for d in doc.get("urls") or ():
        if not isinstance(d, dict) or set(d) - _FILE_KEYS or \
                not {"name", "dataset", "url"} <= set(d):
            raise ConfigError(f"{where}: entry {d!r}: needs name, dataset, url; allowed keys "
                              f"are {sorted(_FILE_KEYS)}")
        name = str(d["name"])
        if "/" in name or name in seen:
            raise ConfigError(f"{where}: {name!r}: a plain file name, listed once")
        md5 = str(d.get("md5") or "")
        if md5 and (len(md5) != 32 or set(md5) - set("0123456789abcdef")):
            raise ConfigError(f"{where}: {name}: md5 needs 32 hex digits")
        seen.add(name)
        files.setdefault(str(d["dataset"]), []).append(
            DataFile(name, str(d["dataset"]), str(d["url"]), _sha(d.get("sha256"),
                                                                  f"{where}: {name}"), md5))
    sets = {}
    for name, d in (doc.get("datasets") or {}).items():
        if not isinstance(d, dict) or set(d) - _SET_KEYS or "licence" not in d:
            raise ConfigError(f"{where}: data set {name!r}: needs a licence; allowed keys "
                              f"are {sorted(_SET_KEYS)}")
        sets[str(name)] = Dataset(str(name), str(d.get("title", "")), str(d.get("source", "")),
                                  str(d["licence"]), tuple(str(p) for p in d.get("extract", ())),
                                  tuple(files.pop(str(name), ())), str(d.get("paper", "")))
    if files:
        raise ConfigError(f"{where}: files of undeclared data sets {sorted(files)}")
    return DataSpec(where, sets)


def unpinned_reasons(dataset: Dataset) -> list[str]:
    """Why ``dataset`` may not be fetched without ``allow_unpinned`` (``[]``: it may)."""
    out = []
    if dataset.licence == UNVERIFIED:
        out.append(f"licence not established (read it at {dataset.source}, then record its "
                   "SPDX id as the data set's licence)")
    if not dataset.files:
        out.append("no files listed")
    out += [f"{f.name}: no sha256 recorded" for f in dataset.files if f.sha256 is None]
    return out


def data_status(spec: DataSpec | None = None) -> list[tuple[str, str]]:
    """(data set, reason) for everything not pinned."""
    spec = spec or load_spec()
    return [(d.name, why) for d in spec.datasets.values() for why in unpinned_reasons(d)]



def _download(item: DataFile, dest: Path, spec_path: Path) -> str:
    """``item`` at ``dest`` (kept if it is already the pinned file); its sha256."""
    if dest.exists() and item.sha256 is not None and \
            not digest_mismatch(dest, item.sha256, item.md5):
        return item.sha256
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=dest.parent, prefix=f".{item.name}.",
                                     delete=False) as tmp:
        try:
            with urllib.request.urlopen(item.url, timeout=600) as resp:
                shutil.copyfileobj(resp, tmp, 1 << 20)
        except BaseException:
            Path(tmp.name).unlink(missing_ok=True)  # a broken download leaves nothing
            raise
    why = digest_mismatch(Path(tmp.name), item.sha256, item.md5)
    if why:
        Path(tmp.name).unlink()
        raise DataMismatch(
            f"{item.dataset}/{item.name} from {item.url}: {why} pinned in {spec_path}; refused "
            "(nothing was kept: fetch again; if it persists, the upstream file changed: check "
            "it, then pin again with madbench data pin)")
    os.replace(tmp.name, dest)
    return item.sha256 or file_digest(dest)


def _safe_member(name: str) -> PurePosixPath | None:
    """The member's path if it stays inside the target (no absolute path, no ``..``)."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or name.endswith("/"):
        return None
    return path


def _unpack(archive: Path, target: Path, patterns: tuple[str, ...]) -> list[Path]:
    """Members of the zip ``archive`` matching ``patterns`` into ``target`` (a zip inside it
    is unpacked in turn: Zenodo's whole-record archive wraps the record's own zips); a file
    that is no zip is copied as it is. Returns the files written."""
    if not zipfile.is_zipfile(archive):
        shutil.copyfile(archive, target / archive.name)
        return [target / archive.name]
    written: list[Path] = []
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            rel = _safe_member(info.filename)
            if rel is None or not any(fnmatch.fnmatch(rel.as_posix(), p) for p in patterns):
                continue
            out = target.joinpath(*rel.parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            if out.suffix.lower() == ".zip" and zipfile.is_zipfile(out):
                written += _unpack(out, out.parent, patterns)
                out.unlink()
            else:
                written.append(out)
    return written


def fetch_dataset(name: str, dest: str | os.PathLike[str], *, allow_unpinned: bool = False,
                  spec: DataSpec | None = None) -> Path:
    """Download, check and unpack data set ``name`` under ``dest``; write and return its lock.

    Refuses (:class:`UnpinnedData`) a data set with unpinned files or an unverified licence
    unless ``allow_unpinned``; a file whose digest differs from its pin raises
    :class:`DataMismatch` naming it, and nothing of it is kept."""
    spec = spec or load_spec()
    dataset = spec[name]
    loose = unpinned_reasons(dataset)
    if loose and not allow_unpinned:
        raise UnpinnedData(
            f"data set {name} ({spec.path}) is not pinned: {'; '.join(loose)}. Pin it where "
            "the hosts are reachable with `madbench data pin` and commit the file, or fetch "
            "with --allow-unpinned (argo submit workflows/data.yaml -p allow_unpinned=true; "
            "recorded in the data set's lock)")
    root = Path(dest)
    target = root / name
    target.mkdir(parents=True, exist_ok=True)
    files = []
    for item in dataset.files:
        archive = root / "archives" / name / item.name
        sha = _download(item, archive, spec.path)
        members = _unpack(archive, target, dataset.extract or ("*",))
        if not members:
            raise ConfigError(f"{name}/{item.name}: no member matches {list(dataset.extract)}")
        files.append({"name": item.name, "url": item.url, "sha256": sha,
                      "sha256_pinned": item.sha256 is not None, "members": len(members)})
    lock = {"dataset": name, "title": dataset.title, "source": dataset.source,
            "licence": dataset.licence, "allow_unpinned": allow_unpinned, "unpinned": loose,
            "path": str(target), "files": files}
    path = root / "locks" / f"{name}.lock.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    return path


def pin_data(names: list[str] | None = None, *, update: bool = False,
             spec_path: str | os.PathLike[str] | None = None
             ) -> tuple[list[str], list[tuple[str, str]]]:
    """Download each unpinned file (every file with ``update``) of ``names`` (default: all),
    hash it and write the sha256s into ``paper_data.yaml`` in place. Returns (pinned,
    [(file, why)] left unpinned). A licence is never written: it is read by a person."""
    from madbench_common.models.weights import URLItem
    from madbench_common.models.weights_pin import hash_url, write_pins

    spec = load_spec(spec_path)
    pinned: dict[str, str] = {}
    failed: list[tuple[str, str]] = []
    for name in names or list(spec.datasets):
        for f in spec[name].files:
            if f.sha256 is not None and not update:
                continue
            try:
                pinned[f.name] = hash_url(URLItem(f.name, f.url, None, f.md5))
            except Exception as exc:  # reported, left unpinned
                failed.append((f.name, f"{type(exc).__name__}: {exc}"[:300]))
    if pinned:
        write_pins(spec.path, {}, pinned)
    return sorted(pinned), failed
