"""No module docstring of the package is over :data:`MAX_LINES` lines: a module docstring says
what the module is for and why in a few lines; detail a user needs belongs in the README and
history in commit messages."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "madbench_common"
MAX_LINES = 15


def docstring_lines(source: str) -> int:
    """Source lines the module docstring spans, quotes included (0 without one)."""
    body = ast.parse(source).body
    first = body[0] if body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return 0
    return (first.end_lineno or first.lineno) - first.lineno + 1


def test_counts_the_lines_a_module_docstring_spans() -> None:
    assert docstring_lines('"""One line."""\nX = 1\n') == 1
    assert docstring_lines('"""Title.\n\nMore.\n"""\n') == 4
    assert docstring_lines("X = 1\n") == 0 and docstring_lines("") == 0


def test_no_package_module_docstring_is_over_the_limit() -> None:
    long = {str(p.relative_to(ROOT)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := docstring_lines(p.read_text(encoding="utf-8"))) > MAX_LINES}
    assert not long, f"module docstrings over {MAX_LINES} lines (say what and why, move " \
                     f"detail to the README): {long}"
