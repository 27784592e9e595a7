"""YAML documents parsed once per test session.

The rendered workflows are 0.1–0.3 MB each, and PyYAML's loader takes about a second for
each of them; dozens of tests (one per stage in ``test_argo``) read the same few files. A
parse is kept per path, size and modification time (a file rewritten by a test is parsed
again), and each caller gets its own deep copy, so one test's edits never reach another.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml


def load_yaml(path: str | Path) -> Any:
    """``yaml.safe_load`` of ``path``'s text: a private copy of the session's parse."""
    stat = Path(path).stat()
    return copy.deepcopy(_parsed(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns))


@cache
def _parsed(path: str, size: int, mtime_ns: int) -> Any:
    return yaml.safe_load(Path(path).read_text())
