"""URL weight items without a pin: refused by default, fetched and recorded only when allowed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.models.weights import UnpinnedWeights, fetch_weights, load_spec, url_file


def _images(tmp: Path, sha: str | None) -> Path:
    (tmp / "src.bin").write_bytes(b"hubert-ish bytes")
    folder = tmp / "images" / "img"
    folder.mkdir(parents=True)
    line = "\n    sha256: unpinned" if sha is None else f"\n    sha256: '{sha}'"
    (folder / "weights.yaml").write_text(
        f"image: img\nurls:\n  - name: w.pth\n    url: {(tmp / 'src.bin').as_uri()}{line}\n")
    return tmp / "images"


def test_unpinned_sha256_is_refused_unless_allowed_and_then_recorded(tmp_path: Path) -> None:
    images = _images(tmp_path, None)
    assert load_spec("img", images).urls[0].sha256 is None
    with pytest.raises(UnpinnedWeights, match=r"w\.pth: no sha256 recorded"):
        fetch_weights("img", tmp_path / "w", images)
    lock = json.loads(fetch_weights("img", tmp_path / "w", images,
                                    allow_unpinned=True).read_text())
    want = hashlib.sha256(b"hubert-ish bytes").hexdigest()
    assert lock["urls"] == [{"name": "w.pth", "url": (tmp_path / "src.bin").as_uri(),
                             "sha256": want, "sha256_pinned": False}]
    assert lock["allow_unpinned"] is True and lock["unpinned"] == ["w.pth"]
    assert url_file("w.pth", image="img", root=tmp_path / "w").read_bytes() == b"hubert-ish bytes"


def test_pinned_sha256_mismatch_fails(tmp_path: Path) -> None:
    images = _images(tmp_path, "1f" * 32)
    with pytest.raises(ConfigError, match=r"sha256 .* != 1f1f"):
        fetch_weights("img", tmp_path / "w", images)


def test_an_all_zero_sha256_is_a_placeholder(tmp_path: Path) -> None:
    images = _images(tmp_path, "0" * 64)
    with pytest.raises(ConfigError, match="placeholder, not a hash"):
        load_spec("img", images)
