"""madbench_common must import and run on Python 3.9 (the bullseye images install it).

This machine has no python3.9, so the rules are checked statically here (ruff's
target-version py39 catches 3.10+ syntax; this catches 3.10+ runtime APIs), the 3.9
branches of ``madbench_common.core.compat`` run under a patched ``sys.version_info``, and
``make image-test IMAGE=base-py39`` proves it for real inside the 3.9 base image.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

import pytest

from madbench_common.core import compat

PKG = Path(compat.__file__).resolve().parents[1]
_BANNED_IMPORTS = {
    "tomllib": "3.11", "typing.Self": "3.11", "typing.TypeAlias": "3.10",
    "typing.ParamSpec": "3.10", "typing.Concatenate": "3.10", "typing.TypeGuard": "3.10",
    "typing.NotRequired": "3.11", "typing.Required": "3.11", "typing.LiteralString": "3.11",
    "typing.assert_never": "3.11", "typing.Never": "3.11", "enum.StrEnum": "3.11",
    "itertools.pairwise": "3.10", "itertools.batched": "3.12", "datetime.UTC": "3.11",
    "contextlib.chdir": "3.11", "dataclasses.KW_ONLY": "3.10",
}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` and inside annotations."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        out.append(node)
        for name, child in ast.iter_fields(node):
            if name in ("annotation", "returns"):
                continue
            kids = child if isinstance(child, list) else [child]
            todo.extend(k for k in kids if isinstance(k, ast.AST))
    return out


def _problems(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in _runtime_nodes(tree):
        line = f"{path.relative_to(PKG.parent)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            for kw in node.keywords:
                if func == "zip" and kw.arg == "strict":
                    found.append(f"{line}: zip(strict=) is 3.10+; use compat.zip_strict")
                if func.endswith("dataclass") and kw.arg in ("kw_only", "slots"):
                    found.append(f"{line}: dataclass({kw.arg}=) is 3.10+; use compat.row")
            if func in ("isinstance", "issubclass") and any(
                    isinstance(a, ast.BinOp) and isinstance(a.op, ast.BitOr) for a in node.args):
                found.append(f"{line}: isinstance(x, A | B) is 3.10+; use a tuple")
            if func in ("typing.get_type_hints", "get_type_hints"):
                found.append(f"{line}: get_type_hints fails on `X | None` on 3.9; "
                             "use compat.type_hints")
        if isinstance(node, ast.Attribute) and ast.unparse(node) == "types.UnionType":
            found.append(f"{line}: types.UnionType is 3.10+; use compat.UNION_TYPES")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mod = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                name = f"{mod}.{alias.name}" if mod else alias.name
                if name in _BANNED_IMPORTS or (mod is None and alias.name in _BANNED_IMPORTS):
                    found.append(f"{line}: {name} needs Python {_BANNED_IMPORTS[name]}")
        if isinstance(node, ast.Match):
            found.append(f"{line}: match is 3.10+")
    return found


def test_package_uses_no_310_runtime_features() -> None:
    files = [p for p in sorted(PKG.rglob("*.py")) if p.name != "compat.py"]
    assert len(files) > 30
    problems = [p for f in files for p in _problems(f)]
    assert not problems, "\n".join(problems)


def test_checker_catches_the_spellings(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from dataclasses import dataclass\nimport tomllib\n"
        "@dataclass(frozen=True, kw_only=True)\nclass A:\n    x: int\n"
        "def f(a, b):\n    return list(zip(a, b, strict=True)), isinstance(a, int | str)\n")
    global PKG
    saved, PKG = PKG, tmp_path
    try:
        problems = _problems(bad)
    finally:
        PKG = saved
    assert len(problems) == 4, problems


@pytest.fixture
def py39(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 9, 18, "final", 0))


def test_row_emulates_kw_only_on_39(py39: None) -> None:
    @compat.row
    class Base:
        status: str = "ok"

    @compat.row
    class Child(Base):
        clip_id: str
        score: float = 0.0

    made = Child(clip_id="c1")
    assert (made.status, made.clip_id, made.score) == ("ok", "c1", 0.0)
    assert [f.name for f in dataclasses.fields(Child)] == ["status", "clip_id", "score"]
    with pytest.raises(TypeError, match="clip_id"):
        Child()
    with pytest.raises(TypeError):
        Child("ok", "c1")  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.score = 1.0  # type: ignore[misc]
    assert dataclasses.replace(made, score=2.0).score == 2.0


def test_zip_strict_on_39(py39: None) -> None:
    assert list(compat.zip_strict([1, 2], "ab")) == [(1, "a"), (2, "b")]
    with pytest.raises(ValueError, match="different lengths"):
        list(compat.zip_strict([1, 2], "a"))


def test_zip_strict_and_hints_on_this_python() -> None:
    with pytest.raises(ValueError):
        list(compat.zip_strict([1], []))
    from madbench_common.benchmarks.madbench.rows import StemRow

    assert compat.type_hints(StemRow)["si_sdr_speech"] == (float | None)
