"""The digest of a file, read in blocks so a large checkpoint or archive never sits in
memory whole."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["file_digest"]


def file_digest(path: Path, algo: str = "sha256") -> str:
    """Hex digest of the file at ``path`` (``algo``: any :func:`hashlib.new` name)."""
    h = hashlib.new(algo)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
