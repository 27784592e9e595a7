"""Tests for madbench_common.models.weights and `madbench weights fetch|check`, offline.

URL items are fetched from a local HTTP server (sha256 checked); the Hugging Face path is
exercised with `install_local_snapshot` (the hub cannot be reached from here).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from madbench_common import cli
from madbench_common.core.errors import ConfigError
from madbench_common.models.weights import (
    WeightsMissing,
    check_weights,
    fetch_weights,
    hf_path,
    install_local_snapshot,
    url_file,
)

PAYLOAD = b"tiny checkpoint bytes\n" * 100
SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def http_root(http_folder: tuple[str, Path]) -> tuple[str, Path]:
    """The loopback server's folder, holding ``ckpt.pth``."""
    (http_folder[1] / "ckpt.pth").write_bytes(PAYLOAD)
    return http_folder


def _images(tmp_path: Path, body: str) -> Path:
    folder = tmp_path / "images" / "fam"
    folder.mkdir(parents=True)
    (folder / "weights.yaml").write_text(body)
    return tmp_path / "images"


def _url_images(tmp_path: Path, url: str, sha256: str) -> Path:
    """An images folder whose image ``fam`` fetches ``ckpt.pth`` from ``url``."""
    return _images(tmp_path, f"image: fam\nurls:\n  - name: ckpt.pth\n    url: {url}/ckpt.pth\n"
                              f"    sha256: {sha256}\n")


def test_url_item_is_fetched_checked_and_locked(tmp_path: Path,
                                                http_root: tuple[str, Path]) -> None:
    url, _ = http_root
    images = _url_images(tmp_path, url, SHA)
    dest = tmp_path / "weights"
    lock = fetch_weights("fam", dest, images)
    assert url_file("ckpt.pth", image="fam", root=dest).read_bytes() == PAYLOAD
    assert json.loads(lock.read_text())["urls"] == [
        {"name": "ckpt.pth", "url": f"{url}/ckpt.pth", "sha256": SHA, "sha256_pinned": True}]
    assert check_weights("fam", dest, images) == []
    (dest / "files" / "fam" / "ckpt.pth").write_bytes(b"tampered")
    problems = check_weights("fam", dest, images)
    assert len(problems) == 1 and "sha256" in problems[0]
    assert "madbench weights fetch --image fam" in problems[0]


def test_url_sha256_mismatch_fails_and_leaves_nothing(tmp_path: Path,
                                                      http_root: tuple[str, Path]) -> None:
    url, _ = http_root
    images = _url_images(tmp_path, url, f"'{'ab' * 32}'")
    dest = tmp_path / "weights"
    with pytest.raises(ConfigError, match=f"sha256 {SHA} != {'ab' * 32}"):
        fetch_weights("fam", dest, images)
    assert not (dest / "files" / "fam" / "ckpt.pth").exists()
    assert list((dest / "files" / "fam").iterdir()) == []


def _tiny_snapshot(tmp_path: Path) -> Path:
    src = tmp_path / "tiny"
    src.mkdir()
    (src / "config.json").write_text('{"hidden_size": 8}')
    (src / "model.safetensors").write_bytes(b"\0" * 64)
    return src


def test_hf_item_found_offline_in_the_cache_layout(tmp_path: Path) -> None:
    images = _images(tmp_path, "image: fam\nhf:\n  - repo: org/tiny\n    revision: main\n"
                               "    files: ['*.json', '*.safetensors']\n")
    root = tmp_path / "weights"
    install_local_snapshot(root, "org/tiny", _tiny_snapshot(tmp_path))
    assert check_weights("fam", root, images) == []
    path = hf_path("org/tiny", image="fam", filename="config.json", root=root)
    assert json.loads(path.read_text()) == {"hidden_size": 8}


def test_missing_hf_weight_names_the_fix(tmp_path: Path) -> None:
    images = _images(tmp_path, "image: fam\nhf:\n  - repo: org/tiny\n    files: ['*.bin']\n"
                               "  - repo: org/absent\n")
    root = tmp_path / "weights"
    install_local_snapshot(root, "org/tiny", _tiny_snapshot(tmp_path))
    problems = check_weights("fam", root, images)
    assert len(problems) == 2
    assert "'*.bin'" in problems[0] and "org/absent@main" in problems[1]
    assert all(f"madbench weights fetch --image fam --dest {root}" in p for p in problems)
    with pytest.raises(WeightsMissing, match="madbench weights fetch --image fam"):
        hf_path("org/absent", image="fam", root=root)


def test_cli_check_and_fetch(tmp_path: Path, http_root: tuple[str, Path],
                             monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = http_root
    images = _url_images(tmp_path, url, SHA)
    monkeypatch.setenv("MADBENCH_IMAGES_DIR", str(images))
    dest = tmp_path / "weights"
    assert cli.main(["weights", "check", "--image", "fam", "--root", str(dest)]) == 1
    assert "madbench weights fetch --image fam" in capsys.readouterr().err
    assert cli.main(["weights", "fetch", "--image", "fam", "--dest", str(dest)]) == 0
    assert cli.main(["weights", "check", "--image", "fam", "--root", str(dest)]) == 0
    assert cli.main(["weights", "check", "--image", "nope", "--root", str(dest)]) == 3


def test_weights_yaml_rejects_a_sha256_yaml_read_as_a_number(tmp_path: Path) -> None:
    images = _images(tmp_path, "image: fam\nurls:\n  - name: a.pth\n    url: http://x/a\n"
                               f"    sha256: {'1' * 64}\n")
    with pytest.raises(ConfigError, match="quote it"):
        check_weights("fam", tmp_path, images)
