"""The code digest covers every file a package install of madbench_common holds (what a pod
can read: code and package data, ``cluster/`` included) and nothing else; an edit of one
catalog card makes the committed rehearsal pass and the image tests of the images that
install the package stale."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib
import yaml

from madbench_common.cluster.rehearsal.preflight import stale_evidence
from madbench_common.imagefactory.codedigest import code_digest, package_data_globs

ROOT = Path(__file__).parents[2]


def _copy(dest: Path) -> Path:
    """The package and its pyproject as a checkout holds them (no caches)."""
    shutil.copytree(ROOT / "madbench_common", dest / "madbench_common",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    shutil.copy(ROOT / "README.md", dest / "README.md")
    return dest


def _listing(root: Path) -> tuple[set[str], str]:
    *files, digest = code_digest(root, listing=True).splitlines()
    return set(files), digest


def test_package_data_rules_are_pyprojects() -> None:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert package_data_globs() == doc["tool"]["setuptools"]["package-data"]


def test_the_digest_covers_code_and_package_data_and_nothing_else(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    files, digest = _listing(root)
    assert digest == code_digest(root) == code_digest()  # the checkout's, caches aside
    cards = [f for f in files if f.startswith("models/catalog/") and f.endswith(".yaml")]
    assert len(cards) > 50
    for wanted in ("cluster/rehearsal/run.py", "cluster/argo_local/executor.py", "cluster/lint.py",
                   "models/data/taxonomy.json", "data/rehearsal.yaml", "py.typed"):
        assert wanted in files, wanted
    assert any(f.startswith("data/noise/") for f in files)
    assert any(f.startswith("data/deaf_envlib/") for f in files)
    assert any(f.startswith("benchmarks/madbench/prompts/") and f.endswith(".yaml")
               for f in files)
    # caches, hidden files and files the install leaves out change nothing
    (root / "madbench_common" / "models" / "__pycache__").mkdir()
    (root / "madbench_common" / "models" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"1")
    (root / "madbench_common" / "models" / "catalog" / "notes.txt").write_text("draft")
    (root / "madbench_common" / "data" / ".scratch.yaml").write_text("a: 1")
    assert code_digest(root) == digest


def test_one_catalog_card_edit_changes_the_digest_and_stales_the_evidence(
        tmp_path: Path) -> None:
    root = _copy(tmp_path / "tree")
    before = code_digest(root)
    card = sorted((root / "madbench_common" / "models" / "catalog").glob("*.yaml"))[0]
    card.write_text(card.read_text() + "\n# an edit\n")
    after = code_digest(root)
    assert after != before

    records = tmp_path / "rehearsal.json"
    records.write_text(json.dumps({"code_digest": before}))
    lock = tmp_path / "images.lock.yaml"
    lock.write_text(yaml.safe_dump({"version": 1, "images": {
        "tts-f5": {"status": "built", "image_test": {"result": "pass", "code_digest": before}},
        "python-py311": {"status": "built", "image_test": {"result": "pass"}}}}))
    assert stale_evidence(before, records, lock) == []
    stale = stale_evidence(after, records, lock)
    assert len(stale) == 2
    assert stale[0].startswith(f"rehearsal.json: the committed pass ran on code {before[:12]}")
    assert stale[1].startswith("images.lock.yaml: the image tests of tts-f5 ran on other "
                               f"code than this checkout's {after[:12]}")
    assert "python-py311" not in stale[1]  # a base has no madbench code


@pytest.mark.slow
def test_the_digest_hashes_exactly_the_files_a_wheel_installs(tmp_path: Path) -> None:
    """The file set is derived from pyproject, so it cannot drift from what pip installs."""
    pytest.importorskip("setuptools")
    root = _copy(tmp_path / "tree")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
                           str(root)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.skip(f"no wheel build here: {done.stderr[-300:]}")
    [wheel] = (tmp_path / "dist").glob("*.whl")
    installed = {n.removeprefix("madbench_common/") for n in zipfile.ZipFile(wheel).namelist()
                 if n.startswith("madbench_common/")}
    assert _listing(root)[0] == installed
