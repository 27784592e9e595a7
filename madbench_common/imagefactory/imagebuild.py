"""Build MADBench images on one machine, without a registry: bases, model images, records.

``make base-images`` makes the Python bases offline (:func:`build_bases`). ``make image
IMAGE=<slug>`` builds the slug's parent chain first (python → torch base → image; each
step a cache hit when nothing changed), fetches and verifies its upstream sources, and
builds ``images/<slug>/Dockerfile`` FROM its parent (:func:`_build_one`). Local tags are
``localhost/madbench/<slug>:<tag>``, the tag from the slug's ``ref`` in the images lock. A
failed build raises :class:`BuildFailed`; only a machine with no build engine at all is a
skip (:class:`NoEngine`, exit 77 from the CLI).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from madbench_common.core.errors import ConfigError, MadbenchError
from madbench_common.imagefactory.imagelock import LOCK, lock_entry, record_build
from madbench_common.imagefactory.images import (
    IMAGES,
    ImageInfo,
    build_order,
    fetch_upstream,
    load_image,
)

__all__ = ["BASES", "PYTHON_BASES", "BuildFailed", "BuildRecord", "NoEngine", "build_bases",
           "build_image", "build_lock", "debian_python", "engine", "image_exists", "image_id",
           "image_layers", "local_ref"]

BASES = {"3.11": ("base-py311", "bookworm"), "3.9": ("base-py39", "bullseye")}
"""Python version → (runnable base image slug, Debian suite whose python3 is that version)."""
PYTHON_BASES = {"3.11": "python-py311", "3.9": "python-py39"}
"""Python version → the Python runtime image every image of that Python stands on."""
_ROOT = IMAGES.parent
_MIRROR = "http://deb.debian.org/debian"
_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")
_TRIM = ("/var/lib/apt/lists/*", "/var/cache/apt/*.bin", "/var/cache/apt/archives/*.deb",
         "/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")


class NoEngine(MadbenchError):
    """Neither buildah nor a docker daemon is available: image builds cannot run here."""


class BuildFailed(MadbenchError):
    """An image build (or a command it needs) failed; the message names the step."""


@dataclass(frozen=True)
class BuildRecord:
    """What one build produced and cost."""

    slug: str
    local_ref: str
    image_id: str
    size_bytes: int
    build_s: float
    disk_peak_bytes: int
    cached_steps: int
    engine: str
    torch: str
    cuda: str
    commit: str = ""
    """``git describe --always --dirty`` of the tree the image was built from."""
    parent: str = ""
    steps: int = 0
    layers: tuple[tuple[str, int], ...] = ()
    """(uncompressed diff id, bytes) of every layer of the image, parents' included."""

    def as_lock(self) -> dict[str, Any]:
        return {"local_ref": self.local_ref, "image_id": self.image_id,
                "size_mb": round(self.size_bytes / 2**20), "build_s": round(self.build_s),
                "disk_peak_gb": round(self.disk_peak_bytes / 2**30, 1),
                "cached_steps": self.cached_steps, "steps": self.steps,
                "engine": self.engine, "torch": self.torch or None, "cuda": self.cuda or None,
                "commit": self.commit or None, "parent": self.parent or None,
                "built_at": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                "layers": [f"{digest} {size}" for digest, size in self.layers]}


def engine() -> str:
    """``buildah`` where installed, else ``docker`` with a live daemon; ``$MADBENCH_ENGINE``
    picks one explicitly. Raises :class:`NoEngine` when there is none."""
    wanted = os.environ.get("MADBENCH_ENGINE", "")
    for name in ([wanted] if wanted else ["buildah", "docker"]):
        if shutil.which(name) and (name != "docker" or _docker_alive()):
            return name
    raise NoEngine("no image build engine: install buildah (Debian/Ubuntu: apt-get install "
                   "buildah) or start a docker daemon")


def _docker_alive() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def _run(cmd: Sequence[str], what: str, **kw: Any) -> str:
    """Run ``cmd``; return its stdout; raise :class:`BuildFailed` naming ``what``."""
    out = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    if out.returncode != 0:
        raise BuildFailed(f"{what} failed (exit {out.returncode}): {' '.join(cmd)}\n"
                          f"{out.stderr[-3000:]}")
    return out.stdout


def local_ref(slug: str, lock_path: Path | None = None) -> str:
    """``localhost/madbench/<slug>:<tag>``, the tag from the slug's ref in the images lock."""
    ref = str(lock_entry(slug, lock_path)["ref"])
    return f"localhost/madbench/{slug}:{ref.rsplit(':', 1)[1]}"


def image_exists(ref: str, eng: str | None = None) -> bool:
    eng = eng or engine()
    cmd = ([eng, "inspect", "--type", "image", ref] if eng == "buildah"
           else [eng, "image", "inspect", ref])
    return subprocess.run(cmd, capture_output=True).returncode == 0


def host_ca() -> str:
    """The host's CA bundle, passed to builds as the ``hostca`` secret."""
    for path in (os.environ.get("MADBENCH_HOST_CA", ""), *_CA_BUNDLES):
        if path and Path(path).is_file():
            return path
    raise ConfigError("no CA bundle found (set MADBENCH_HOST_CA=/path/to/ca-bundle.crt)")


@contextmanager
def build_lock(what: str) -> Iterator[None]:
    """Hold the machine-wide image build lock; say so while waiting for another build."""
    path = Path(os.environ.get("MADBENCH_BUILD_LOCK", "/tmp/madbench-image-build.lock"))
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            print(f"waiting for the image build lock {path} (held by: "
                  f"{fh.read().strip() or 'unknown'})", file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} building {what} from {_ROOT} since "
                 f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}\n")
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh, fcntl.LOCK_UN)


class _DiskPeak:
    """Samples ``used`` bytes of a file system once a second; ``peak`` is the rise."""

    def __init__(self, path: str) -> None:
        self.path, self.start = path, shutil.disk_usage(path).used
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.peak = max(self.peak, shutil.disk_usage(self.path).used - self.start)

    def __enter__(self) -> _DiskPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _storage_root(eng: str) -> str:
    fmt = "{{.store.GraphRoot}}" if eng == "buildah" else "{{.DockerRootDir}}"
    out = subprocess.run([eng, "info", "--format", fmt], capture_output=True, text=True)
    root = out.stdout.strip()
    return root if out.returncode == 0 and Path(root).exists() else "/var/lib"


def debian_python(python: str, refresh: bool = False) -> str:
    """The offline stand-in for ``python:<python>-slim``: Debian minbase + python3, venv and
    CA certificates, made with debootstrap into a buildah container (once; ``refresh``
    remakes it). Returns its local ref."""
    suite = BASES[python][1]
    ref = f"localhost/madbench/debian-python:{suite}"
    if not refresh and image_exists(ref, "buildah"):
        return ref
    if not shutil.which("debootstrap"):
        raise ConfigError("debootstrap is not installed (Debian/Ubuntu: apt-get install "
                          "debootstrap), or pass a registry base: make base-images "
                          "PYTHON_SOURCE=registry")
    ctr = _run(["buildah", "from", "scratch"], "buildah from scratch").strip()
    try:
        _bootstrap(ctr, suite)
        _run(["buildah", "config", "--env", "LANG=C.UTF-8", "--cmd", "python3", ctr],
             "buildah config")
        _run(["buildah", "commit", "--quiet", "--format", "docker", "--rm", ctr, ref],
             "buildah commit")
    except BaseException:
        subprocess.run(["buildah", "rm", ctr], capture_output=True)
        raise
    return ref


def _bootstrap(ctr: str, suite: str) -> None:
    mirror = os.environ.get("MADBENCH_DEBIAN_MIRROR", _MIRROR)
    cache = Path(os.environ.get("MADBENCH_DEBOOTSTRAP_CACHE", "/var/cache/madbench-debootstrap"))
    cache.mkdir(parents=True, exist_ok=True)
    mnt = _run(["buildah", "mount", ctr], "buildah mount").strip()
    _run(["debootstrap", "--variant=minbase", f"--cache-dir={cache}",
          "--include=python3,python3-venv,ca-certificates", suite, mnt, mirror],
         f"debootstrap {suite}")
    security = mirror.rsplit("/", 1)[0] + "/debian-security"
    Path(mnt, "etc/apt/sources.list").write_text(
        f"deb {mirror} {suite} main\ndeb {mirror} {suite}-updates main\n"
        f"deb {security} {suite}-security main\n")
    _run(["buildah", "umount", ctr], "buildah umount")
    script = ("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get upgrade -y -qq "
              f"&& apt-get clean && rm -rf {' '.join(_TRIM)}")
    _run(["buildah", "run", "--isolation", "chroot", ctr, "--", "sh", "-c", script],
         f"apt-get upgrade in the {suite} stand-in")


def _git(*args: str) -> str:
    out = subprocess.run(["git", "-C", str(_ROOT), *args], capture_output=True, text=True)
    return out.stdout.strip()


def weights_sha256(images_dir: Path = IMAGES) -> str:
    """sha256 of every ``images/*/weights.yaml`` (names and bytes): the ``WEIGHTS_SHA256``
    build argument that re-runs a leaf image's catalogue step when one of them changes."""
    h = hashlib.sha256()
    for path in sorted(images_dir.glob("*/weights.yaml")):
        h.update(f"{path.parent.name}\n".encode() + path.read_bytes() + b"\n")
    return h.hexdigest()


def _revision(info: ImageInfo) -> str:
    """The ``REVISION`` label: the commit for an image with madbench_common in it; for a
    base below (python, torch), the last commit that touched its chain's folders, so
    that an unrelated commit leaves the base, and every layer above it, cached."""
    if info.leaf:
        return _git("rev-parse", "--short", "HEAD") or "unknown"
    from madbench_common.imagefactory.images import chain

    dirs = [f"images/{i.slug}" for i in chain(info)] + ["images/common.in"]
    return _git("log", "-1", "--format=%h", "--", *dirs) or "unknown"


def _build_args(slug: str, python_source: str, lock_path: Path | None = None) -> dict[str, str]:
    """Build arguments: the parent (a local tag, never a registry pull here) and labels."""
    info = load_image(slug)
    args = {"REVISION": _revision(info), "VERSION": local_ref(slug, lock_path).rsplit(":", 1)[1]}
    if info.leaf:
        args["WEIGHTS_SHA256"] = weights_sha256()
    if info.kind == "python":
        if python_source == "debootstrap":
            args["PYTHON_IMAGE"] = debian_python(info.python)
        return args
    parent_ref = local_ref(info.parent, lock_path)
    if not image_exists(parent_ref):
        raise ConfigError(f"{slug}: its parent image {parent_ref} is not built; run: "
                          f"make image IMAGE={info.parent}")
    args["BASE_IMAGE"] = parent_ref
    return args


def _build_cmd(eng: str, slug: str, tag: str, args: dict[str, str]) -> list[str]:
    dockerfile = IMAGES / slug / "Dockerfile"
    if not dockerfile.exists():
        raise ConfigError(f"{dockerfile}: missing (make dockerfiles)")
    # --force-rm: a failed buildah bud otherwise leaves its working container (and its
    # mounted layers) behind; the build layer cache (--layers) is kept either way
    cmd = ([eng, "bud", "--isolation", "chroot", "--format", "docker", "--layers", "--force-rm"]
           if eng == "buildah" else [eng, "build"])
    cmd += ["-f", str(dockerfile), "-t", tag, "--secret", f"id=hostca,src={host_ca()}"]
    for key, value in sorted(args.items()):
        cmd += ["--build-arg", f"{key}={value}"]
    return [*cmd, str(_ROOT)]


def _stream(cmd: list[str], log: Path) -> tuple[int, int]:
    """Run ``cmd`` with output teed to ``log`` and stdout; return (steps, cached steps)."""
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    cached = steps = 0
    with open(log, "w") as fh, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True,
                                                 env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            sys.stdout.write(line)
            cached += bool(re.search(r"Using cache|CACHED", line))
            steps += bool(re.match(r"(\[\d+/\d+\] )?STEP \d+/\d+: (?!FROM)|#\d+ \[", line))
    if proc.returncode != 0:
        raise BuildFailed(f"image build failed (exit {proc.returncode}); log: {log}")
    return steps, cached


def image_layers(ref: str, eng: str | None = None) -> list[tuple[str, int]]:
    """(uncompressed diff id, bytes) of every layer of a local image, bottom first.

    buildah: the diff ids from the image config, their sizes from the containers-storage
    layer store. docker: the sizes its history reports per layer-making step."""
    eng = eng or engine()
    if eng == "buildah":
        doc = json.loads(_run(["buildah", "inspect", "--type", "image", ref], "buildah inspect"))
        diff_ids = doc["OCIv1"]["rootfs"]["diff_ids"]
        store = Path(_storage_root("buildah")) / "overlay-layers" / "layers.json"
        sizes = {d["diff-digest"]: int(d.get("diff-size", 0))
                 for d in json.loads(store.read_text()) if d.get("diff-digest")}
        return [(d, sizes.get(d, 0)) for d in diff_ids]
    doc = json.loads(_run(["docker", "image", "inspect", ref], "docker image inspect"))[0]
    diff_ids = doc["RootFS"]["Layers"]
    hist = _run(["docker", "history", "--no-trunc", "--human=false", "--format",
                 "{{.Size}}", ref], "docker history").split()
    steps = [int(x) for x in reversed(hist) if int(x) > 0]
    return list(zip(diff_ids, steps + [0] * (len(diff_ids) - len(steps))))


def image_id(ref: str, eng: str | None = None) -> str:
    """``sha256:<id>`` of a local image (a tag or an id)."""
    eng = eng or engine()
    if eng == "buildah":
        raw = _run(["buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}",
                    ref], "buildah inspect")
    else:
        raw = _run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                   "docker image inspect")
    return "sha256:" + raw.strip().removeprefix("sha256:")


def _torch_version(ref: str) -> tuple[str, str]:
    """(torch version, CUDA version) inside the image, ``("", "")`` without torch."""
    from madbench_common.imagefactory.containers import run_in_image

    code = ("import importlib.util as u\nif u.find_spec('torch'):\n import torch\n"
            " print(torch.__version__, torch.version.cuda or '')")
    out = run_in_image(ref, ["python", "-c", code], capture=True)
    parts = out.split()
    return (parts[0], parts[1] if len(parts) > 1 else "") if parts else ("", "")


def _build_one(info: ImageInfo, python_source: str, lock_path: Path | None) -> BuildRecord:
    """Build one image whose parent exists; record it when its image id changed.

    The build holds the machine-wide lock (:func:`build_lock`: builds peak at many GB of
    disk, so several engineers on one machine build one at a time), passes the host CA
    bundle as the build secret ``hostca`` (pip inside ``RUN`` reaches PyPI through it; it
    is never written into a layer), and uses ``buildah bud --isolation chroot --format
    docker`` (the OCI format drops ``SHELL``), or ``docker build`` (BuildKit) where a
    daemon answers and buildah is absent. It samples the disk use of the storage file
    system once a second and records the image id, size, build seconds, disk peak,
    torch/CUDA versions, the commit it was built from and every layer (uncompressed diff
    id and size: what :func:`madbench_common.imagefactory.imagelock.layer_totals` adds up) under
    the slug in ``images/images.lock.yaml`` (``status: built``).
    """
    eng = engine()
    tag = local_ref(info.slug, lock_path)
    fetch_upstream(info)
    with build_lock(info.slug):
        cmd = _build_cmd(eng, info.slug, tag, _build_args(info.slug, python_source, lock_path))
        before = image_id(tag, eng) if image_exists(tag, eng) else ""
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"madbench-build-{info.slug}.log"
        print(f"building {tag} with {eng} (log: {log})", flush=True)
        start = time.perf_counter()
        with _DiskPeak(_storage_root(eng)) as disk:
            steps, cached = _stream(cmd, log)
        seconds = time.perf_counter() - start
    built = image_id(tag, eng)
    layers = tuple(image_layers(tag, eng))
    if built == before:
        old = lock_entry(info.slug, lock_path).get("build") or {}
        torch, cuda = str(old.get("torch") or ""), str(old.get("cuda") or "")
    else:
        torch, cuda = _torch_version(tag) if info.kind in ("torch", "model") else ("", "")
    rec = BuildRecord(info.slug, tag, built, sum(n for _, n in layers), seconds, disk.peak,
                      cached, f"{eng} {_version(eng)}", torch, cuda,
                      commit=_git("describe", "--always", "--dirty", "--abbrev=12"),
                      parent=info.parent, steps=steps, layers=layers)
    if built != before:
        record_build(info.slug, rec.as_lock(), lock_path)
    return rec


def build_image(slug: str, python_source: str = "debootstrap",
                lock_path: Path | None = None, parents: bool = True) -> BuildRecord:
    """Build ``images/<slug>`` and record the result; with ``parents``, its parent chain
    first (each a cache hit when unchanged). Returns the slug's own record."""
    chain = build_order([slug]) if parents else [load_image(slug)]
    if chain[0].kind == "python" and python_source == "debootstrap" and engine() != "buildah":
        raise ConfigError("debootstrap bases need buildah; with docker use "
                          "make base-images PYTHON_SOURCE=registry")
    rec = None
    for info in chain:
        if info.kind == "python" and python_source == "debootstrap":
            with build_lock(f"debian-python {BASES[info.python][1]}"):
                debian_python(info.python)
        rec = _build_one(info, python_source, lock_path)
        if info.slug != slug:
            print(_summary(rec), flush=True)
    assert rec is not None
    return rec


def _version(eng: str) -> str:
    out = subprocess.run([eng, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"\d+\.\d+\.\d+", out)
    return found.group(0) if found else "?"


def build_bases(pythons: Sequence[str] = ("3.11", "3.9"),
                python_source: str = "debootstrap",
                lock_path: Path | None = None) -> list[BuildRecord]:
    """Build the Python bases (``python_source``: ``debootstrap`` offline, or ``registry``):
    ``python-py3XX`` and the runnable ``base-py3XX`` on it. The offline stand-in for the
    registry's ``python:3.X-slim`` is ``debootstrap --variant=minbase`` (bookworm for 3.11,
    bullseye for 3.9)."""
    return [build_image(BASES[p][0], python_source, lock_path) for p in pythons]


def _summary(rec: BuildRecord) -> str:
    return (f"{rec.local_ref}: {rec.image_id[:19]} {rec.size_bytes / 2**30:.2f} GiB, "
            f"built in {rec.build_s:.0f} s ({rec.cached_steps} cached steps), disk peak "
            f"{rec.disk_peak_bytes / 2**30:.1f} GiB, torch {rec.torch or '-'} "
            f"CUDA {rec.cuda or '-'}")


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m madbench_common.imagefactory.imagebuild")
    parser.add_argument("command", choices=["bases", "image", "ref"])
    parser.add_argument("slugs", nargs="*")
    parser.add_argument("--python-source", choices=["debootstrap", "registry"],
                        default=os.environ.get("PYTHON_SOURCE") or "debootstrap")
    parser.add_argument("--lock", type=Path, default=None,
                        help=f"images lock to record builds in (default: {LOCK})")
    args = parser.parse_args(argv)
    try:
        if args.command == "ref":
            print("\n".join(local_ref(s) for s in args.slugs))
            return 0
        recs = (build_bases(args.slugs or ("3.11", "3.9"), args.python_source, args.lock)
                if args.command == "bases"
                else [build_image(s, args.python_source, args.lock) for s in args.slugs])
    except NoEngine as exc:
        print(f"skip: {exc}", file=sys.stderr)
        return 77
    except MadbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for rec in recs:
        print(_summary(rec))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
