"""Every test folder is collected: pytest skips folders that match ``norecursedirs``
(its default names ``build``, which tests/build/ mirrors), silently."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_no_test_folder_matches_norecursedirs() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    patterns = config["norecursedirs"]
    folders = [p for p in (ROOT / "tests").rglob("*")
               if p.is_dir() and "__pycache__" not in p.parts]
    skipped = [str(p.relative_to(ROOT)) for p in folders
               if any(fnmatch.fnmatch(p.name, pat) for pat in patterns)]
    assert not skipped, skipped


def test_the_build_tests_are_collected_from_the_root() -> None:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", "tests/build/test_upstream.py"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "tests/build/test_upstream.py::" in out.stdout, out.stdout[-2000:]
