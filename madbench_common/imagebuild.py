"""Build MADBench images on one machine, without a registry: bases, model images, records.

``make base-images`` makes the Python bases offline: a Debian stand-in for the registry's
``python:3.X-slim`` image (``debootstrap --variant=minbase``: bookworm for 3.11, bullseye
for 3.9) and ``images/base-py311`` / ``images/base-py39`` built FROM it. ``make image
IMAGE=<slug>`` fetches the slug's upstream sources and builds ``images/<slug>/Dockerfile``
FROM its base. Every build

- runs under one machine-wide lock (``$MADBENCH_BUILD_LOCK``, default
  ``/tmp/madbench-image-build.lock``): builds peak at many GB of disk, so several
  engineers on one machine build one at a time; a waiting build says whom it waits for;
- passes the host CA bundle as the build secret ``hostca`` (pip inside ``RUN`` reaches
  PyPI through it; it is never written into a layer);
- uses ``buildah bud --isolation chroot --format docker`` (the OCI format drops ``SHELL``),
  or ``docker build`` (BuildKit) where a daemon answers and buildah is absent;
- samples the disk use of the storage file system once a second and records the image
  id, size, build seconds, disk peak and torch/CUDA versions under the slug in
  ``images/images.lock.yaml`` (``status: built``), only when the image id changed.

Local tags are ``localhost/madbench/<slug>:<tag>``, the tag taken from the slug's ``ref``
in the images lock. A build that fails raises :class:`BuildFailed`; only a machine with
no build engine at all is a skip (:class:`NoEngine`, exit 77 from the CLI).
"""

from __future__ import annotations

import argparse
import fcntl
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

from madbench_common.errors import ConfigError, MadbenchError
from madbench_common.imagelock import lock_entry, record_build
from madbench_common.images import IMAGES, fetch_upstream, load_image

__all__ = ["BASES", "BuildFailed", "BuildRecord", "NoEngine", "build_bases", "build_image",
           "build_lock", "debian_python", "engine", "image_exists", "local_ref"]

BASES = {"3.11": ("base-py311", "bookworm"), "3.9": ("base-py39", "bullseye")}
"""Python version → (base image slug, Debian suite whose python3 is that version)."""
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

    def as_lock(self) -> dict[str, Any]:
        return {"local_ref": self.local_ref, "image_id": self.image_id,
                "size_mb": round(self.size_bytes / 2**20), "build_s": round(self.build_s),
                "disk_peak_gb": round(self.disk_peak_bytes / 2**30, 1),
                "cached_steps": self.cached_steps, "engine": self.engine,
                "torch": self.torch or None, "cuda": self.cuda or None,
                "built_at": datetime.now(timezone.utc).strftime("%Y-%m-%d")}


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


def _build_args(slug: str, python_source: str) -> dict[str, str]:
    """Build arguments: the base (a local tag, never a registry pull here) and labels."""
    rev = subprocess.run(["git", "-C", str(_ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip() or "unknown"
    args = {"REVISION": rev, "VERSION": local_ref(slug).rsplit(":", 1)[1]}
    base = next((b for b in BASES.values() if b[0] == slug), None)
    if base is not None:
        python = next(p for p, b in BASES.items() if b[0] == slug)
        if python_source == "debootstrap":
            args["PYTHON_IMAGE"] = debian_python(python)
        return args
    base_ref = local_ref(BASES[load_image(slug).python][0])
    if not image_exists(base_ref):
        raise ConfigError(f"{slug}: base image {base_ref} is not built; run: make base-images")
    args["BASE_IMAGE"] = base_ref
    return args


def _build_cmd(eng: str, slug: str, tag: str, args: dict[str, str]) -> list[str]:
    dockerfile = IMAGES / slug / "Dockerfile"
    if not dockerfile.exists():
        raise ConfigError(f"{dockerfile}: missing")
    cmd = ([eng, "bud", "--isolation", "chroot", "--format", "docker", "--layers"]
           if eng == "buildah" else [eng, "build"])
    cmd += ["-f", str(dockerfile), "-t", tag, "--secret", f"id=hostca,src={host_ca()}"]
    for key, value in sorted(args.items()):
        cmd += ["--build-arg", f"{key}={value}"]
    return [*cmd, str(_ROOT)]


def _stream(cmd: list[str], log: Path) -> int:
    """Run ``cmd`` with output teed to ``log`` and stdout; return the cached-step count."""
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    cached = 0
    with open(log, "w") as fh, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True,
                                                 env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            sys.stdout.write(line)
            cached += bool(re.search(r"Using cache|CACHED", line))
    if proc.returncode != 0:
        raise BuildFailed(f"image build failed (exit {proc.returncode}); log: {log}")
    return cached


def _inspect(eng: str, ref: str) -> tuple[str, int]:
    """(image id, size in bytes) of a local image."""
    if eng == "buildah":
        image_id = _run(["buildah", "inspect", "--type", "image", "--format",
                         "{{.FromImageID}}", ref], "buildah inspect").strip()
        size = _run(["podman", "image", "inspect", "--format", "{{.Size}}", ref],
                    "podman image inspect") if shutil.which("podman") else "0"
    else:
        image_id, size = _run(["docker", "image", "inspect", "--format", "{{.Id}} {{.Size}}",
                               ref], "docker image inspect").split()
    return ("sha256:" + image_id.removeprefix("sha256:"), int(size.strip() or 0))


def _torch_version(ref: str) -> tuple[str, str]:
    """(torch version, CUDA version) inside the image, ``("", "")`` without torch."""
    from madbench_common.containers import run_in_image

    code = ("import importlib.util as u\nif u.find_spec('torch'):\n import torch\n"
            " print(torch.__version__, torch.version.cuda or '')")
    out = run_in_image(ref, ["python", "-c", code], capture=True)
    parts = out.split()
    return (parts[0], parts[1] if len(parts) > 1 else "") if parts else ("", "")


def build_image(slug: str, python_source: str = "debootstrap",
                lock_path: Path | None = None) -> BuildRecord:
    """Build ``images/<slug>`` (fetching its upstream sources first) and record the result."""
    eng = engine()
    tag = local_ref(slug, lock_path)
    if (IMAGES / slug / "image.yaml").exists():
        fetch_upstream(load_image(slug))
    with build_lock(slug):
        cmd = _build_cmd(eng, slug, tag, _build_args(slug, python_source))
        before = _inspect(eng, tag)[0] if image_exists(tag, eng) else ""
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"madbench-build-{slug}.log"
        print(f"building {tag} with {eng} (log: {log})", flush=True)
        start = time.perf_counter()
        with _DiskPeak(_storage_root(eng)) as disk:
            cached = _stream(cmd, log)
        seconds = time.perf_counter() - start
    image_id, size = _inspect(eng, tag)
    torch, cuda = _torch_version(tag) if slug not in {b[0] for b in BASES.values()} else ("", "")
    rec = BuildRecord(slug, tag, image_id, size, seconds, disk.peak, cached,
                      f"{eng} {_version(eng)}", torch, cuda)
    if image_id != before:
        record_build(slug, rec.as_lock(), lock_path)
    return rec


def _version(eng: str) -> str:
    out = subprocess.run([eng, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"\d+\.\d+\.\d+", out)
    return found.group(0) if found else "?"


def build_bases(pythons: Sequence[str] = ("3.11", "3.9"),
                python_source: str = "debootstrap") -> list[BuildRecord]:
    """Build the Python bases (``python_source``: ``debootstrap`` offline, or ``registry``)."""
    if python_source == "debootstrap" and engine() != "buildah":
        raise ConfigError("debootstrap bases need buildah; with docker use "
                          "make base-images PYTHON_SOURCE=registry")
    out = []
    for python in pythons:
        if python_source == "debootstrap":
            with build_lock(f"debian-python {BASES[python][1]}"):
                debian_python(python)
        out.append(build_image(BASES[python][0], python_source))
    return out


def _summary(rec: BuildRecord) -> str:
    return (f"{rec.local_ref}: {rec.image_id[:19]} {rec.size_bytes / 2**30:.2f} GiB, "
            f"built in {rec.build_s:.0f} s ({rec.cached_steps} cached steps), disk peak "
            f"{rec.disk_peak_bytes / 2**30:.1f} GiB, torch {rec.torch or '-'} "
            f"CUDA {rec.cuda or '-'}")


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m madbench_common.imagebuild")
    parser.add_argument("command", choices=["bases", "image", "ref"])
    parser.add_argument("slugs", nargs="*")
    parser.add_argument("--python-source", choices=["debootstrap", "registry"],
                        default=os.environ.get("PYTHON_SOURCE") or "debootstrap")
    args = parser.parse_args(argv)
    try:
        if args.command == "ref":
            print("\n".join(local_ref(s) for s in args.slugs))
            return 0
        recs = (build_bases(args.slugs or ("3.11", "3.9"), args.python_source)
                if args.command == "bases"
                else [build_image(s, args.python_source) for s in args.slugs])
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
