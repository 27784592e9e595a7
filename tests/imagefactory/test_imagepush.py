"""Image digests from a real registry: push → record → render with the digest → pull by digest.

The registry is the CNCF distribution registry (Debian ``docker-registry``) on a free
loopback port with a temporary storage folder (:mod:`tests.loopback_registry`). Builds and
pulls use a private containers-storage, so the machine's shared image store is never
touched. The quick test pushes a few-KB image built FROM scratch; the opt-in test
(``image`` marker, ``MADBENCH_IMAGE_TEST=1``) pushes the built ``base-py311``, pulls it back
by digest and runs the ``ingest`` stage in it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from madbench_common import cli
from madbench_common.benchmarks.madbench.sources import source_files
from madbench_common.imagefactory.imagelock import lock_entry
from madbench_common.imagefactory.imagepush import _main, image_digest, push_image, registry_ref
from madbench_common.pipeline.argo import VARIANTS, ClusterProfile, ImageLock, compile_workflow
from madbench_common.pipeline.graph import Graph, Stage
from tests.loopback_registry import local_registry, private_storage

needs_tools = pytest.mark.needs_tools("docker-registry", "buildah", "skopeo", root=True)
SLUG = "tiny-fam"


def test_registry_ref_moves_only_the_registry() -> None:
    ref = "ghcr.io/madbench/qc:0.1.0"
    assert registry_ref(ref, None) == ref
    assert registry_ref(ref, "registry.example.org/team/") == "registry.example.org/team/qc:0.1.0"
    assert registry_ref(f"{ref}@sha256:{'a' * 64}", "r:5000") == "r:5000/qc:0.1.0"
    lock = ImageLock({"qc": {"status": "pinned", "ref": ref, "digest": f"sha256:{'b' * 64}"}})
    assert lock.with_registry("registry.example.org/team").ref("qc") == (
        f"registry.example.org/team/qc:0.1.0@sha256:{'b' * 64}")
    assert lock.ref("qc") == f"{ref}@sha256:{'b' * 64}"


def _build_scratch(tag: str, content: bytes, tmp: Path) -> None:
    """A few-KB image FROM scratch holding ``/hello.txt`` (in the current storage)."""
    ctr = subprocess.run(["buildah", "from", "scratch"], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        (tmp / "hello.txt").write_bytes(content)
        subprocess.run(["buildah", "copy", ctr, str(tmp / "hello.txt"), "/hello.txt"],
                       capture_output=True, check=True)
        subprocess.run(["buildah", "commit", "-q", ctr, tag], capture_output=True, check=True)
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True)


def _lock(path: Path, slug: str, local: str) -> Path:
    path.write_text(f"version: 1\nimages:\n  {slug}:\n    status: built\n"
                    f"    ref: ghcr.io/madbench/{slug}:0.1.0\n    digest: null\n"
                    f"    build:\n      local_ref: {local}\n")
    return path


def _pull_file(ref: str, dest: Path, name: str) -> tuple[str, bytes]:
    """Pull ``ref`` into an OCI layout; (manifest digest, bytes of ``name`` in its layer)."""
    subprocess.run(["skopeo", "copy", "-q", "--src-tls-verify=false", f"docker://{ref}",
                    f"oci:{dest}:pulled"], check=True, capture_output=True)
    index = json.loads((dest / "index.json").read_text())
    digest = index["manifests"][0]["digest"]
    manifest = json.loads((dest / "blobs" / "sha256" / digest.split(":")[1]).read_bytes())
    layer = dest / "blobs" / "sha256" / manifest["layers"][0]["digest"].split(":")[1]
    with tarfile.open(layer) as tar:
        member = next(m for m in tar.getmembers() if m.name.lstrip("./") == name)
        data = tar.extractfile(member)
        assert data is not None
        return digest, data.read()


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    with local_registry(tmp_path / "registry") as address:
        yield address


@needs_tools
def test_push_records_the_digest_renders_it_and_pulls_back_by_it(
        tmp_path: Path, registry: str) -> None:
    local = f"localhost/madbench/{SLUG}:0.1.0"
    lock = _lock(tmp_path / "images.lock.yaml", SLUG, local)
    team = f"{registry}/team"
    with private_storage(tmp_path / "storage"):
        _build_scratch(local, b"first build\n", tmp_path)
        assert _main(["push", SLUG, "--registry", team, "--lock", str(lock)]) == 0
        entry = lock_entry(SLUG, lock)
        digest = entry["digest"]
        assert entry["status"] == "pinned" and entry["pushed_to"] == team
        assert digest == image_digest(f"{team}/{SLUG}:0.1.0", tls=False)

        # render: the stage's image parameter is the registry's ref pinned by digest
        graph = Graph([Stage(name="tiny", role="core", target="x:y", image=SLUG)])
        pinned = ImageLock.load(lock).with_slots(["reference-cpu"]).with_registry(team)
        wf = compile_workflow(graph, VARIANTS["full"], pinned,
                              ClusterProfile())
        params = {p.name: p.value for p in wf.spec.arguments.parameters}
        assert params["tiny_image"] == f"{team}/{SLUG}:0.1.0@{digest}"

        # the tag moves (a rebuild pushed without recording); the digest still names the first
        _build_scratch(local, b"second build\n", tmp_path)
        moved = push_image(SLUG, team, lock_path=lock, record=False)
        assert moved.digest != digest and lock_entry(SLUG, lock)["digest"] == digest
        got, data = _pull_file(f"{team}/{SLUG}@{digest}", tmp_path / "oci1", "hello.txt")
        assert (got, data) == (digest, b"first build\n")
        _, data = _pull_file(f"{team}/{SLUG}:0.1.0", tmp_path / "oci2", "hello.txt")
        assert data == b"second build\n"


@needs_tools
def test_push_of_a_missing_image_records_nothing(tmp_path: Path, registry: str) -> None:
    lock = _lock(tmp_path / "images.lock.yaml", SLUG, "localhost/madbench/absent:0.1.0")
    before = lock.read_text()
    with private_storage(tmp_path / "storage"):
        assert _main(["push", SLUG, "--registry", f"{registry}/team", "--lock",
                      str(lock)]) == 3
    assert lock.read_text() == before


def test_render_with_a_registry_moves_every_reference(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "wf"
    assert cli.main(["render", "--out", str(out), "--registry",
                     "registry.example.org/team"]) == 0
    text = (out / "full.yaml").read_text()
    assert "registry.example.org/team/separator-mossformer2:0.1.0" in text
    assert "ghcr.io/madbench" not in text
    assert (root / "workflows" / "full.yaml").read_text().count("ghcr.io/madbench/") > 0


@pytest.mark.image
@needs_tools
def test_push_pull_by_digest_and_run_a_stage(tmp_path: Path, registry: str,
                                             demo_sources: Path) -> None:
    """Opt-in (MADBENCH_IMAGE_TEST=1): the built base-py311 pushed, pulled back by its digest
    into a private store, and the ingest stage run in it (buildah engine)."""
    if os.environ.get("MADBENCH_IMAGE_TEST") != "1":
        pytest.skip("opt-in: set MADBENCH_IMAGE_TEST=1 (needs the built base-py311 image)")
    from madbench_common.benchmarks.madbench.graph import build_graph
    from madbench_common.core.store import RunStore, open_store
    from madbench_common.imagefactory.imagebuild import image_exists
    from madbench_common.pipeline.container import ContainerEngine
    from madbench_common.pipeline.local import LocalRunner, RunOptions
    from madbench_common.pipeline.stage import read_marker

    local = "localhost/madbench/base-py311:0.1.0"
    if not image_exists(local, "buildah"):
        pytest.skip(f"{local} is not built here (make base-images)")
    lock = tmp_path / "images.lock.yaml"
    shutil.copy(Path(__file__).resolve().parents[2] / "images" / "images.lock.yaml", lock)
    pushed = push_image("base-py311", f"{registry}/team", lock_path=lock, source=local)
    pinned = ImageLock.load(lock).with_registry(f"{registry}/team").ref("base-py311")
    assert pinned == pushed.pinned and lock_entry("base-py311", lock)["status"] == "pinned"
    # pull by the digest alone (containers/image refuses a tag and a digest together;
    # Kubernetes takes the rendered tag@digest and ignores the tag)
    by_digest = f"{registry}/team/base-py311@{pushed.digest}"
    with private_storage(tmp_path / "storage"):
        pulled = subprocess.run(["buildah", "pull", "-q", "--tls-verify=false",
                                 f"docker://{by_digest}"], capture_output=True, text=True)
        assert pulled.returncode == 0, pulled.stderr
        assert not image_exists(local, "buildah")  # the private store has only the pull
        store = tmp_path / "store"
        engine = ContainerEngine.create("buildah", str(store), "r1", image=by_digest,
                                        reads=source_files(str(demo_sources)))
        assert engine.image_ref(build_graph()["ingest"]) == by_digest
        opts = RunOptions(store=str(store), run_id="r1", until="ingest", progress=False,
                          params={"ingest": {"sources": str(demo_sources)}})
        LocalRunner(build_graph, opts, engine).execute()
    marker = read_marker(RunStore(open_store(str(store)), "r1"), "ingest")
    assert marker is not None and marker["rows"] > 0
    assert marker["image"] == by_digest
