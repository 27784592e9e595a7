"""Pinned weights, offline: pin → fetch → tamper → refuse against a loopback hub and a loopback
HTTP server (`madbench weights pin|status|fetch|check`).

The hub is :mod:`tests.loopback_hub` (the endpoints ``huggingface_hub`` calls, on a free
port); URL items come from a ``http.server`` on a free port.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from madbench_common import cli
from madbench_common.models.weights import (
    UnpinnedWeights,
    WeightsMismatch,
    check_weights,
    fetch_weights,
    hf_path,
    load_spec,
    weights_images,
)
from madbench_common.models.weights_pin import pin_weights, weights_status, write_pins
from tests.loopback_hub import LoopbackHub, loopback_hub

REPO = "org/tiny-model"
W1 = b"\x01" * 4096
W2 = b"\x02" * 4096
CONFIG = b'{"hidden_size": 8}\n'
SPEC = f"""# a family's weights
image: fam
hf:
  # the model (comment kept by pin)
  - repo: {REPO}   # trailing comment
    revision: main
    files: ["config.json",
            "*.safetensors"]
notes: >-
  Tiny test repository.
"""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def hub() -> Iterator[LoopbackHub]:
    with loopback_hub() as h:
        h.commit(REPO, {"config.json": CONFIG, "model.safetensors": W1,
                        "README.md": b"# tiny\n", "other.bin": b"\x03" * 100})
        yield h


def _images(tmp_path: Path, body: str = SPEC) -> Path:
    folder = tmp_path / "images" / "fam"
    folder.mkdir(parents=True)
    (folder / "weights.yaml").write_text(body)
    return tmp_path / "images"


def test_pin_fetch_tamper_refuse_against_a_loopback_hub(tmp_path: Path,
                                                       hub: LoopbackHub) -> None:
    images = _images(tmp_path)
    assert [u.entry for u in weights_status(["fam"], images)] == [f"{REPO}@main"]
    with pytest.raises(UnpinnedWeights, match="madbench weights pin --image fam"):
        fetch_weights("fam", tmp_path / "w0", images, endpoint=hub.url)

    # pin: the commit main points at, and the sha256 of every matching file
    pinned_commit = hub.repos[REPO].refs["main"]
    result = pin_weights("fam", images, endpoint=hub.url)
    assert result.pinned == [f"{REPO}@main"] and not result.failed
    item = load_spec("fam", images).hf[0]
    assert item.commit == pinned_commit
    assert item.sha256 == {"config.json": _sha(CONFIG), "model.safetensors": _sha(W1)}
    text = (images / "fam" / "weights.yaml").read_text()
    assert "# the model (comment kept by pin)" in text and "# trailing comment" in text
    assert weights_status(["fam"], images) == []

    # upstream changes after pinning: fetch still gets exactly the pinned commit
    new_commit = hub.commit(REPO, {"model.safetensors": W2})
    dest = tmp_path / "weights"
    lock = json.loads(fetch_weights("fam", dest, images, endpoint=hub.url).read_text())
    assert lock["hf"] == [{"repo": REPO, "revision": "main", "commit": pinned_commit,
                           "pinned": True, "files": item.sha256}]
    assert lock["allow_unpinned"] is False and lock["unpinned"] == []
    assert hf_path(REPO, image="fam", filename="model.safetensors", root=dest).read_bytes() == W1
    assert not any(rev == new_commit for (_m, _k, rev) in hub.requests)
    assert check_weights("fam", dest, images) == []

    # a damaged local copy: check reports it, fetch refuses and removes it, a refetch heals
    blob = hf_path(REPO, image="fam", filename="model.safetensors", root=dest).resolve()
    blob.write_bytes(W2)
    assert any("sha256" in p for p in check_weights("fam", dest, images))
    with pytest.raises(WeightsMismatch, match=r"model\.safetensors: sha256"):
        fetch_weights("fam", dest, images, endpoint=hub.url)
    assert not blob.exists()
    fetch_weights("fam", dest, images, endpoint=hub.url)
    assert check_weights("fam", dest, images) == []

    # the hub serves other bytes for the pinned commit: refused, nothing kept
    hub.tamper(REPO, pinned_commit, "model.safetensors", W2)
    fresh = tmp_path / "weights2"
    with pytest.raises(WeightsMismatch, match=rf"{_sha(W2)} != {_sha(W1)}"):
        fetch_weights("fam", fresh, images, endpoint=hub.url)
    assert not any(p.read_bytes() == W2 for p in fresh.rglob("*") if p.is_file())

    # pin --update takes the new upstream commit
    pin_weights("fam", images, update=True, endpoint=hub.url)
    again = load_spec("fam", images).hf[0]
    assert again.commit == new_commit and again.sha256["model.safetensors"] == _sha(W2)
    assert (images / "fam" / "weights.yaml").read_text().count("commit:") == 1


def test_unpinned_fetch_is_allowed_only_when_asked_and_recorded(tmp_path: Path,
                                                               hub: LoopbackHub) -> None:
    images = _images(tmp_path)
    lock = json.loads(fetch_weights("fam", tmp_path / "w", images, allow_unpinned=True,
                                    endpoint=hub.url).read_text())
    assert lock["allow_unpinned"] is True and lock["unpinned"] == [f"{REPO}@main"]
    (entry,) = lock["hf"]
    assert entry["pinned"] is False and entry["commit"] == hub.repos[REPO].refs["main"]
    assert entry["files"] == {"config.json": _sha(CONFIG), "model.safetensors": _sha(W1)}


def test_pin_leaves_an_unreachable_entry_unpinned_and_writes_nothing(tmp_path: Path) -> None:
    images = _images(tmp_path)
    before = (images / "fam" / "weights.yaml").read_bytes()
    with loopback_hub() as down:
        url = down.url  # a port that is closed once the hub stops
    result = pin_weights("fam", images, endpoint=url)
    assert result.pinned == [] and [e for e, _ in result.failed] == [f"{REPO}@main"]
    assert (images / "fam" / "weights.yaml").read_bytes() == before


def test_pin_refuses_a_pattern_that_matches_nothing(tmp_path: Path, hub: LoopbackHub) -> None:
    images = _images(tmp_path, SPEC.replace('"*.safetensors"', '"*.ckpt"'))
    result = pin_weights("fam", images, endpoint=hub.url)
    assert result.failed and "*.ckpt" in result.failed[0][1]
    assert load_spec("fam", images).hf[0].commit is None


def test_url_item_pin_fetch_upstream_change_refuse(tmp_path: Path,
                                                  http_folder: tuple[str, Path]) -> None:
    url, root = http_folder
    (root / "ckpt.pth").write_bytes(W1)
    md5 = hashlib.md5(W1).hexdigest()
    images = _images(tmp_path, f"image: fam\nurls:\n  - name: ckpt.pth   # kept\n"
                               f"    url: {url}/ckpt.pth\n    sha256: unpinned\n"
                               f"    md5: {md5}\n")
    assert [u.kind for u in weights_status(["fam"], images)] == ["url"]
    assert pin_weights("fam", images).pinned == ["ckpt.pth"]
    assert load_spec("fam", images).urls[0].sha256 == _sha(W1)
    assert "# kept" in (images / "fam" / "weights.yaml").read_text()
    dest = tmp_path / "weights"
    fetch_weights("fam", dest, images)
    assert check_weights("fam", dest, images) == []
    (root / "ckpt.pth").write_bytes(W2)  # the file changes upstream after pinning
    with pytest.raises(WeightsMismatch, match="sha256"):
        fetch_weights("fam", tmp_path / "w2", images)
    assert not (tmp_path / "w2" / "files" / "fam" / "ckpt.pth").exists()
    # a wrong md5 leaves the entry unpinned
    (root / "ckpt.pth").write_bytes(W1)
    images2 = _images(tmp_path / "b", f"image: fam\nurls:\n  - name: ckpt.pth\n"
                                      f"    url: {url}/ckpt.pth\n    sha256: unpinned\n"
                                      f"    md5: '{'0' * 32}'\n")
    result = pin_weights("fam", images2)
    assert "md5" in result.failed[0][1] and load_spec("fam", images2).urls[0].sha256 is None


def test_cli_status_fetch_and_pin(tmp_path: Path, hub: LoopbackHub,
                                  monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    images = _images(tmp_path)
    monkeypatch.setenv("MADBENCH_IMAGES_DIR", str(images))
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    assert cli.main(["weights", "status"]) == 0
    out = capsys.readouterr().out
    assert f"fam\thf\t{REPO}@main\t" in out and "1 unpinned entries in 1 of 1 images" in out
    assert cli.main(["weights", "status", "--strict"]) == 1
    dest = str(tmp_path / "w")
    assert cli.main(["weights", "fetch", "--image", "fam", "--dest", dest]) == 3
    assert cli.main(["weights", "fetch", "--image", "fam", "--dest", dest,
                     "--allow-unpinned=false"]) == 3
    assert cli.main(["weights", "fetch", "--image", "fam", "--dest", dest,
                     "--allow-unpinned"]) == 0
    assert cli.main(["weights", "pin", "--image", "fam"]) == 0
    assert cli.main(["weights", "status", "--strict"]) == 0
    assert cli.main(["weights", "fetch", "--image", "fam", "--dest", dest]) == 0


def test_write_pins_edits_only_the_pin_lines(tmp_path: Path) -> None:
    path = tmp_path / "weights.yaml"
    path.write_text(SPEC + "urls:\n  - name: a.pt\n    url: http://x/a.pt\n"
                    "    sha256: unpinned   # to pin\n")
    before = path.read_text().splitlines()
    commit, files = "a" * 40, {"config.json": "b" * 64, "dir/x y.safetensors": "c" * 64}
    write_pins(path, {REPO: (commit, files)}, {"a.pt": "d" * 64})
    after = path.read_text().splitlines()
    assert [line for line in after if line not in before] == [
        f"    commit: {commit}", "    sha256:", f'      "config.json": "{"b" * 64}"',
        f'      "dir/x y.safetensors": "{"c" * 64}"', f'    sha256: "{"d" * 64}"']
    doc = yaml.safe_load(path.read_text())
    assert doc["hf"][0]["sha256"] == files and doc["notes"] == "Tiny test repository."


def test_repository_weights_have_no_placeholder_and_status_lists_the_unpinned() -> None:
    """Here the hub cannot be reached: no entry is pinned with a made-up value, and every
    entry without a pin is listed by `weights status`."""
    images = weights_images()
    root = Path(__file__).resolve().parents[2] / "images"
    assert not any("0" * 64 in (root / i / "weights.yaml").read_text() for i in images)
    listed = {(u.image, u.entry) for u in weights_status(images)}
    for image in images:
        spec = load_spec(image)
        for h in spec.hf:
            assert ((image, h.label) in listed) == (h.commit is None or not h.sha256), h
        for u in spec.urls:
            assert ((image, u.label) in listed) == (u.sha256 is None), u
