"""The image factory's metadata: one ``images/<slug>/image.yaml`` per model image.

Every model image folder holds the same files (see ``images/README.md``)::

    images/<slug>/Dockerfile          FROM an ARG (the base), multi-stage, ends as uid 10001
    images/<slug>/requirements.in     -r ../common.in, then the family's PyPI pins
    images/<slug>/requirements.lock   uv pip compile --generate-hashes (this file's python)
    images/<slug>/weights.yaml        what the models load (madbench_common.weights)
    images/<slug>/image.yaml          this module's ImageInfo

Upstream code that is not on PyPI is listed under ``upstream_src`` at a pinned commit
and fetched into ``images/<slug>/.upstream/<dest>`` (git-ignored, never committed) from
GitHub's archive, or from a local git mirror named by ``$MADBENCH_UPSTREAM_GIT``
(a template such as ``/srv/git/{owner}/{name}.git``). The image build copies it in; the
adapter-test venv installs or path-adds it the same way.

``python -m madbench_common.images <command> <slug>`` is what the Makefile calls.
"""

from __future__ import annotations

import argparse
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

import yaml

from madbench_common.errors import ConfigError

__all__ = ["IMAGES", "ImageInfo", "UpstreamSource", "fetch_upstream", "list_images",
           "load_image", "lock_command"]

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "images"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_PLATFORM = "x86_64-manylinux_2_28"
_KEYS = {"slug", "paper_name", "upstream", "licence", "python", "torch", "gpu", "models",
         "adapter_tests", "upstream_src", "uv_args", "notes"}


@dataclass(frozen=True)
class UpstreamSource:
    """A git repository pinned at a commit; ``install`` is ``pip`` (no deps) or ``path``."""

    repo: str
    commit: str
    dest: str
    install: str = "pip"
    subdir: str = ""


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
            folder=folder)
    except KeyError as exc:
        raise ConfigError(f"{path}: missing key {exc}") from None


def list_images(images_dir: Path | None = None) -> list[ImageInfo]:
    """Every folder with an ``image.yaml``, sorted by slug."""
    folder = images_dir or IMAGES
    return [load_image(p.parent.name, folder) for p in sorted(folder.glob("*/image.yaml"))]


def lock_command(info: ImageInfo, uv: str = "uv") -> list[str]:
    """The ``uv pip compile`` call that makes ``requirements.lock`` from ``requirements.in``."""
    cmd = [uv, "pip", "compile", "--quiet", "--generate-hashes", "--no-header",
           "--python-version", info.python, "--python-platform", _PLATFORM, *info.uv_args]
    for extra, flag in (("overrides.txt", "--overrides"), ("constraints.txt", "--constraints")):
        if (info.dir / extra).exists():
            cmd += [flag, extra]
    return [*cmd, "requirements.in", "-o", "requirements.lock"]


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
    parser.add_argument("command", choices=["list", "show", "lock-cmd", "upstream", "tests"])
    parser.add_argument("slug", nargs="?")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(i.slug for i in list_images()))
        return 0
    if not args.slug:
        parser.error("this command needs an image slug")
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


if __name__ == "__main__":
    sys.exit(_main())
