"""The machine's image store as the rehearsal uses it, through buildah: image ids and sizes,
removal under the machine-wide image build lock (removing an image during a build broke that
build), and whether a build fits on the disk, checked before it starts."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from madbench_common.cluster.rehearsal.profile import ROOT
from madbench_common.core.errors import ConfigError, MadbenchError

_SIZE = re.compile(r"^([0-9.]+)\s*([kMGT]?B)$")
_DISK_MARGIN_GIB = 2.0
_BUILD_TMP = Path("/var/tmp")  # buildah's temp folders (containers.conf image_copy_tmp_dir)
_STORAGE = Path("/var/lib/containers/storage")  # root's image store


def _buildah(*args: str, check: bool = True) -> str:
    out = subprocess.run(["buildah", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise ConfigError(f"buildah {' '.join(args)}: {out.stderr.strip()[-500:]}")
    return out.stdout if out.returncode == 0 else ""


def _image_id(ref: str) -> str | None:
    out = subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                          "{{.FromImageID}}", ref], capture_output=True, text=True)
    return out.stdout.strip() or None if out.returncode == 0 else None


def _image_size(image_id: str) -> int | None:
    raw = json.loads(_buildah("images", "--json", image_id) or "[]")
    if not raw:
        return None
    m = _SIZE.match(str(raw[0].get("size", "")).strip())
    if m is None:
        return None
    scale = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[m.group(2)]
    return int(float(m.group(1)) * scale)


def _rmi(image_id: str) -> str:
    """``buildah rmi`` (the caller holds the build lock); ``""`` or the failure, for a log
    line."""
    out = subprocess.run(["buildah", "rmi", image_id], capture_output=True, text=True)
    return "" if out.returncode == 0 else f" (rmi: {out.stderr.strip()[-200:]})"


def disk_problem(slug: str, present: Callable[[str], bool] | None = None,
                 lock: Mapping[str, Any] | None = None,
                 free: Callable[[Path], int] | None = None) -> str | None:
    """Why a build of ``slug`` would run out of disk, or ``None``: the free space where
    buildah writes is below what the images of its chain that are not built yet took at
    their peak when last built (``disk_peak_gb`` in images/images.lock.yaml; a cached
    build recorded less, so this is a floor), plus a margin.

    Builds that fill the disk fail minutes in with "no space left on device" (a torch
    base peaks at 13 to 26 GiB: torch-2.0.1 failed twice at about 17 GiB free in one
    pass); this names the need, the free space and what takes it before the build."""
    from madbench_common.imagefactory.imagebuild import image_exists, local_ref
    from madbench_common.imagefactory.imagelock import read_lock
    from madbench_common.imagefactory.images import chain, load_image

    try:
        slugs = [i.slug for i in chain(load_image(slug))]
        lock = read_lock(ROOT / "images" / "images.lock.yaml") if lock is None else lock
    except (MadbenchError, OSError):
        return None  # no folder or no lock: the build itself says what is wrong
    if present is None:
        def present(s: str) -> bool:
            try:
                return image_exists(local_ref(s), "buildah")
            except (MadbenchError, OSError, KeyError):
                return False
    todo = [s for s in slugs if s == slug or not present(s)]
    peaks = {s: float(((lock.get(s) or {}).get("build") or {}).get("disk_peak_gb") or 0)
             for s in todo}
    need = sum(peaks.values()) + _DISK_MARGIN_GIB
    usage = free or (lambda path: shutil.disk_usage(path).free)
    where = [p for p in (_BUILD_TMP, _STORAGE) if p.exists()] or [Path("/")]
    have = min(usage(p) for p in where) / 2**30
    if have >= need:
        return None
    built = ", ".join(f"{s} {g:.1f}" for s, g in peaks.items())
    return (f"image {slug}: {have:.1f} GiB free on the disk of {', '.join(map(str, where))}, "
            f"but its build needs at least {need:.1f} GiB (the peaks of the last builds, "
            f"images/images.lock.yaml disk_peak_gb, in GiB: {built}; plus "
            f"{_DISK_MARGIN_GIB:.0f} GiB). {_leftovers()}Free space (images removed after "
            "their last pod unless KEEP_IMAGES=1; `buildah rmi --prune` drops unused "
            "layers) and run the same command again: the pass resumes.")


def _leftovers() -> str:
    """Temp folders of builds killed mid-way (buildah leaves ``buildah*``/``storage*`` in
    /var/tmp; 12 GB of them stopped a pass here)."""
    dirs = sorted(p for pattern in ("buildah*", "storage*") for p in _BUILD_TMP.glob(pattern)
                  if p.is_dir() and not p.is_symlink())
    if not dirs:
        return ""
    size = 0
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                with contextlib.suppress(OSError):
                    size += os.lstat(os.path.join(root, f)).st_size
    names = ", ".join(d.name for d in dirs[:4]) + (" …" if len(dirs) > 4 else "")
    return (f"{len(dirs)} temp folders in {_BUILD_TMP} hold {size / 2**30:.1f} GiB ({names}): "
            "builds killed mid-way leave them; remove them when no build is running. ")


def _build_lock_path() -> Path:
    """The machine-wide image build lock that ``madbench_common.imagefactory.imagebuild`` holds
    for a build (the same file and variable)."""
    return Path(os.environ.get("MADBENCH_BUILD_LOCK", "/tmp/madbench-image-build.lock"))


@contextlib.contextmanager
def _build_lock(wait: bool) -> Iterator[bool]:
    """Hold the image build lock; yields False at once when another holds it and not
    ``wait``. (Not imagebuild.build_lock: that module is pod code, in the images' code
    digest, and this one waits without a message.)"""
    with open(_build_lock_path(), "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
