"""`madbench run --engine`: shards in images, with the same manifests as the in-process run.

The equality test is marked ``image`` and opt-in (``make test-images``): it needs a built
``reference-cpu`` image and a container engine.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from madbench_common import cli
from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.errors import ConfigError
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore, open_store
from madbench_common.imagefactory import containers
from madbench_common.imagefactory.containers import Mount, _buildah_script, _oci_cmd, _Policy
from madbench_common.pipeline.container import ContainerEngine, _outermost, read_only_mounts
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.stage import load_impl, read_marker

FIRST_FOUR = ("ingest", "separate", "source_qc", "split")


def test_outermost_folders() -> None:
    got = _outermost([Path("/a/b"), Path("/a"), Path("/c/d"), Path("/a/b/c"), Path("/c/d")])
    assert got == [Path("/a"), Path("/c/d")]


def test_source_mounts_cover_csv_rows(demo_sources: Path) -> None:
    """Every file the CSV names (clips and both stems) is under a read-only mount at its
    own path; the CSV's folder too."""
    from madbench_common.benchmarks.madbench.sources import list_sources, source_files

    mounts = read_only_mounts(source_files(str(demo_sources)))
    assert all(m.read_only and m.target == str(m.host) for m in mounts)

    def covered(path: Path) -> bool:
        return any(m.host == path or m.host in path.parents for m in mounts)

    named = [Path(f).resolve() for s in list_sources(str(demo_sources))
             for f in (s.path, s.speech_stem, s.env_stem) if f]
    assert len(named) == 12  # 4 clips, each with its speech and env stem
    assert covered(demo_sources.parent.resolve())
    assert all(covered(f) for f in named), [f for f in named if not covered(f)]


def test_oci_run_follows_the_pod_policy() -> None:
    cmd = _oci_cmd("podman", "img", ["madbench", "stage"], [Mount(Path("/s"), "/s", False),
                   Mount(Path("/w"), "/weights")], {"A": "1"}, _Policy(gpu=True))
    text = " ".join(cmd)
    for flag in ("--read-only", "--network none", "--user 10001:10001", "--cap-drop ALL",
                 "--device nvidia.com/gpu=all", "-v /s:/s:rw", "-v /w:/weights:ro", "-e A=1",
                 "--entrypoint madbench"):
        assert flag in text, flag
    assert cmd[-2:] == ["img", "stage"]
    docker = " ".join(_oci_cmd("docker", "img", ["x"], [], {}, _Policy(gpu=True)))
    assert "--gpus all" in docker and "nvidia.com/gpu" not in docker


def test_nested_mounts_come_after_their_parents(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from madbench_common.imagefactory import containers

    seen: list[list[str]] = []
    monkeypatch.setattr(containers, "run_engine", lambda _e=None: "docker")
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: seen.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "", ""))
    containers.run_in_image("img", ["x"], mounts=[Mount(Path("/d/store"), "/d/store", False),
                                                  Mount(Path("/d"), "/d")])
    vols = [seen[0][i + 1] for i, a in enumerate(seen[0]) if a == "-v"]
    assert vols == ["/d:/d:ro", "/d/store:/d/store:rw"]


def test_buildah_run_remounts_the_root_read_only() -> None:
    script = _buildah_script("ctr", ["madbench", "x y"], [Mount(Path("/s"), "/s", False)],
                             {}, "10001:10001")
    assert "mount -o remount,bind,ro \"$mnt\"" in script
    assert "mount -t tmpfs -o mode=1777 tmpfs \"$mnt/tmp\"" in script
    assert "--user 10001:10001 --cap-drop all" in script and "-v /s:/s:rw" in script
    assert script.endswith("ctr -- madbench 'x y'")


def test_buildah_run_without_mounts_has_no_empty_mkdir() -> None:
    """The image build's torch probe runs with no mounts: ``mkdir -p`` alone fails."""
    import re

    script = _buildah_script("ctr", ["python", "-c", "0"], [], {}, "10001:10001")
    assert not re.search(r"mkdir -p\s*;", script)


def test_image_flag_needs_an_engine(tmp_path: Path) -> None:
    argv = ["run", "--store", str(tmp_path), "--run-id", "r", "--image", "reference-cpu"]
    assert cli.main(argv) == 3


def _normalised_rows(store: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Each stage's rows with its own output prefix replaced by the stage name."""
    run = RunStore(open_store(store), run_id)
    graph = build_graph()
    out = {}
    for name in FIRST_FOUR:
        marker = read_marker(run, name)
        assert marker is not None, name
        rows = read_manifest_bytes(load_impl(graph[name].target).row_type,
                                   run.get_bytes(f"{name}/manifest.parquet"))
        prefix_uri, prefix = run.uri(marker["prefix"]), marker["prefix"]

        def norm(value: Any, prefix_uri: str = prefix_uri, prefix: str = prefix) -> Any:
            if isinstance(value, str):
                return value.replace(prefix_uri, "<out>").replace(prefix, "<out>")
            return value

        out[name] = [{k: norm(v) for k, v in dataclasses.asdict(r).items()} for r in rows]
    return out


@pytest.mark.image
@pytest.mark.timeout(7200)  # a cold build takes longer than the suite's 600 s
@pytest.mark.slow
def test_engine_run_gives_the_same_manifests(demo_sources: Path, tmp_path: Path) -> None:
    if os.environ.get("MADBENCH_IMAGE_TEST") != "1":
        pytest.skip("opt-in: set MADBENCH_IMAGE_TEST=1 (needs the built reference-cpu image)")
    from madbench_common.imagefactory.imagebuild import image_exists, local_ref

    if not image_exists(local_ref("reference-cpu")):
        pytest.fail("reference-cpu is not built: make base-images && make image "
                    "IMAGE=reference-cpu")
    tmp_path.chmod(0o755)  # the container user (10001 under root) reads the sources in it
    params = {"ingest": {"sources": str(demo_sources)}}
    local = RunOptions(store=str(tmp_path / "a"), run_id="r", until="split", progress=False,
                       params=params, workers=2)
    LocalRunner(build_graph, local).execute()
    boxed = dataclasses.replace(local, store=str(tmp_path / "b"))
    engine = ContainerEngine.create(os.environ.get("MADBENCH_RUN_ENGINE", ""), boxed.store, "r",
                                    "reference-cpu", None, str(demo_sources), workers=2)
    reports = LocalRunner(build_graph, boxed, engine).execute()
    assert [r.stage for r in reports] == list(FIRST_FOUR)
    run = RunStore(open_store(boxed.store), "r")
    assert read_marker(run, "separate")["image"] == local_ref("reference-cpu")  # type: ignore[index]
    a, b = _normalised_rows(local.store, "r"), _normalised_rows(boxed.store, "r")
    for name in FIRST_FOUR:
        assert a[name] == b[name], name
    assert sum(len(v) for v in a.values()) >= 4 * 3


def test_a_named_run_replaces_its_own_leftover(monkeypatch: pytest.MonkeyPatch) -> None:
    """``name``: a container of that name (the caller's killed attempt) is removed first,
    then the new one takes the name; an OCI engine gets ``--name``."""
    import subprocess

    calls: list[list[str]] = []

    def fake(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "ctr-id\n", "")

    monkeypatch.setattr(containers.subprocess, "run", fake)
    monkeypatch.setattr(containers, "run_engine", lambda wanted=None: "buildah")
    monkeypatch.setattr(containers, "SECCOMP_PROFILE", Path("/no/seccomp.json"))
    containers.run_in_image("img", ["x"], name="me-0")
    assert calls[0] == ["buildah", "rm", "me-0"]
    assert calls[1] == ["buildah", "from", "--pull=never", "--quiet", "--name", "me-0", "img"]
    calls.clear()
    monkeypatch.setattr(containers, "run_engine", lambda wanted=None: "podman")
    containers.run_in_image("img", ["x"], name="me-0")
    assert calls[0][:4] == ["podman", "run", "--name", "me-0"] and "--rm" in calls[0]


# ------------------------------------------------------------------ securityContext


def test_run_as_non_root_is_enforced_before_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the kubelet: uid 0, or a name whose uid cannot be verified, never starts."""
    import subprocess

    calls: list[list[str]] = []
    monkeypatch.setattr(containers.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "ctr\n", ""))
    monkeypatch.setattr(containers, "run_engine", lambda wanted=None: "buildah")
    for user, words in (("0:0", "would run as root"), ("0", "would run as root"),
                        ("root:root", "non-numeric user 'root'")):
        with pytest.raises(ConfigError, match=words):
            containers.run_in_image("img", ["x"], user=user)
    assert calls == []
    containers.run_in_image("img", ["x"], user="0:0", non_root=False)  # tooling may
    assert calls


def test_the_buildah_run_sets_no_new_privileges_and_the_default_seccomp_profile(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import subprocess

    calls: list[list[str]] = []
    monkeypatch.setattr(containers.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "ctr\n", ""))
    monkeypatch.setattr(containers, "run_engine", lambda wanted=None: "buildah")
    profile = tmp_path / "seccomp.json"
    profile.write_text("{}")
    monkeypatch.setattr(containers, "SECCOMP_PROFILE", profile)
    containers.run_in_image("img", ["x"])
    made = next(c for c in calls if c[:2] == ["buildah", "from"])
    assert f"seccomp={profile}" in made and made[made.index(f"seccomp={profile}") - 1] == \
        "--security-opt"
    script = next(c for c in calls if c[0] == "unshare")[-1]
    assert "prctl(38, 1, 0, 0, 0)" in script and "buildah run" in script


def _status_image(name: str) -> str:
    """A one-binary image (the host's ``cat`` and its libraries), made with buildah."""
    import subprocess

    ctr = subprocess.run(["buildah", "from", "--name", f"{name}-ctr", "scratch"],
                         capture_output=True, text=True, check=True).stdout.strip()
    try:
        mnt = Path(subprocess.run(["buildah", "mount", ctr], capture_output=True, text=True,
                                  check=True).stdout.strip())
        cat = Path(shutil.which("cat") or "/bin/cat").resolve()
        libs = re.findall(r"(/\S+\.so[.\d]*)", subprocess.run(
            ["ldd", str(cat)], capture_output=True, text=True).stdout)
        for path in [str(cat), *libs]:
            dest = mnt / path.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(Path(path).resolve(), dest)
        (mnt / "bin").mkdir(exist_ok=True)
        if not (mnt / "bin" / "cat").exists():
            shutil.copy(cat, mnt / "bin" / "cat")
        for folder in ("proc", "sys", "dev", "etc", "tmp", "run"):
            (mnt / folder).mkdir(exist_ok=True)
        image = f"localhost/{name}:test"
        subprocess.run(["buildah", "commit", "--quiet", "--rm", ctr, image],
                       capture_output=True, check=True)
        return image
    except BaseException:
        subprocess.run(["buildah", "rm", ctr], capture_output=True)
        raise


@pytest.mark.needs_tools("buildah", root=True)
def test_a_pod_reads_back_its_security_context(tmp_path: Path) -> None:
    """Inside a container started the pods' way (buildah, chroot isolation): uid 10001,
    NoNewPrivs 1, seccomp filter mode (2) with the runtime-default profile, no
    effective capability."""
    import os
    import subprocess

    image = _status_image(f"madbench-sc-{os.getpid()}-{tmp_path.name}".lower())
    try:
        text = containers.run_in_image(image, ["/bin/cat", "/proc/self/status"], capture=True,
                                       engine="buildah")
    finally:
        subprocess.run(["buildah", "rmi", image], capture_output=True)
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    assert fields["Uid"].split() == ["10001"] * 4
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Seccomp"].strip() == "2"
    assert int(fields["CapEff"], 16) == 0
