"""URL weights with an upstream md5 and no sha256 yet (MMAudio's GitHub-release files): fetched
only with ``allow_unpinned``, the md5 checked on download and the sha256 recorded in the
lock; malformed checksums are refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.models.weights import fetch_weights, load_spec, url_file


def _spec(images: Path, item: str) -> None:
    (images / "img").mkdir(parents=True, exist_ok=True)
    (images / "img" / "weights.yaml").write_text(f"image: img\nurls:\n{item}")


def test_md5_item_is_checked_and_its_sha256_recorded(tmp_path: Path) -> None:
    blob = tmp_path / "v1-44.pth"
    blob.write_bytes(b"tiny checkpoint bytes")
    md5 = hashlib.md5(blob.read_bytes()).hexdigest()
    _spec(tmp_path / "images", f"  - name: v1-44.pth\n    url: {blob.as_uri()}\n    md5: {md5}\n")
    lock = json.loads(fetch_weights("img", tmp_path / "w", tmp_path / "images",
                                    allow_unpinned=True).read_text())
    (entry,) = lock["urls"]
    assert entry["sha256"] == hashlib.sha256(b"tiny checkpoint bytes").hexdigest()
    assert entry["sha256_pinned"] is False and entry["md5"] == md5
    assert url_file("v1-44.pth", image="img", root=tmp_path / "w").read_bytes() == blob.read_bytes()


def test_wrong_md5_fails_and_leaves_nothing(tmp_path: Path) -> None:
    blob = tmp_path / "x.pt"
    blob.write_bytes(b"abc")
    _spec(tmp_path / "images", f"  - name: x.pt\n    url: {blob.as_uri()}\n    md5: '{'0' * 32}'\n")
    with pytest.raises(ConfigError, match=r"md5 [0-9a-f]{32} != 0{32}"):
        fetch_weights("img", tmp_path / "w", tmp_path / "images", allow_unpinned=True)
    assert not (tmp_path / "w" / "files" / "img" / "x.pt").exists()


def test_malformed_checksums_are_refused(tmp_path: Path) -> None:
    _spec(tmp_path / "images", "  - name: x.pt\n    url: https://example.org/x.pt\n    md5: abc\n")
    with pytest.raises(ConfigError, match="32-hex md5"):
        load_spec("img", tmp_path / "images")
