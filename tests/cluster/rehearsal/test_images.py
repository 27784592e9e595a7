"""The image provider without a container engine (its lookups faked): parameters pinned to
the bound build, images removed after their last pod (only the rehearsal's own, never during a
build), recipes, superseded builds, container names and image tests."""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from madbench_common.cluster.rehearsal.images import ImageProvider
from madbench_common.cluster.rehearsal.state import State
from madbench_common.core.errors import ConfigError
from tests.cluster.rehearsal.support import ROOT


def test_image_parameters_pin_the_bound_build(tmp_path: Path, nothing_built_here: None) -> None:
    state = State(tmp_path / "state.json")
    provider = ImageProvider(state, tmp_path)
    ref = "ghcr.io/madbench/no-such-image-here:0.1.0"
    value = provider.pinned(ref)
    assert value() == ref  # nothing built, nothing recorded: the plain tag
    provider._digest = "this checkout"
    state.update_image("no-such-image-here", image_id="b" * 64, code_digest="another")
    assert value() == ref  # the last build the rehearsal used, of other code: not bound
    state.update_image("no-such-image-here", code_digest="this checkout")
    assert value() == f"{ref}@sha256:{'b' * 64}"  # the last build the rehearsal used
    provider.bound["no-such-image-here"] = "c" * 64
    assert value() == f"{ref}@sha256:{'c' * 64}"
    assert State(tmp_path / "state.json").image("no-such-image-here")["image_id"] == "b" * 64


def test_only_images_the_rehearsal_built_are_removed(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    import subprocess

    removed: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        removed.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setenv("MADBENCH_BUILD_LOCK", str(tmp_path / "build.lock"))
    state = State(tmp_path / "state.json")
    lines: list[str] = []
    provider = ImageProvider(state, tmp_path, log=lines.append)
    mine, theirs, busy = "a" * 64, "b" * 64, "c" * 64
    state.update_image("det-mine", build_image_id=mine)  # built by a rehearsal
    state.update_image("det-theirs", build_image_id="d" * 64)  # since rebuilt by another
    provider.bound.update({"det-mine": mine, "det-theirs": theirs, "det-busy": busy})
    provider.ready.update({"det-mine", "det-theirs", "det-busy"})
    provider.release(["ghcr.io/madbench/det-busy:0.1.0@sha256:" + busy])
    assert removed == [["buildah", "rmi", mine]]
    assert provider.removed == {"det-mine"} and provider.ready == {"det-busy"}
    assert any("det-theirs" in line and "kept" in line for line in lines)
    provider.keep = True
    provider.ready.add("det-mine")
    provider.release([])
    assert len(removed) == 1  # KEEP_IMAGES=1: nothing goes


def test_no_image_is_removed_while_another_builds(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    """``buildah rmi`` during a build broke that build ("getting top layer info: layer not
    known"): removal takes the build lock, and waits for a later pod while a build holds it."""
    import fcntl
    import subprocess

    removed: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        removed.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    lock = tmp_path / "build.lock"
    monkeypatch.setenv("MADBENCH_BUILD_LOCK", str(lock))
    state = State(tmp_path / "state.json")
    lines: list[str] = []
    provider = ImageProvider(state, tmp_path, log=lines.append)
    mine = "a" * 64
    state.update_image("det-mine", build_image_id=mine)
    provider.bound["det-mine"] = mine
    provider.ready.add("det-mine")
    with open(lock, "a") as build:  # a build under way (imagebuild.build_lock's file)
        fcntl.flock(build, fcntl.LOCK_EX)
        provider.release([])  # a finished pod: the removal waits, the pod slot does not
        assert removed == [] and provider.ready == {"det-mine"}
        assert any("waits" in line and str(lock) in line for line in lines)
        done = threading.Event()
        end = threading.Thread(target=lambda: (provider.release([], wait=True), done.set()))
        end.start()  # the end of a workflow: waits for the build
        assert not done.wait(0.3) and removed == []
        fcntl.flock(build, fcntl.LOCK_UN)
    end.join(10)
    assert done.is_set()
    assert removed == [["buildah", "rmi", mine]] and provider.removed == {"det-mine"}
    provider.release([])  # nothing left to remove: the lock is not even taken
    assert len(removed) == 1


def test_a_resumed_pass_skips_no_pod_of_an_image_with_other_code(tmp_path: Path) -> None:
    """Pods run the pinned image id. An image the rehearsal used before is bound again on a
    resumed pass only while its madbench_common is this checkout's: after a code change
    its pods rerun (a resumed pass skipped component_qc after the CLAP fix)."""
    state = State(tmp_path / "state.json")
    state.update_image("qc", image_id="a" * 64, code_digest="old")
    provider = ImageProvider(state, tmp_path)
    provider._seen["qc"] = None  # not on the machine any more (removed after its pods)
    provider._digest = "new"
    assert provider.binding("qc", "ghcr.io/madbench/qc:0.1.0") is None
    assert provider.pinned("ghcr.io/madbench/qc:0.1.0")() == "ghcr.io/madbench/qc:0.1.0"
    provider._digest = "old"
    assert provider.binding("qc", "ghcr.io/madbench/qc:0.1.0") == "a" * 64
    # a local build the state has not checked is not trusted either
    provider._seen["qc"] = "b" * 64
    assert provider.binding("qc", "ghcr.io/madbench/qc:0.1.0") is None
    state.update_image("qc", image_id="b" * 64, code_digest="old")
    assert provider.binding("qc", "ghcr.io/madbench/qc:0.1.0") == "b" * 64


def test_pods_and_probes_name_their_containers_after_the_work_folder(tmp_path: Path) -> None:
    """A killed pass leaves buildah working containers that block ``buildah rmi`` of their
    images: every container a pass makes carries the work folder's prefix, by which the
    next pass removes them."""
    from madbench_common.imagefactory.containers import container_name

    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path)
    other = ImageProvider(State(tmp_path / "b" / "state.json"), tmp_path / "b")
    assert provider.prefix.startswith("madbench-rehearsal-") and provider.prefix != other.prefix
    name = provider.container("rehearsal-full.main.features(det-batfd)(0)", "1")
    assert name.startswith(provider.prefix)
    assert re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*", name)
    long = provider.container("x" * 500, "0")
    assert long.startswith(provider.prefix) and len(long) <= 120
    assert container_name("a" * 300) != container_name("a" * 299 + "b")


@pytest.mark.needs_tools("buildah", root=True)
def test_a_killed_pass_s_containers_are_removed_by_name(tmp_path: Path) -> None:
    """Real buildah: a working container left under the prefix goes; another's stays."""
    import subprocess

    from madbench_common.imagefactory.containers import remove_containers

    prefix = ImageProvider(State(tmp_path / "s.json"), tmp_path).prefix
    mine, theirs = f"{prefix}pod-0", f"other-{prefix}pod-0"
    for name in (mine, theirs):
        subprocess.run(["buildah", "from", "--name", name, "scratch"], check=True,
                       capture_output=True)
    try:
        assert remove_containers(prefix) == [mine]
        names = subprocess.run(["buildah", "containers", "--format", "{{.ContainerName}}"],
                               capture_output=True, text=True, check=True).stdout.split()
        assert mine not in names and theirs in names
    finally:
        subprocess.run(["buildah", "rm", mine, theirs], capture_output=True)


def test_the_recipe_follows_the_build_inputs_and_not_the_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What changes a recipe: the image's folder, a parent's, the code digest (leaves
    only); what does not: an sbom (a build output) or another image's folder."""
    from madbench_common.cluster.rehearsal import images

    base = images.image_recipe("reference-cpu", "code")
    assert base and base == images.image_recipe("reference-cpu", "code")
    assert images.image_recipe("reference-cpu", "other code") != base
    parent = images.image_recipe("torch-2.13.0-py311", "code")
    assert parent == images.image_recipe("torch-2.13.0-py311", "other code")  # no code in it
    assert images.image_recipe("no-such-image", "code") is None

    fake_root = tmp_path / "root"
    shutil.copytree(ROOT / "images", fake_root / "images",
                    ignore=shutil.ignore_patterns(".upstream"))
    shutil.copy(ROOT / "pyproject.toml", fake_root)
    monkeypatch.setattr(images, "ROOT", fake_root)
    from madbench_common.imagefactory import images as images_mod

    monkeypatch.setattr(images_mod, "IMAGES", fake_root / "images", raising=False)
    assert images.image_recipe("reference-cpu", "code") == base
    (fake_root / "images" / "reference-cpu" / "sbom.cdx.json").write_text("{}")
    (fake_root / "images" / "qc" / "requirements.lock").write_text("x")
    assert images.image_recipe("reference-cpu", "code") == base
    chain = images_mod.chain(images_mod.load_image("reference-cpu"))
    parent_lock = fake_root / "images" / chain[-2].slug / "requirements.lock"
    parent_lock.write_text(parent_lock.read_text() + "\n# changed\n")
    assert images.image_recipe("reference-cpu", "code") != base


@pytest.mark.parametrize("built_by_rehearsal", [True, False])
def test_a_rebuild_removes_the_build_it_superseded(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path,
                                                    built_by_rehearsal: bool) -> None:
    """A pass resumed on new code rebuilt every image and left the old builds untagged on
    disk (four 6-8 GB images at 665c969): the rebuild removes the rehearsal's own old
    build, under the build lock; an image it found on the machine stays."""
    import subprocess

    from madbench_common.cluster.rehearsal import images

    calls: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    old, new = "a" * 64, "b" * 64
    ids = iter([old, new])
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setenv("MADBENCH_BUILD_LOCK", str(tmp_path / "build.lock"))
    monkeypatch.setattr(images, "_image_id", lambda ref: next(ids))
    state = State(tmp_path / "state.json")
    if built_by_rehearsal:
        state.update_image("det-mine", build_image_id=old)
    lines: list[str] = []
    provider = ImageProvider(state, tmp_path, log=lines.append)
    monkeypatch.setattr(provider, "_fresh", lambda slug, image_id: image_id == new)
    monkeypatch.setattr(provider, "_build", lambda slug: 1.0)
    monkeypatch.setattr(provider, "_describe", lambda slug, image_id: None)
    monkeypatch.setattr(provider, "_weights", lambda slug, image_id: None)
    monkeypatch.setattr(provider, "recipe", lambda slug: "recipe")
    assert provider._ensure("det-mine", "ghcr.io/madbench/det-mine:0.1.0") == new
    assert state.image("det-mine")["build_image_id"] == new
    if built_by_rehearsal:
        assert calls == [["buildah", "rmi", old]]
        assert any("superseded build aaaaaaaaaaaa" in line for line in lines)
    else:
        assert calls == []


def _image_test_provider(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                         lock: dict[str, dict[str, Any]], outcome: dict[str, Any] | None,
                         image_tests: bool = True) -> tuple[ImageProvider, list[list[str]],
                                                            list[str]]:
    """A provider whose build is faked and whose image test 'records' ``outcome`` in a lock
    held in ``lock`` (the real test needs a built image)."""
    from madbench_common.cluster.rehearsal import images

    runs: list[list[str]] = []
    lines: list[str] = []

    def run_logged(args: list[str], log: Path, env: dict[str, str], what: str) -> None:
        runs.append(list(args))
        assert env["MADBENCH_RUN_ENGINE"] == "buildah" and log.name.startswith("image-test-")
        if outcome is not None:
            lock[args[-1]] = outcome
            if outcome["result"] != "pass":
                raise ConfigError(f"{what} failed (exit 1; log {log}):\nerror: no rows")

    monkeypatch.setattr(images, "_lock_image_test", lambda slug: dict(lock.get(slug, {})))
    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path, log=lines.append,
                             image_tests=image_tests)
    monkeypatch.setattr(provider, "_ensure", lambda slug, ref: "b" * 64)
    monkeypatch.setattr(provider, "_run_logged", run_logged)
    return provider, runs, lines


def test_image_tests_run_each_image_test_once_on_the_image_the_pods_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """IMAGE_TESTS=1: the image test of the image the pods will run, before they do; a
    resumed pass whose lock holds a pass of the same image id does not run it again, one
    of another image id (a rebuild) does."""
    passed = {"result": "pass", "wall_s": 41, "image_id": "sha256:" + "b" * 64,
              "stages": {"speech_tts_same": "2 rows, 0 rejected"}}
    lock: dict[str, dict[str, Any]] = {}
    provider, runs, lines = _image_test_provider(monkeypatch, tmp_path, lock, passed)
    assert provider.ensure("ghcr.io/madbench/tts-f5:0.1.0") == "b" * 64
    assert runs == [["-m", "madbench_common.testing.imagetest", "test", "tts-f5"]]
    assert provider.state.image("tts-f5")["image_test"] == {
        "result": "pass", "wall_s": 41, "image_id": "b" * 64,
        "stages": {"speech_tts_same": "2 rows, 0 rejected"}}
    assert any("image tts-f5: image test passed in 41 s" in line for line in lines)
    provider.ensure("ghcr.io/madbench/tts-f5:0.1.0")  # ready: not again in this pass
    assert len(runs) == 1

    resumed, runs2, _ = _image_test_provider(monkeypatch, tmp_path, lock, passed)
    resumed.ensure("ghcr.io/madbench/tts-f5:0.1.0")
    assert runs2 == []  # the lock holds a pass of this very image
    lock["tts-f5"] = {**passed, "image_id": "sha256:" + "c" * 64}
    rebuilt, runs3, _ = _image_test_provider(monkeypatch, tmp_path, lock, passed)
    rebuilt.ensure("ghcr.io/madbench/tts-f5:0.1.0")
    assert len(runs3) == 1


def test_a_failed_image_test_is_recorded_and_the_pods_still_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    failed = {"result": "fail", "wall_s": 9, "image_id": "b" * 64,
              "reason": "speech_tts_same in localhost/madbench/tts-f5:0.1.0: no accepted rows"}
    provider, runs, lines = _image_test_provider(monkeypatch, tmp_path, {}, failed)
    assert provider.ensure("ghcr.io/madbench/tts-f5:0.1.0") == "b" * 64
    assert "tts-f5" in provider.ready and len(runs) == 1
    test = provider.state.image("tts-f5")["image_test"]
    assert test["result"] == "fail" and "no accepted rows" in test["reason"]
    assert any("image tts-f5: its image test FAILED" in line for line in lines)
    # a test that died before recording (killed, engine gone) is a failure, not a pass
    silent, _, _ = _image_test_provider(monkeypatch, tmp_path / "s", {}, None)
    (tmp_path / "s").mkdir()
    silent.ensure("ghcr.io/madbench/tts-f5:0.1.0")
    assert silent.state.image("tts-f5")["image_test"]["result"] == "fail"
    assert "recorded nothing" in silent.state.image("tts-f5")["image_test"]["reason"]


def test_image_tests_are_off_by_default_and_skip_images_without_one(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    passed = {"result": "pass", "wall_s": 1, "image_id": "b" * 64, "stages": {}}
    off, runs, _ = _image_test_provider(monkeypatch, tmp_path, {}, passed, image_tests=False)
    off.ensure("ghcr.io/madbench/tts-f5:0.1.0")
    assert runs == [] and "image_test" not in off.state.image("tts-f5")
    on, runs, _ = _image_test_provider(monkeypatch, tmp_path / "o", {}, passed)
    (tmp_path / "o").mkdir()
    on.ensure("ghcr.io/madbench/not-a-folder-here:1")  # an image with no folder here
    assert runs == []


def test_run_logged_runs_python_with_its_output_in_the_log(tmp_path: Path) -> None:
    """The subprocess builds and image tests go through: output in the log, a failure
    names the log and ends with its tail."""
    import sys

    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path, log=lambda _: None,
                             python=sys.executable)
    log = tmp_path / "ok.log"
    provider._run_logged(["-c", "print('made it')"], log, dict(os.environ), "a check")
    assert log.read_text() == "made it\n"
    with pytest.raises(ConfigError, match=r"a check failed \(exit 3; log .*bad.log\):\nboom"):
        provider._run_logged(["-c", "import sys; print('boom'); sys.exit(3)"],
                             tmp_path / "bad.log", dict(os.environ), "a check")
