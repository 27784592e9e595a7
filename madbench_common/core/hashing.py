"""The digest of a file, read in blocks so a large checkpoint or archive never sits in
memory whole."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["digest_mismatch", "file_digest"]


def file_digest(path: Path, algo: str = "sha256") -> str:
    """Hex digest of the file at ``path`` (``algo``: any :func:`hashlib.new` name)."""
    h = hashlib.new(algo)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def digest_mismatch(path: Path, sha256: str | None, md5: str | None = None) -> str:
    """Why the file at ``path`` is not the one these digests pin (a digest that is None
    pins nothing); empty when it is."""
    if sha256 is not None and (got := file_digest(path)) != sha256:
        return f"sha256 {got} != {sha256}"
    if md5 and (got := file_digest(path, "md5")) != md5:
        return f"md5 {got} != {md5}"
    return ""
