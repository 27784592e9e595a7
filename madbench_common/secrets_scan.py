"""Scan files and store objects for secrets: known credentials and credential-shaped strings.

Looked for: literal values the caller knows are secret (e.g. the S3 credentials of a
test server), AWS access key ids (``AKIA``/``ASIA`` + 16), AWS secret keys assigned to
an AWS-looking name, Hugging Face tokens (``hf_`` + 34 or more), GitHub tokens, and PEM
private keys. Bytes are searched as they are (Parquet, JSON, logs, image layers alike).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PATTERNS", "Finding", "scan_bytes", "scan_paths"]

PATTERNS: dict[str, re.Pattern[bytes]] = {
    "aws-access-key-id": re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "aws-secret-access-key": re.compile(
        rb"(?i)aws.{0,24}(?:secret|private).{0,24}[=:]\s*[\"']?[A-Za-z0-9/+]{40}"
        rb"(?![A-Za-z0-9/+])"),
    "hf-token": re.compile(rb"\bhf_[A-Za-z0-9]{34,}\b"),
    "github-token": re.compile(rb"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    "private-key": re.compile(rb"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
}


@dataclass(frozen=True)
class Finding:
    where: str
    kind: str
    excerpt: str
    """The match with its middle masked, so a report never repeats a secret."""


def _mask(value: bytes) -> str:
    text = value.decode("latin-1")
    return text[:4] + "…" + text[-2:] if len(text) > 8 else "…"


def scan_bytes(data: bytes, where: str, known: Iterable[str] = ()) -> list[Finding]:
    """Findings in ``data`` (``known``: literal secrets that must not appear)."""
    found = [Finding(where, "known-secret", _mask(s.encode())) for s in known
             if s and s.encode() in data]
    for kind, pattern in PATTERNS.items():
        found += [Finding(where, kind, _mask(m.group(0))) for m in pattern.finditer(data)]
    return found


def _files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from (p for p in sorted(path.rglob("*")) if p.is_file() and not p.is_symlink())
        elif path.is_file():
            yield path


def scan_paths(paths: Iterable[Path], known: Iterable[str] = (),
               max_bytes: int = 64 << 20) -> list[Finding]:
    """Findings in every file under ``paths`` (files over ``max_bytes`` are read in part)."""
    known = list(known)
    found: list[Finding] = []
    for path in _files(paths):
        with open(path, "rb") as fh:
            found += scan_bytes(fh.read(max_bytes), str(path), known)
    return found
