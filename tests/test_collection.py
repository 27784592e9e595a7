"""Every test folder is collected: pytest skips folders that match ``norecursedirs``
(its default names ``build``, which tests/imagefactory/ mirrors), silently."""

from __future__ import annotations

import ast
import fnmatch
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_no_test_folder_matches_norecursedirs() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    # pytest's own default where the project sets none ("build" among them: no test folder
    # may be named so)
    patterns = config.get("norecursedirs", ["*.egg", ".*", "_darcs", "build", "CVS", "dist",
                                            "node_modules", "venv", "{arch}"])
    folders = [p for p in (ROOT / "tests").rglob("*")
               if p.is_dir() and "__pycache__" not in p.parts]
    skipped = [str(p.relative_to(ROOT)) for p in folders
               if any(fnmatch.fnmatch(p.name, pat) for pat in patterns)]
    assert not skipped, skipped


def test_the_image_factory_tests_are_collected_from_the_root() -> None:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", "tests/imagefactory/test_upstream.py"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "tests/imagefactory/test_upstream.py::" in out.stdout, out.stdout[-2000:]


def _unconditional_skips(path: Path) -> list[str]:
    """Tests of ``path`` that always skip: a ``pytest.skip(...)`` statement directly in the
    test's body, or a ``pytest.mark.skip`` decorator (``skipif`` has a condition)."""
    found = []
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                or not node.name.startswith("test"):
            continue
        decorators = [ast.unparse(d.func if isinstance(d, ast.Call) else d)
                      for d in node.decorator_list]
        body = [ast.unparse(s.value.func) for s in node.body
                if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)]
        if "pytest.mark.skip" in decorators or "pytest.skip" in body:
            found.append(f"{where}::{node.name}")
    return found


def test_no_test_skips_unconditionally() -> None:
    """A test that always skips can never fail: make it a real test, or documentation."""
    always = [t for p in sorted((ROOT / "tests").rglob("test_*.py")) for t in
              _unconditional_skips(p)]
    assert always == []


def test_an_unconditional_skip_is_found(tmp_path: Path) -> None:
    src = tmp_path / "test_x.py"
    src.write_text("import pytest\n\n\ndef test_a():\n    pytest.skip('never runs')\n\n\n"
                   "@pytest.mark.skip(reason='r')\ndef test_b():\n    assert 1\n\n\n"
                   "def test_c():\n    if True:\n        pytest.skip('a condition')\n")
    assert [s.rsplit("::", 1)[1] for s in _unconditional_skips(src)] == ["test_a", "test_b"]
