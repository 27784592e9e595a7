"""Fingerprints survive a move and a reformat, and follow a real edit.

Every stage's code identity (its target's name and the identity of each model it runs,
:func:`madbench_common.pipeline.identity.stage_identity`) and every registered model's
identity are computed in a fresh interpreter on a copy of the package, before and after
an edit. These are the parts of a fingerprint (``pipeline/stage.py``) that depend on code;
the rest (inputs, parameters, image, seed) does not change with it, so equal identities
mean equal fingerprints and byte-identical manifests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DUMP = """
import json, sys
import madbench_common
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.identity import canonical_name, model_identity, stage_identity
from madbench_common.cli.pipelines import build_pipeline
from madbench_common.pipeline.stage import stage_params
out = {"_package": madbench_common.__file__}
for name in ("madbench", "deaf"):
    for st in build_pipeline(name):
        out[f"{name}/{st.name}"] = [canonical_name(st.target),
                                    stage_identity(st.model, stage_params(st, {}))]
for slug in REGISTRY:
    out[f"model/{slug}"] = model_identity(slug)
json.dump(out, sys.stdout, sort_keys=True)
"""


def _ruff() -> str | None:
    here = Path(sys.executable).with_name("ruff")
    return str(here) if here.exists() else shutil.which("ruff")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package, its cards and the images' weights.yaml, copied from git's file list."""
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout (git ls-files)")
    dest = tmp_path_factory.mktemp("tree")
    files = subprocess.run(["git", "ls-files", "madbench_common", "images", "pyproject.toml"],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for rel in files.split():
        if rel.startswith("images/") and not rel.endswith(("weights.yaml", "image.yaml")):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def _identities(tree: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MADBENCH_", "PYTHON"))}
    env.update(PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", DUMP], cwd=tree, env=env, check=True,
                          capture_output=True, text=True, timeout=600)
    out: dict[str, Any] = json.loads(done.stdout)
    assert out.pop("_package").startswith(str(tree))  # the copy, not this checkout
    return out


def _callers(tree: Path, name: str) -> set[str]:
    """The models whose adapter module calls ``name`` (read from the copy's sources)."""
    from madbench_common.models.registry import REGISTRY

    out = set()
    for slug, spec in REGISTRY.items():
        path = tree / (spec.target.partition(":")[0].replace(".", "/") + ".py")
        if path.exists() and re.search(rf"\b{name}\(", path.read_text()):
            out.add(slug)
    return out


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new))


def test_a_move_and_a_reformat_keep_every_identity_and_an_edit_changes_its_dependents(
        tree: Path) -> None:
    before = _identities(tree)
    assert sum(k.startswith("model/") for k in before) > 50
    assert sum(k.startswith("madbench/") for k in before) > 20

    # a pure move: the A-V preprocessing helpers from models/ to media/, importers updated
    pkg = tree / "madbench_common"
    (pkg / "models" / "av_prep.py").rename(pkg / "media" / "av_prep.py")
    for path in pkg.rglob("*.py"):
        text = path.read_text()
        if "madbench_common.models.av_prep" in text:
            path.write_text(text.replace("madbench_common.models.av_prep",
                                         "madbench_common.media.av_prep"))
    # a reformat: the formatter over adapters and reference models, and docstring edits
    ruff = _ruff()
    if ruff is not None:
        subprocess.run([ruff, "format", "--isolated", "--line-length", "88",
                        "madbench_common/models/adapters", "madbench_common/models/reference"],
                       cwd=tree, check=True, capture_output=True)
    _replace(pkg / "media" / "av_prep.py", '"""Float audio in [-1, 1]',
             '"""Reworded docstring.\n\n    Float audio in [-1, 1]')
    # attribute docstrings, at module level and in a class, reworded
    lm = pkg / "models" / "adapters" / "audio_lm.py"
    _replace(lm, '"""The marker the tiny installers write', '"""Reworded: the marker the tiny '
             'installers write')
    _replace(lm, '    """What the interpreter running it must import',
             '    """Reworded: what the interpreter running it must import')
    assert _identities(tree) == before

    # a real edit: the int16 scale that only the A-V anomaly detector's adapter calls
    _replace(pkg / "media" / "av_prep.py", "x * 32768.0", "x * 32767.0")
    after = _identities(tree)
    changed = {k for k in before if after[k] != before[k]}
    callers = _callers(tree, "int16_scale")
    assert callers == {"det-av-anomaly"}
    expected = {f"model/{s}" for s in callers} | {
        k for k, v in before.items() if not k.startswith("model/") and set(v[1]) & callers}
    assert changed == expected


