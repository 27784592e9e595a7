"""core.hashing: a file's digest read in blocks equals hashlib's over the whole bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from madbench_common.core.hashing import digest_mismatch, file_digest


def test_digest_of_a_file_longer_than_one_block(tmp_path: Path) -> None:
    data = bytes(range(256)) * 9000  # 2.3 MB: three blocks
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_digest(path) == hashlib.sha256(data).hexdigest()
    assert file_digest(path, "md5") == hashlib.md5(data).hexdigest()


def test_mismatch_names_the_digest_that_differs(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"pinned bytes")
    sha, md5 = hashlib.sha256(b"pinned bytes").hexdigest(), hashlib.md5(b"pinned bytes").hexdigest()
    assert digest_mismatch(path, sha, md5) == "" and digest_mismatch(path, None) == ""
    assert digest_mismatch(path, "ab" * 32) == f"sha256 {sha} != {'ab' * 32}"
    assert digest_mismatch(path, sha, "cd" * 16) == f"md5 {md5} != {'cd' * 16}"
