"""No Python file of the repository is over :data:`MAX_LINES` lines: past that a module
holds more than one concern and is hard to read and review; split it along its seams
(the local Argo executor is a package of model, expressions, resolve and executor)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("madbench_common", "tests", "perf", "scripts")
MAX_LINES = 800

def _python_files(root: Path) -> list[str]:
    """The ``.py`` files of :data:`FOLDERS`: git's list (tracked, and new files not
    ignored) in a checkout, else every file on disk outside caches."""
    if (root / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard", "--", *FOLDERS], cwd=root, check=True,
                             capture_output=True, text=True).stdout
        names = {n for n in out.split("\0") if n.endswith(".py")}
    else:
        names = {str(p.relative_to(root)) for folder in FOLDERS
                 for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts}
    return sorted(n for n in names if (root / n).is_file())


def _too_long(root: Path, names: list[str]) -> dict[str, int]:
    """Each file of ``names`` over :data:`MAX_LINES` lines, with its count."""
    counts = {n: len((root / n).read_text(encoding="utf-8").splitlines()) for n in names}
    return {n: c for n, c in counts.items() if c > MAX_LINES}


def test_no_python_file_is_over_the_limit() -> None:
    names = _python_files(ROOT)
    assert len(names) > 100  # the list is the repository's, not an empty one
    long = _too_long(ROOT, names)
    named = ", ".join(f"{n} ({c} lines)" for n, c in sorted(long.items()))
    assert long == {}, f"over {MAX_LINES} lines, split them: {named}"


def test_a_long_file_is_named_with_its_count(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "scripts" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    names = _python_files(tmp_path)
    assert names == ["scripts/long.py", "scripts/short.py"]
    assert _too_long(tmp_path, names) == {"scripts/long.py": MAX_LINES + 1}
