"""URL weight items without a published checksum: recorded on first fetch, pinned ones checked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from madbench_common.errors import ConfigError
from madbench_common.weights import fetch_weights, load_spec, url_file


def _images(tmp: Path, sha: str | None) -> Path:
    (tmp / "src.bin").write_bytes(b"hubert-ish bytes")
    folder = tmp / "images" / "img"
    folder.mkdir(parents=True)
    line = "" if sha is None else f"\n    sha256: '{sha}'"
    (folder / "weights.yaml").write_text(
        f"image: img\nurls:\n  - name: w.pth\n    url: {(tmp / 'src.bin').as_uri()}{line}\n")
    return tmp / "images"


def test_unknown_sha256_is_recorded_on_first_fetch(tmp_path: Path) -> None:
    images = _images(tmp_path, None)
    assert load_spec("img", images).urls[0].sha256 is None
    lock = json.loads(fetch_weights("img", tmp_path / "w", images).read_text())
    want = hashlib.sha256(b"hubert-ish bytes").hexdigest()
    assert lock["urls"] == [{"name": "w.pth", "url": (tmp_path / "src.bin").as_uri(),
                             "sha256": want, "sha256_pinned": False}]
    assert url_file("w.pth", image="img", root=tmp_path / "w").read_bytes() == b"hubert-ish bytes"


def test_pinned_sha256_mismatch_fails(tmp_path: Path) -> None:
    images = _images(tmp_path, "0" * 64)
    with pytest.raises(ConfigError, match=r"sha256 .* != 0000"):
        fetch_weights("img", tmp_path / "w", images)
