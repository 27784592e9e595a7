"""Scan files and store objects for secrets: known credentials and credential-shaped strings.

Bytes are searched as they are (JSON, logs, image layers alike), and a Parquet file is
also decoded; what is looked for is listed on :func:`scan_bytes`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["INJECTED_KEYS", "PATTERNS", "Finding", "scan_bytes", "scan_paths"]

INJECTED_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY",
                 "GEMINI_API_KEY", "ELEVENLABS_API_KEY", "AZURE_SPEECH_KEY", "JUDGE_API_KEY",
                 "HF_TOKEN")
"""Every secret key that ``workflows/*.yaml`` inject through ``secretKeyRef`` (a test keeps
this list complete; ``AWS_REGION`` and ``AWS_ENDPOINT_URL`` are not secret)."""

PATTERNS: dict[str, re.Pattern[bytes]] = {
    "aws-access-key-id": re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "aws-secret-access-key": re.compile(
        rb"(?i)aws.{0,24}(?:secret|private).{0,24}[=:]\s*[\"']?[A-Za-z0-9/+]{40}"
        rb"(?![A-Za-z0-9/+])"),
    "aws-secret-access-key-json": re.compile(  # STS / IAM JSON: "SecretAccessKey": "…"
        rb"(?i)[\"']secret_?access_?key[\"']\s*:\s*[\"'][A-Za-z0-9/+]{40}[\"']"),
    "openai-api-key": re.compile(
        rb"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}"),
    "google-api-key": re.compile(rb"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
    "elevenlabs-api-key": re.compile(rb"(?<![A-Za-z0-9_])sk_[a-f0-9]{48}(?![A-Za-z0-9_])"),
    "azure-subscription-key": re.compile(  # the header Azure TTS sends its key in
        rb"(?i)ocp-apim-subscription-key[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9]{32,}"),
    "hf-token": re.compile(rb"\bhf_[A-Za-z0-9]{34,}\b"),
    "github-token": re.compile(rb"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    "private-key": re.compile(rb"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
    "injected-secret": re.compile(
        rb"(?:" + b"|".join(k.encode() for k in INJECTED_KEYS) + rb")[\"']?\s*[=:]\s*[\"']?"
        rb"(?![$<{])[^\s\"',;}]{16,}"),
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


def _scan_raw(data: bytes, where: str, known: list[str]) -> list[Finding]:
    found = [Finding(where, "known-secret", _mask(s.encode())) for s in known
             if s and s.encode() in data]
    for kind, pattern in PATTERNS.items():
        found += [Finding(where, kind, _mask(m.group(0))) for m in pattern.finditer(data)]
    return found


def _parquet_values(data: bytes) -> Iterator[tuple[str, bytes]]:
    """(column, its decoded values joined by newlines) of a Parquet file, and its metadata;
    nothing if ``data`` is not one that pyarrow can read."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        table = pq.read_table(io.BytesIO(data))
    except Exception:  # not Parquet after all, or damaged: the raw scan still ran
        return
    meta = table.schema.metadata or {}
    yield "metadata", b"\n".join(k + b"=" + v for k, v in meta.items())
    for name in table.column_names:
        column = table.column(name)
        while pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            column = pc.list_flatten(column)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
                or pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
            continue
        values = [v if isinstance(v, bytes) else v.encode() for v in column.to_pylist()
                  if v is not None]
        yield name, b"\n".join(values)


def scan_bytes(data: bytes, where: str, known: Iterable[str] = ()) -> list[Finding]:
    """Findings in ``data`` (``known``: literal secrets that must not appear); a Parquet
    file's decoded values are scanned too (findings at ``where:<column>``), so a value in
    a compressed column (zstd, snappy, dictionary pages) is found as well.

    Looked for: the ``known`` values; AWS access key ids (``AKIA``/``ASIA`` + 16) and secret
    keys, assigned to an AWS-looking name or in JSON form (``"SecretAccessKey": "…"``);
    OpenAI keys (``sk-…``, ``sk-proj-…``), Google / Gemini API keys (``AIza`` + 35),
    ElevenLabs keys (``sk_`` + 48 hex); Hugging Face tokens (``hf_`` + 34 or more); GitHub
    tokens; PEM private keys; and any value assigned to a name the workflows inject from a
    Secret (:data:`INJECTED_KEYS`: ``OPENAI_API_KEY=…``, ``"GEMINI_API_KEY": "…"``),
    whatever its shape. Azure Speech keys (DEAF's BSC voice) are 32 hex digits or 84
    alphanumerics, shapes that hashes and ids share, so they are found by that assignment
    form, or in the ``Ocp-Apim-Subscription-Key`` header they travel in, only.
    """
    known = list(known)
    found = _scan_raw(data, where, known)
    if data[:4] == b"PAR1" and data[-4:] == b"PAR1":
        seen = {(f.kind, f.excerpt) for f in found}
        for column, values in _parquet_values(data):
            found += [f for f in _scan_raw(values, f"{where}:{column}", known)
                      if (f.kind, f.excerpt) not in seen]
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
