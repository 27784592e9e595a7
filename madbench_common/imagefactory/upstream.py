"""Upstream sources at pinned commits, unpacked for image builds and verified by content.

An image's ``upstream_src`` (``images/<slug>/image.yaml``) names a GitHub repository, a
40-hex commit and a ``tree_sha256``.
:func:`~madbench_common.imagefactory.images.fetch_upstream` unpacks that commit into
``images/<slug>/.upstream/<dest>`` (git-ignored) from a local git mirror or GitHub's archive
(:func:`_files`). Neither is trusted (GitHub's tarballs are not byte-stable; a mirror may be
a partial clone): the *extracted tree* is checked (:func:`tree_sha256`), and files an image
does not need and a mirror may lack (videos, papers, checkpoints) are left out of both by
``exclude`` patterns, so both sources provably give the same files.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import socket
import subprocess
import tarfile
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from madbench_common.core.errors import ConfigError

__all__ = ["STAMP", "UpstreamSource", "extract", "fetch_source", "github_reachable",
           "mirror_dir", "record_tree_sha256", "tree_sha256"]

STAMP = ".madbench-commit"
"""Written into each unpacked tree: the commit and its tree sha256 (not part of the hash)."""
_GITHUB = ("codeload.github.com", 443)


@dataclass(frozen=True)
class UpstreamSource:
    """A git repository pinned at a commit, unpacked into ``.upstream/<dest>``.

    ``install``: ``pip`` (``pip install --no-deps``), ``path`` (a ``.pth`` puts it on
    ``sys.path``) or ``copy`` (only copied into ``/opt/upstream/<dest>``). ``subdir``
    unpacks one folder of the repository. ``exclude`` holds ``fnmatch`` patterns of paths
    (relative to ``dest``; ``*`` also matches ``/``) that are not unpacked from either
    source. ``tree_sha256`` is :func:`tree_sha256` of the unpacked tree.
    """

    repo: str
    commit: str
    dest: str
    install: str = "pip"
    subdir: str = ""
    exclude: tuple[str, ...] = ()
    tree_sha256: str = ""


def tree_sha256(root: Path) -> str:
    """sha256 of the regular files under ``root``, independent of how they got there.

    Files are taken in the order of their POSIX paths relative to ``root`` (compared as
    UTF-8 bytes); each contributes the line ``<mode> <size> <path>\\n`` and then its
    bytes, where ``mode`` is ``755`` when any execute bit is set and ``644`` otherwise
    (git stores only that bit). Directories, symlinks and the :data:`STAMP` file are not
    part of the tree (neither source unpacks symlinks).
    """
    files = sorted((p for p in root.rglob("*") if p.is_file() and not p.is_symlink()),
                   key=lambda p: p.relative_to(root).as_posix().encode())
    h = hashlib.sha256()
    for path in files:
        rel = path.relative_to(root).as_posix()
        if rel == STAMP:
            continue
        data = path.read_bytes()
        mode = "755" if path.stat().st_mode & 0o111 else "644"
        h.update(f"{mode} {len(data)} {rel}\n".encode())
        h.update(data)
    return h.hexdigest()


def mirror_dir(repo: str) -> str | None:
    """The local mirror ``$MADBENCH_UPSTREAM_GIT`` names for ``repo`` (``None``: not set)."""
    template = os.environ.get("MADBENCH_UPSTREAM_GIT")
    if not template:
        return None
    owner, name = repo.split("/")
    return template.format(owner=owner, name=name)


def github_reachable(timeout: float = 5.0) -> bool:
    """Whether a TCP connection to GitHub's archive host opens within ``timeout``."""
    try:
        socket.create_connection(_GITHUB, timeout=timeout).close()
    except OSError:
        return False
    return True


def _excluded(rel: str, exclude: Sequence[str]) -> bool:
    return any(fnmatchcase(rel, pat) for pat in exclude)


def _strip(path: str, prefix: str) -> str | None:
    """``path`` relative to ``prefix`` (``None`` when outside it or unsafe)."""
    if not path.startswith(prefix):
        return None
    rel = path[len(prefix):]
    return rel if rel and ".." not in Path(rel).parts else None


def _from_git(src: UpstreamSource, git_dir: str) -> Iterator[tuple[str, bool, bytes]]:
    """(path, executable, bytes) of each file of ``src`` at its commit in a local mirror."""
    found = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "-e",
                            f"{src.commit}^{{commit}}"], capture_output=True)
    if found.returncode != 0:
        raise ConfigError(f"{src.repo}: commit {src.commit} is not in the mirror {git_dir}; "
                          f"update it: git --git-dir {git_dir} fetch origin")
    listing = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "-z", src.commit],
                             check=True, capture_output=True).stdout.split(b"\0")
    prefix = src.subdir.strip("/") + "/" if src.subdir else ""
    entries = []
    for line in filter(None, listing):
        meta, _, raw_path = line.partition(b"\t")
        raw_mode, kind, sha = meta.decode().split()
        rel = _strip(raw_path.decode(), prefix)
        if kind == "blob" and raw_mode != "120000" and rel and not _excluded(rel, src.exclude):
            entries.append((rel, raw_mode == "100755", sha))
    batch = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch"],
                           input=b"".join(sha.encode() + b"\n" for *_, sha in entries),
                           check=True, capture_output=True).stdout
    pos, missing = 0, []
    for rel, executable, _sha in entries:
        end = batch.index(b"\n", pos)
        header = batch[pos:end].split()
        pos = end + 1
        if header[-1] == b"missing":
            missing.append(rel)
            continue
        size = int(header[2])
        yield rel, executable, batch[pos:pos + size]
        pos += size + 1
    if missing:
        raise ConfigError(
            f"{src.repo}@{src.commit[:12]}: the mirror {git_dir} lacks {len(missing)} file(s) "
            f"(a partial clone): {', '.join(missing[:8])}{' …' if len(missing) > 8 else ''}. "
            f"Add them to the source's `exclude` in image.yaml if the image does not need "
            f"them, or complete the mirror (git --git-dir {git_dir} fetch origin {src.commit})")


def _from_archive(src: UpstreamSource) -> Iterator[tuple[str, bool, bytes]]:
    """(path, executable, bytes) of each file of ``src`` from GitHub's tarball."""
    url = f"https://codeload.github.com/{src.repo}/tar.gz/{src.commit}"
    with urllib.request.urlopen(url, timeout=300) as resp:
        data = bytes(resp.read())
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        top = members[0].name.split("/")[0]
        prefix = f"{top}/{src.subdir.strip('/')}/" if src.subdir else f"{top}/"
        for m in members:
            rel = _strip(m.name, prefix)
            if m.isfile() and rel and not _excluded(rel, src.exclude):
                fh = tar.extractfile(m)
                assert fh is not None
                yield rel, bool(m.mode & 0o111), fh.read()


def _files(src: UpstreamSource) -> Iterator[tuple[str, bool, bytes]]:
    """The files of ``src`` from its mirror, else from GitHub; fail at once when neither.

    The mirror is the local git mirror ``$MADBENCH_UPSTREAM_GIT`` names
    (``/path/{owner}+{name}/repo``); otherwise GitHub's archive of the commit
    (``codeload.github.com``). Where GitHub cannot be reached and the mirror is missing,
    the message names the mirror and how to make it."""
    git_dir = mirror_dir(src.repo)
    if git_dir and Path(git_dir).exists():
        return _from_git(src, git_dir)
    if not github_reachable():
        make = f"git clone --mirror https://github.com/{src.repo}.git {git_dir or '<dir>'}"
        if git_dir:
            raise ConfigError(
                f"{src.repo}: the mirror {git_dir} (MADBENCH_UPSTREAM_GIT) is missing and "
                f"GitHub is not reachable from here. Make it on a machine that reaches GitHub "
                f"and copy it here: {make}")
        raise ConfigError(
            f"{src.repo}: GitHub is not reachable from here and MADBENCH_UPSTREAM_GIT is not "
            f"set. Point it at local mirrors, e.g. MADBENCH_UPSTREAM_GIT=/srv/git/"
            "{owner}+{name}/repo, each made where GitHub is reachable with: " + make)
    return _from_archive(src)


def extract(src: UpstreamSource, dest: Path) -> str:
    """Unpack ``src`` into ``dest`` (replacing it); return the tree's sha256."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for rel, executable, data in _files(src):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o755 if executable else 0o644)
    digest = tree_sha256(dest)
    (dest / STAMP).write_text(f"{src.commit} {digest}\n")
    return digest


def fetch_source(src: UpstreamSource, dest: Path, where: str) -> str:
    """Make ``dest`` hold ``src``'s tree and prove it by its sha256; return that sha256.

    An unpacked tree whose stamp names the commit is re-hashed, not trusted; anything else
    is unpacked afresh. A tree whose sha256 differs from ``src.tree_sha256`` fails the
    build, naming the repository (``where`` names the image.yaml)."""
    stamp = dest / STAMP
    current = stamp.exists() and stamp.read_text().split()[:1] == [src.commit]
    digest = tree_sha256(dest) if current else extract(src, dest)
    if current and digest != src.tree_sha256:
        digest = extract(src, dest)
    if not src.tree_sha256:
        raise ConfigError(f"{where}: upstream_src {src.repo} has no tree_sha256; record the "
                          f"unpacked tree's ({digest}) with: python -m "
                          f"madbench_common.imagefactory.images upstream <slug> --record")
    if digest != src.tree_sha256:
        raise ConfigError(
            f"{src.repo}@{src.commit[:12]}: the unpacked tree's sha256 is {digest}, but {where} "
            f"records {src.tree_sha256}: the source does not hold the pinned files")
    return digest


def record_tree_sha256(yaml_path: Path, repo: str, commit: str, digest: str) -> None:
    """Write ``tree_sha256: <digest>`` beside ``commit:`` of ``repo``'s entry, in place."""
    text = yaml_path.read_text()
    entry = re.search(rf"^(\s*)- repo: {re.escape(repo)}\n((?:\1  .*\n)*)", text, re.M)
    if entry is None or f"commit: {commit}" not in entry.group(2):
        raise ConfigError(f"{yaml_path}: no upstream_src entry {repo} at {commit}")
    indent = entry.group(1) + "  "
    body = re.sub(rf"^{indent}tree_sha256: .*\n", "", entry.group(2), flags=re.M)
    body = body.replace(f"{indent}commit: {commit}\n",
                        f"{indent}commit: {commit}\n{indent}tree_sha256: {digest}\n", 1)
    yaml_path.write_text(text[:entry.start(2)] + body + text[entry.end(2):])
