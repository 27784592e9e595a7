"""Reading source listings and hashing source files: what runs inside the guarded child.

These functions read bytes from outside (a sources CSV, a folder's names, the files a
listing names); :mod:`madbench_common.media.guard` runs them in its forked,
address-space-capped child with a wall-clock timeout, as it does the decoders. They
raise ``ValueError`` for a listing that cannot be used as a whole; what is wrong with
one row is returned with that row (``problem``), so the row alone is quarantined.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CsvRow", "FolderEntry", "allow_fields", "hash_files", "parse_csv", "printable",
           "read_csv", "walk_folder"]

_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


@dataclass(frozen=True)
class CsvRow:
    """One data row of a sources CSV: its line number, fields, and what is wrong with it."""

    line: int
    fields: dict[str, str]
    problem: str = ""
    """A reason code (``bad_encoding``) when the row cannot be used; empty if it can."""
    detail: str = ""


@dataclass(frozen=True)
class FolderEntry:
    """A video file found under a sources folder."""

    relpath: bytes
    """Path relative to the folder, as the file system spells it (any bytes)."""
    symlink: bool


def printable(text: str) -> str:
    """``text`` with undecodable bytes (surrogate escapes) and NULs shown as ``\\xNN``."""
    raw = text.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")


def _bad(text: str) -> bool:
    return "\x00" in text or any("\udc80" <= ch <= "\udcff" for ch in text)


def read_csv(path: str, required: str, max_rows: int, max_bytes: int
             ) -> tuple[str, list[str], list[CsvRow]]:
    """sha256, header and rows of the CSV file at ``path`` (a regular file of at most
    ``max_bytes``; see :func:`parse_csv`)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    info = os.fstat(fd)  # before fdopen: opening a folder's descriptor raises there
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ValueError("not a regular file")
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > max_bytes:
            raise ValueError(f"{info.st_size} bytes > {max_bytes} bytes")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"more than {max_bytes} bytes")
    return (hashlib.sha256(data).hexdigest(), *parse_csv(data, required, max_rows))


def parse_csv(data: bytes, required: str, max_rows: int) -> tuple[list[str], list[CsvRow]]:
    """Header and rows of a CSV; a row with bytes that are not UTF-8 (or a NUL) is
    returned with problem ``bad_encoding`` and its fields made printable."""
    text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    allow_fields(len(text))
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None or _bad(",".join(header)):
            raise ValueError("the header row is missing or not UTF-8 text")
        header = [h.strip() for h in header]
        if required not in header:
            raise ValueError(f"a sources CSV needs a {required!r} column (has "
                             f"{', '.join(map(repr, header[:20]))})")
        rows: list[CsvRow] = []
        for values in reader:
            if not any(v.strip() for v in values):
                continue
            if len(rows) >= max_rows:
                raise ValueError(f"more than {max_rows} rows")
            rows.append(_row(reader.line_num, header, values))
    except csv.Error as exc:
        raise ValueError(f"line {reader.line_num}: {exc}") from None
    return header, rows


def _row(line: int, header: list[str], values: list[str]) -> CsvRow:
    fields = {h: v.strip() for h, v in zip(header, values)}
    bad = [h for h, v in fields.items() if _bad(v)]
    if not bad:
        return CsvRow(line, fields)
    shown = {h: printable(v) for h, v in fields.items()}
    return CsvRow(line, shown, "bad_encoding",
                  f"line {line}: column(s) {', '.join(bad)} are not UTF-8 text "
                  f"(e.g. \"{shown[bad[0]][:80]}\"); save the CSV as UTF-8")


def allow_fields(chars: int) -> None:
    """Let the ``csv`` module read a field of up to ``chars`` characters (its default stops
    at 131,072: a megabyte transcript is a valid field, and the listing's size is already
    bounded). Only ever raises the process-wide limit, never lowers it."""
    wanted = min(max(chars, 1 << 17), (1 << 31) - 1)
    if csv.field_size_limit() < wanted:
        csv.field_size_limit(wanted)


def walk_folder(root: str, extensions: Sequence[str], max_entries: int) -> list[FolderEntry]:
    """Video files under ``root`` (by extension, any case), sorted; symbolic links to
    folders are not followed (no loops), links to files are reported as such."""
    base = os.fsencode(root)
    exts = tuple(e.encode() for e in extensions)
    found, seen = [], 0
    for top, dirs, files in os.walk(base, followlinks=False):
        dirs.sort()
        seen += len(dirs) + len(files)
        if seen > max_entries:
            raise ValueError(f"more than {max_entries} entries under the folder")
        for name in sorted(files):
            if name.lower().endswith(exts):
                full = os.path.join(top, name)
                found.append(FolderEntry(os.path.relpath(full, base), os.path.islink(full)))
    return sorted(found, key=lambda e: e.relpath)


def hash_files(paths: Sequence[str], max_bytes: int) -> dict[str, str]:
    """``path → sha256`` of regular files; ``path → "<problem>"`` (``missing``,
    ``not_a_file``, ``too_large:<bytes>``, ``error:<errno>``) for the others. The last
    path component is never followed, and a FIFO or device is never read."""
    return {p: _hash_one(p, max_bytes) for p in paths}


def _hash_one(path: str, max_bytes: int) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | _NO_FOLLOW)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return "missing"
        return f"error:{errno.errorcode.get(exc.errno or 0, exc.errno)}"
    info = os.fstat(fd)  # before fdopen, which raises on a folder's descriptor
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return "not_a_file"
    with os.fdopen(fd, "rb", buffering=0) as fh:
        if info.st_size > max_bytes:
            return f"too_large:{info.st_size}"
        digest = hashlib.sha256()
        while block := fh.read(1 << 20):
            digest.update(block)
        return digest.hexdigest()
