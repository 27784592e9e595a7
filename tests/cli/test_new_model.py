"""``madbench new-model`` writes what the recipe says, and the checks pick the model up.

The scaffold runs for a throwaway encoder with its own image in a copy of the checkout
(``git ls-files``); in that copy the catalog checks and the tiny-layout check run over the
new model and pass, the README's paper-scale plan gains its feature stage (``render
--check`` reports the README stale until ``render`` runs), and the count of files the
recipe states is the count the scaffold writes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from madbench_common.cli.scaffold import scaffold_files

ROOT = Path(__file__).resolve().parents[2]
SLUG, REPO = "enc-throwaway", "example-org/throwaway-audio"


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MADBENCH_", "PYTHON"))}
    env.update(PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    return env


def _run(tree: Path, *argv: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=tree, env=_env(tree), text=True,
                          capture_output=True, timeout=timeout)


def test_the_recipe_states_the_number_of_files_the_scaffold_writes() -> None:
    own = scaffold_files(SLUG, REPO, root=ROOT)
    joined = scaffold_files(SLUG, REPO, image="enc-tf5", root=ROOT)
    assert len(own) == 7 and len(joined) == 4
    for doc in (ROOT / "README.md", ROOT / "madbench_common/models/catalog/README.md"):
        text = " ".join(doc.read_text().split())
        found = re.search(r"`madbench new-model[^`]*` writes (\d+) files \((\d+) when", text)
        assert found, f"{doc}: no 'madbench new-model writes N files (M when ...' sentence"
        assert (int(found[1]), int(found[2])) == (len(own), len(joined)), doc
    table = (ROOT / "madbench_common/models/catalog/README.md").read_text()
    for rel in own:  # every file the scaffold writes is a row of the recipe's table
        generic = rel.replace(f"images/{SLUG}/", "images/<image>/").replace(
            f"{SLUG}.yaml", "<slug>.yaml").replace("throwaway", "<family>")
        assert f"`{generic}`" in table, f"{generic} is not in the recipe's table"


@pytest.mark.slow
def test_a_scaffolded_encoder_with_its_own_image_is_checked_and_planned(
        tmp_path: Path) -> None:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout (git ls-files)")
    tree = tmp_path / "tree"
    files = subprocess.run(  # this checkout's files, uncommitted ones included
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
        check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, tree / rel)

    made = _run(tree, "-m", "madbench_common.cli", "new-model", SLUG, "--repo", REPO,
                "--paper", "Throwaway", "--root", str(tree))
    assert made.returncode == 0, made.stderr
    written = sorted(line.removeprefix(f"wrote: {tree}/") for line in made.stdout.splitlines()
                     if line.startswith("wrote: "))
    assert written == sorted(scaffold_files(SLUG, REPO, root=ROOT))

    # before anything is generated, the catalog check names the new image's missing files
    before = _run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                  "tests/test_catalog.py", "-k", SLUG)
    assert f"FAILED tests/test_catalog.py::test_image_folder_names_resolve[{SLUG}]" in \
        before.stdout and f"missing images/{SLUG}/Dockerfile" in before.stdout, before.stdout

    # make dockerfiles (Dockerfile, lock entry); then render --check names the README's
    # plan stale, and render writes it with the new feature stage. `make lock` resolves
    # against PyPI (no network here): enc-tf5's lock stands in (same torch, transformers)
    done = _run(tree, "-m", "madbench_common.imagefactory.images", "render")
    assert done.returncode == 0, done.stdout + done.stderr
    stale = _run(tree, "-m", "madbench_common.cli", "render", "--check")
    assert stale.returncode == 1 and "stale: README.md" in stale.stdout, stale.stdout
    done = _run(tree, "-m", "madbench_common.cli", "render")
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.copy2(tree / "images/enc-tf5/requirements.lock",
                 tree / f"images/{SLUG}/requirements.lock")
    assert "features_enc_throwaway " in (tree / "README.md").read_text()
    assert "features_enc_throwaway " not in (ROOT / "README.md").read_text()
    assert _run(tree, "-m", "madbench_common.cli", "render", "--check").returncode == 0

    # the catalog checks and the tiny-layout check pass over the copy with the new model
    checks = _run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                  "tests/test_catalog.py", "tests/models/test_cards.py",
                  "tests/models/test_card_arch.py", "tests/models/test_tiny_layouts.py")
    assert checks.returncode == 0, checks.stdout[-4000:]
    assert f"PASSED tests/models/test_tiny_layouts.py::" \
           f"test_declared_tiny_layout_is_the_release_layout[{SLUG}]" in checks.stdout
    assert f"PASSED tests/test_catalog.py::test_image_folder_names_resolve[{SLUG}]" in \
        checks.stdout
