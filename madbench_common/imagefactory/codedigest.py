"""The digest of the pod code: every file a package install of ``madbench_common`` holds.

The rehearsal record and each image test record it, so that evidence made on other code
(a changed module, catalog card, prompt or data file) shows as stale; the same
self-contained script hashes this checkout and the package inside an image.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from madbench_common.core.errors import ConfigError

__all__ = ["code_digest", "image_code_digest", "package_data_globs"]

ROOT = Path(__file__).resolve().parents[2]

_DIGEST_CODE = r"""
import fnmatch, hashlib, json, pathlib, sys, madbench_common as m
root = pathlib.Path(m.__file__).parent
rules = [(tuple(pkg.split(".")[1:]), tuple(g.split("/")))
         for pkg, globs in json.loads(sys.argv[1]).items() for g in globs]
def installed(rel):
    parts = rel.parts
    if "__pycache__" in parts or any(p.startswith(".") for p in parts):
        return False
    if rel.suffix == ".py":
        return True
    return any(parts[:len(b)] == b and len(parts) == len(b) + len(g)
               and all(fnmatch.fnmatchcase(p, q) for p, q in zip(parts[len(b):], g))
               for b, g in rules)
h = hashlib.sha256()
for p in sorted(root.rglob("*")):
    rel = p.relative_to(root)
    if p.is_file() and installed(rel):
        h.update(rel.as_posix().encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
        if sys.argv[2:] == ["--list"]:
            print(rel.as_posix())
print(h.hexdigest())
"""
"""Run as ``python -c _DIGEST_CODE RULES`` in the checkout and inside an image: the same
files of each one's ``madbench_common`` (RULES: :func:`package_data_globs` of this
checkout), so an image installed from other code, or under other package-data rules,
differs. Self-contained: it must run on the image's own (possibly older) package."""
_PACKAGE_DATA = "[tool.setuptools.package-data]"
_DATA_LINE = re.compile(r'^"?(?P<pkg>[\w.]+)"?\s*=\s*(?P<globs>\[.*\])$')


def package_data_globs(pyproject: Path | None = None) -> dict[str, list[str]]:
    """``[tool.setuptools.package-data]`` of ``pyproject.toml``: package → globs, what a
    package install adds to every module (``*.py``) of ``madbench_common``. Read line by
    line (one ``key = [...]`` per line): ``tomllib`` is not in Python 3.9, which the
    bullseye images run."""
    path = pyproject or ROOT / "pyproject.toml"
    out: dict[str, list[str]] = {}
    inside = False
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if not raw.strip().startswith("[") else raw.strip()
        if line.startswith("["):
            inside = line == _PACKAGE_DATA
            continue
        if not inside or not line:
            continue
        found = _DATA_LINE.match(line)
        if found is None:
            raise ConfigError(f"{path}:{n}: expected one 'package = [\"glob\", ...]' per line "
                              f"in {_PACKAGE_DATA}, got {raw.strip()!r}")
        out[found["pkg"]] = [str(g) for g in json.loads(found["globs"])]
    if not out:
        raise ConfigError(f"{path}: no {_PACKAGE_DATA} section")
    return out


def code_digest(root: Path | None = None, listing: bool = False) -> str:
    """Digest of every file a package install of ``madbench_common`` holds, as this
    checkout (or the tree at ``root``) would install it: every module (``*.py``; the
    package is found with namespaces, so a folder without ``__init__.py`` is installed
    too) and every package-data file of ``pyproject.toml`` (catalog cards, prompts,
    ``data/noise``, ``data/deaf_envlib``, ``models/data/taxonomy.json``, the rehearsal
    profile), ``cluster/`` included (every pod's CLI imports it); never ``__pycache__``,
    hidden files or anything the install leaves out. The same code runs inside an image
    to tell whether the image carries this checkout's pod code (:data:`_DIGEST_CODE`).
    ``listing``: the files hashed, one a line, before the digest."""
    where = root or ROOT
    rules = json.dumps(package_data_globs(where / "pyproject.toml"), sort_keys=True)
    out = subprocess.run([sys.executable, "-c", _DIGEST_CODE, rules,
                          *(["--list"] if listing else [])], capture_output=True,
                         text=True, cwd=where, env={**os.environ, "PYTHONPATH": str(where)})
    if out.returncode != 0:
        raise ConfigError(f"could not hash madbench_common: {out.stderr[-500:]}")
    return out.stdout.strip()


def image_code_digest(image: str, engine: str | None = None, name: str | None = None) -> str:
    """:func:`code_digest` of the ``madbench_common`` installed in ``image``."""
    from madbench_common.imagefactory.containers import run_in_image

    rules = json.dumps(package_data_globs(), sort_keys=True)
    return run_in_image(image, ["python", "-c", _DIGEST_CODE, rules], capture=True,
                        engine=engine, name=name).strip()
