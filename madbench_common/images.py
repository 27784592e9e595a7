"""The image factory's metadata: one ``images/<slug>/image.yaml`` per model image.

Every model image folder holds the same files (see ``images/README.md``)::

    images/<slug>/Dockerfile          FROM an ARG (the base), multi-stage, ends as uid 10001
    images/<slug>/requirements.in     -r ../common.in, then the family's PyPI pins
    images/<slug>/requirements.lock   uv pip compile --generate-hashes (this file's python)
    images/<slug>/weights.yaml        what the models load (madbench_common.weights)
    images/<slug>/image.yaml          this module's ImageInfo (and its ImageTest)

Upstream code that is not on PyPI is listed under ``upstream_src`` at a pinned commit
and fetched into ``images/<slug>/.upstream/<dest>`` (git-ignored, never committed) from
GitHub's archive, or from a local git mirror named by ``$MADBENCH_UPSTREAM_GIT``
(a template such as ``/srv/git/{owner}/{name}.git``). The image build copies it in; the
adapter-test venv installs or path-adds it the same way.

An optional ``image_test:`` block says how ``make image-test IMAGE=<slug>`` proves the
built image (see :class:`ImageTest` and ``madbench_common.imagetest``).

``requirements.lock`` starts with a header that records the sha256 of its inputs
(``requirements.in``, every file it ``-r`` includes, ``overrides.txt``,
``constraints.txt``, the python and uv arguments), so a stale lock is caught offline.

``python -m madbench_common.images <command> <slug>`` is what the Makefile calls.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from madbench_common.errors import ConfigError

__all__ = ["IMAGES", "ImageInfo", "ImageTest", "UpstreamSource", "fetch_upstream",
           "list_images", "load_image", "lock_command", "lock_inputs_sha256", "lock_is_current",
           "lock_misses", "select_lock", "write_lock"]

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "images"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_PLATFORM = "x86_64-manylinux_2_28"
_KEYS = {"slug", "paper_name", "upstream", "licence", "python", "torch", "gpu", "models",
         "adapter_tests", "upstream_src", "uv_args", "notes", "image_test"}
_TEST_KEYS = {"stages", "params", "weights", "clips", "load_models"}
_BASE_PYTHON = {"base-py311": "3.11", "base-py39": "3.9"}
_HEADER = "# madbench-lock inputs-sha256="


@dataclass(frozen=True)
class UpstreamSource:
    """A git repository pinned at a commit; ``install`` is ``pip`` (no deps) or ``path``."""

    repo: str
    commit: str
    dest: str
    install: str = "pip"
    subdir: str = ""


@dataclass(frozen=True)
class ImageTest:
    """How ``make image-test`` proves a built image (``image_test:`` in ``image.yaml``).

    ``stages`` run inside the image, in order, one shard each and then their merge, as uid
    10001 with a read-only root, no network and the weights mounted read-only at
    ``/weights``. Every stage they read from that is not itself listed runs first on the
    host, in-process, with its default (CPU reference) model. Sources are the first
    ``clips`` demo clips. ``weights`` (``module:function``) runs inside the image before
    the stages with the weights folder writable, as ``function(weights_root)``: it writes a
    tiny randomly initialised checkpoint in the real layout with the upstream classes.
    Every model the image registers is imported, and instantiated when ``load_models``.
    """

    stages: tuple[str, ...]
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    weights: str = ""
    clips: int = 2
    load_models: bool = True


def _image_test(doc: Any, path: Path) -> ImageTest | None:
    if doc is None:
        return None
    unknown = set(doc) - _TEST_KEYS if isinstance(doc, dict) else {"<not a mapping>"}
    if unknown or not doc.get("stages"):
        raise ConfigError(f"{path}: image_test needs `stages` and takes only "
                          f"{sorted(_TEST_KEYS)} (unknown: {sorted(unknown)})")
    weights = str(doc.get("weights") or "")
    if weights and not re.match(r"^[\w.]+:\w+$", weights):
        raise ConfigError(f"{path}: image_test.weights must be module:function")
    params = doc.get("params") or {}
    if not all(isinstance(v, dict) for v in params.values()):
        raise ConfigError(f"{path}: image_test.params maps a stage to its parameters")
    return ImageTest(stages=tuple(doc["stages"]), params=dict(params), weights=weights,
                     clips=int(doc.get("clips", 2)), load_models=bool(doc.get("load_models",
                                                                               True)))


@dataclass(frozen=True)
class ImageInfo:
    slug: str
    paper_name: str
    upstream: str
    licence: str
    python: str
    torch: str
    gpu: bool
    models: tuple[str, ...]
    adapter_tests: tuple[str, ...]
    upstream_src: tuple[UpstreamSource, ...] = ()
    uv_args: tuple[str, ...] = ()
    notes: str = ""
    image_test: ImageTest | None = None
    folder: Path = field(default=IMAGES)

    @property
    def dir(self) -> Path:
        return self.folder / self.slug

    @property
    def base(self) -> str:
        """The base image slug for this image's Python."""
        return "base-py" + self.python.replace(".", "")


def load_image(slug: str, images_dir: Path | None = None) -> ImageInfo:
    """Parse and check ``images/<slug>/image.yaml``."""
    folder = images_dir or IMAGES
    path = folder / slug / "image.yaml"
    if not path.exists():
        raise ConfigError(f"{path}: missing (every model image has an image.yaml)")
    doc = yaml.safe_load(path.read_text()) or {}
    unknown = set(doc) - _KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}")
    if doc.get("slug") != slug:
        raise ConfigError(f"{path}: slug {doc.get('slug')!r} does not match folder {slug!r}")
    if str(doc.get("python")) not in {"3.11", "3.9"}:
        raise ConfigError(f"{path}: python must be 3.11 (bookworm) or 3.9 (bullseye)")
    srcs = []
    for d in doc.get("upstream_src") or ():
        src = UpstreamSource(**d)
        if not _COMMIT.match(src.commit) or src.install not in {"pip", "path"}:
            raise ConfigError(f"{path}: {src.repo}: needs a 40-hex commit, install pip|path")
        srcs.append(src)
    try:
        return ImageInfo(
            slug=slug, paper_name=str(doc["paper_name"]), upstream=str(doc["upstream"]),
            licence=str(doc["licence"]), python=str(doc["python"]), torch=str(doc["torch"]),
            gpu=bool(doc["gpu"]), models=tuple(doc.get("models") or ()),
            adapter_tests=tuple(doc.get("adapter_tests") or ()), upstream_src=tuple(srcs),
            uv_args=tuple(doc.get("uv_args") or ()), notes=str(doc.get("notes", "")),
            image_test=_image_test(doc.get("image_test"), path), folder=folder)
    except KeyError as exc:
        raise ConfigError(f"{path}: missing key {exc}") from None


def list_images(images_dir: Path | None = None) -> list[ImageInfo]:
    """Every folder with an ``image.yaml``, sorted by slug."""
    folder = images_dir or IMAGES
    return [load_image(p.parent.name, folder) for p in sorted(folder.glob("*/image.yaml"))]


def base_info(slug: str, images_dir: Path | None = None) -> ImageInfo:
    """An :class:`ImageInfo` for a base image (``base-py311``, ``base-py39``: no image.yaml)."""
    if slug not in _BASE_PYTHON:
        raise ConfigError(f"{slug!r} is not a base image ({sorted(_BASE_PYTHON)})")
    return ImageInfo(slug=slug, paper_name="", upstream="", licence="Apache-2.0",
                     python=_BASE_PYTHON[slug], torch="", gpu=False, models=(),
                     adapter_tests=(), folder=images_dir or IMAGES)


def info_for_lock(slug: str, images_dir: Path | None = None) -> ImageInfo:
    """The image (or base) whose ``requirements.lock`` is meant."""
    return base_info(slug, images_dir) if slug in _BASE_PYTHON else load_image(slug, images_dir)


def lock_command(info: ImageInfo, uv: str = "uv") -> list[str]:
    """The ``uv pip compile`` call that makes ``requirements.lock`` from ``requirements.in``."""
    cmd = [uv, "pip", "compile", "--quiet", "--generate-hashes", "--no-header",
           "--python-version", info.python, "--python-platform", _PLATFORM, *info.uv_args]
    for extra, flag in (("overrides.txt", "--overrides"), ("constraints.txt", "--constraints")):
        if (info.dir / extra).exists():
            cmd += [flag, extra]
    return [*cmd, "requirements.in", "-o", "requirements.lock"]


def _lock_inputs(path: Path, seen: list[Path]) -> None:
    """``path`` and every file it includes with ``-r`` / ``-c``, depth first."""
    if path in seen:
        return
    seen.append(path)
    for line in path.read_text().splitlines():
        found = re.match(r"^\s*(?:-r|-c|--requirement|--constraint)[ =]\s*(\S+)", line)
        if found:
            _lock_inputs((path.parent / found.group(1)).resolve(), seen)


def lock_inputs_sha256(info: ImageInfo) -> str:
    """sha256 of what ``requirements.lock`` is resolved from (files, python, uv arguments)."""
    files: list[Path] = []
    _lock_inputs((info.dir / "requirements.in").resolve(), files)
    files += [info.dir / n for n in ("overrides.txt", "constraints.txt") if (info.dir / n).exists()]
    h = hashlib.sha256(f"python={info.python} platform={_PLATFORM} "
                       f"uv_args={list(info.uv_args)}\n".encode())
    for path in files:
        h.update(f"{path.name}\n".encode() + path.read_bytes() + b"\n")
    return h.hexdigest()


def lock_misses(info: ImageInfo) -> list[str]:
    """Requirements of ``requirements.in`` (and its includes) the lock does not satisfy,
    for the image's python on x86_64 Linux; checked offline with ``packaging``."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {canonicalize_name(m.group(1)): m.group(2) for m in re.finditer(
        r"^([A-Za-z0-9_.\-]+)==(\S+)", (info.dir / "requirements.lock").read_text(), re.M)}
    env = {"python_version": info.python, "python_full_version": f"{info.python}.0",
           "sys_platform": "linux", "platform_machine": "x86_64"}
    files: list[Path] = []
    _lock_inputs((info.dir / "requirements.in").resolve(), files)
    misses = []
    for path in files:
        for line in path.read_text().splitlines():
            text = line.split("#", 1)[0].strip()
            if not text or text.startswith("-"):
                continue
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            pinned = pins.get(canonicalize_name(req.name))
            if pinned is None or not req.specifier.contains(pinned, prereleases=True):
                misses.append(f"{path.name}: {text} (locked: {pinned or 'absent'})")
    return misses


def write_lock(info: ImageInfo, uv: str = "uv") -> Path:
    """Re-resolve ``requirements.lock`` with uv and stamp its inputs' sha256 in the header."""
    subprocess.run(lock_command(info, uv), cwd=info.dir, check=True)
    lock = info.dir / "requirements.lock"
    lock.write_text(f"{_HEADER}{lock_inputs_sha256(info)}\n"
                    f"# regenerate with: make lock IMAGE={info.slug}\n" + lock.read_text())
    return lock


def lock_is_current(info: ImageInfo) -> bool:
    """Whether ``requirements.lock``'s header matches its inputs as they are now, and every
    requirement of the inputs is satisfied by a pin of the lock."""
    lock = info.dir / "requirements.lock"
    first = lock.read_text().partition("\n")[0] if lock.exists() else ""
    return first == _HEADER + lock_inputs_sha256(info) and not lock_misses(info)


def select_lock(lock_text: str, names: list[str]) -> str:
    """The blocks (``name==version`` plus its hashes) of ``names`` from a lock's text."""
    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    def name_of(block: str) -> str:
        return norm(re.split(r"[=\s;\[]", block, maxsplit=1)[0])

    wanted = {norm(n) for n in names}
    picked = [b.strip() for b in re.split(r"\n(?=\S)", lock_text) if name_of(b) in wanted]
    missing = wanted - {name_of(b) for b in picked}
    if missing:
        raise ConfigError(f"not in the lock: {sorted(missing)}")
    return "\n".join(picked) + "\n"


def _git_tar(git_dir: str, commit: str) -> bytes:
    """A tar (under ``src/``) of ``commit`` from a local git dir; blobs the mirror lacks
    (large files a partial mirror leaves out) are skipped with a warning on stderr."""
    listing = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "-z", commit],
                             check=True, capture_output=True).stdout.split(b"\0")
    entries = []
    for line in filter(None, listing):
        meta, _, raw_path = line.partition(b"\t")
        raw_mode, kind, raw_sha = meta.split()
        if kind == b"blob":
            entries.append((int(raw_mode, 8), raw_sha.decode(), raw_path.decode()))
    batch = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch"],
                           input=b"".join(sha.encode() + b"\n" for _, sha, _ in entries),
                           check=True, capture_output=True).stdout
    buf, pos = io.BytesIO(), 0
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for mode, sha, path in entries:
            end = batch.index(b"\n", pos)
            header = batch[pos:end].split()
            pos = end + 1
            if header[-1] == b"missing":
                print(f"warning: {git_dir}: {path} ({sha}) is not in the mirror; skipped",
                      file=sys.stderr)
                continue
            size = int(header[2])
            data, pos = batch[pos:pos + size], pos + size + 1
            info = tarfile.TarInfo(f"src/{path}")
            if mode == 0o120000:
                info.type, info.linkname = tarfile.SYMTYPE, data.decode()
            else:
                info.size, info.mode = size, mode & 0o777
            tar.addfile(info, None if info.issym() else io.BytesIO(data))
    return buf.getvalue()


def _archive(src: UpstreamSource) -> bytes:
    owner, name = src.repo.split("/")
    mirror = os.environ.get("MADBENCH_UPSTREAM_GIT")
    if mirror:
        git_dir = mirror.format(owner=owner, name=name)
        if Path(git_dir).exists():
            return _git_tar(git_dir, src.commit)
    url = f"https://codeload.github.com/{src.repo}/tar.gz/{src.commit}"
    with urllib.request.urlopen(url, timeout=300) as resp:
        return bytes(resp.read())


def fetch_upstream(info: ImageInfo) -> list[Path]:
    """Unpack every ``upstream_src`` at its commit into ``images/<slug>/.upstream/<dest>``."""
    out = []
    for src in info.upstream_src:
        dest = info.dir / ".upstream" / src.dest
        stamp = dest / ".madbench-commit"
        if stamp.exists() and stamp.read_text().strip() == src.commit:
            out.append(dest)
            continue
        shutil.rmtree(dest, ignore_errors=True)
        data = _archive(src)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            members = tar.getmembers()
            top = members[0].name.split("/")[0]
            prefix = f"{top}/{src.subdir.strip('/')}/" if src.subdir else f"{top}/"
            for m in members:
                if m.name.startswith(prefix) and not m.issym() and not m.islnk():
                    m.name = m.name[len(prefix):]
                    if m.name and ".." not in Path(m.name).parts:
                        tar.extract(m, dest)
        stamp.write_text(src.commit + "\n")
        out.append(dest)
    return out


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m madbench_common.images")
    parser.add_argument("command", choices=["list", "show", "lock-cmd", "lock", "check-lock",
                                            "upstream", "tests", "select"])
    parser.add_argument("slug", nargs="?", help="image slug (select: a lock file)")
    parser.add_argument("names", nargs="*", help="select: package names")
    parser.add_argument("--uv", default="uv")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(i.slug for i in list_images()))
        return 0
    if not args.slug:
        parser.error("this command needs an image slug")
    if args.command == "select":
        print(select_lock(Path(args.slug).read_text(), args.names), end="")
        return 0
    if args.command in ("lock", "check-lock"):
        return _lock_main(info_for_lock(args.slug), args.command, args.uv)
    info = load_image(args.slug)
    if args.command == "show":
        print(f"python={info.python} torch={info.torch} gpu={info.gpu} base={info.base}")
    elif args.command == "lock-cmd":
        print(" ".join(lock_command(info)))
    elif args.command == "upstream":
        for path in fetch_upstream(info):
            print(path)
    else:
        print(" ".join(info.adapter_tests))
    return 0


def _lock_main(info: ImageInfo, command: str, uv: str) -> int:
    if command == "lock":
        print(write_lock(info, uv))
        return 0
    if lock_is_current(info):
        return 0
    misses = "".join(f"\n  not satisfied: {m}" for m in lock_misses(info))
    print(f"images/{info.slug}/requirements.lock is stale: its inputs changed since it was "
          f"resolved; run: make lock IMAGE={info.slug}{misses}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(_main())
