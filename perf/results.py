"""Where every benchmark keeps its figures: ``.bench/<name>.json`` at the repository root,
which ``perf/run.py`` reads back to set each figure beside its floor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

__all__ = ["OUT", "save"]

OUT = Path(__file__).resolve().parents[1] / ".bench"
T = TypeVar("T")


def save(name: str, result: T) -> T:
    """Write ``result`` to ``.bench/<name>.json`` and hand it back."""
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=1))
    return result
