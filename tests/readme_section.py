"""A generated section of the README (between two markers, ``madbench render``): current in
the checkout, reported stale by ``render --check`` without writing, rewritten by ``render``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.paths import ROOT

__all__ = ["check_readme_section"]


def check_readme_section(tmp_path: Path, render: Callable[..., list[Path]], begin: str,
                         end: str, body: str) -> None:
    """README.md holds ``body`` between ``begin`` and ``end``; on a copy with another body,
    ``render(path, check=True)`` names the file and leaves it, ``render(path)`` replaces
    that section alone, after which ``--check`` finds nothing stale."""
    doc = (ROOT / "README.md").read_text()
    assert f"{begin}\n{body}{end}" in doc, \
        f"README section {begin} is stale: run `madbench render` and commit README.md"
    stale = tmp_path / "README.md"
    stale.write_text(f"# x\n{begin}\nstale section\n{end}\nafter\n")
    assert render(str(stale), check=True) == [stale]
    assert "stale section" in stale.read_text()  # --check writes nothing
    assert render(str(stale)) == [stale]
    assert stale.read_text() == f"# x\n{begin}\n{body}{end}\nafter\n"
    assert render(str(stale), check=True) == []
