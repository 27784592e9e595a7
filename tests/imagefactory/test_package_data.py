"""Every data file under ``madbench_common/`` is installed with the package.

Pods run the image's installed copy of ``madbench_common``, never a checkout: a data file
that ``[tool.setuptools.package-data]`` does not name exists in the tests here and is
missing in every image (the deaf rehearsal found ``deaf_envlib`` failing so, when the
offline background library lived under the repository's ``data/``).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def _globs() -> dict[str, list[str]]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(doc["tool"]["setuptools"]["package-data"])


def _installed(rel: Path, globs: dict[str, list[str]]) -> bool:
    """Whether a setuptools package-data glob (``*`` never crosses ``/``) names ``rel``."""
    for package, patterns in globs.items():
        base = Path(*package.split("."))
        if not rel.is_relative_to(base):
            continue
        inner = rel.relative_to(base).as_posix()
        if any(fnmatch.fnmatch(inner, p) and inner.count("/") == p.count("/")
               for p in patterns):
            return True
    return False


def test_every_data_file_in_the_package_is_installed() -> None:
    globs = _globs()
    files = [p.relative_to(ROOT) for p in (ROOT / "madbench_common").rglob("*")
             if p.is_file() and p.suffix not in (".py", ".pyc")
             and "__pycache__" not in p.parts and not p.name.startswith(".")]
    assert files
    missing = [str(f) for f in files if not _installed(f, globs)]
    assert not missing, f"not in pyproject's package-data (images would lack them): {missing}"


def test_the_check_sees_a_file_outside_every_glob() -> None:
    globs = _globs()
    assert _installed(Path("madbench_common/data/deaf_envlib/envlib.csv"), globs)
    assert not _installed(Path("madbench_common/data/deaf_envlib/sub/x.flac"), globs)
    assert not _installed(Path("madbench_common/core/notes.txt"), globs)


def test_the_deaf_offline_library_is_package_data() -> None:
    from madbench_common.benchmarks.deaf.envlib import DEFAULT_LIBRARY, library_entries

    library = Path(DEFAULT_LIBRARY)
    assert library.is_relative_to(ROOT / "madbench_common")
    entries = library_entries(DEFAULT_LIBRARY)
    found = [Path(e.path) for e in entries if e.path]
    assert found and all(p.is_file() and p.is_relative_to(library) for p in found)
