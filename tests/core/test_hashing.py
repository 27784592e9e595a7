"""core.hashing: a file's digest read in blocks equals hashlib's over the whole bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from madbench_common.core.hashing import file_digest


def test_digest_of_a_file_longer_than_one_block(tmp_path: Path) -> None:
    data = bytes(range(256)) * 9000  # 2.3 MB: three blocks
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_digest(path) == hashlib.sha256(data).hexdigest()
    assert file_digest(path, "md5") == hashlib.md5(data).hexdigest()
