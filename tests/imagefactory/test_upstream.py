"""Upstream sources verified by content (madbench_common/imagefactory/upstream.py): the same
tree sha256 from a git mirror and from GitHub's tarball, a mismatch fails naming the repository, a
partial mirror or a missing one fails at once saying how to fix it."""

from __future__ import annotations

import io
import subprocess
import time
from pathlib import Path

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.imagefactory import upstream
from madbench_common.imagefactory.images import list_images
from madbench_common.imagefactory.upstream import (
    STAMP,
    UpstreamSource,
    extract,
    fetch_source,
    record_tree_sha256,
    tree_sha256,
)

REPO = "owner/name"


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> tuple[Path, str]:
    """A repository with a script (executable), code, a large file and a symlink."""
    src = tmp_path / "origin"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "media").mkdir()
    (src / "media" / "demo.mp4").write_bytes(b"\0" * 4096)
    (src / "link").symlink_to("pkg/mod.py")
    _git("init", "-q", "-b", "main", cwd=src)
    _git("config", "uploadpack.allowFilter", "true", cwd=src)
    _git("add", "-A", cwd=src)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c", cwd=src)
    return src, _git("rev-parse", "HEAD", cwd=src)


def _mirror(tmp_path: Path, src: Path, partial: bool = False) -> str:
    """``$MADBENCH_UPSTREAM_GIT`` for a mirror of ``src`` (a partial clone: no big blobs)."""
    dest = tmp_path / "mirrors" / "owner+name" / "repo"
    cmd = ["clone", "-q", "--mirror", *(["--filter=blob:limit=1k"] if partial else []),
           f"file://{src}", str(dest)]
    _git(*cmd)
    if partial:  # like the mirrors here: no promisor remote to fetch the missing blobs from
        _git("--git-dir", str(dest), "remote", "remove", "origin")
    return str(tmp_path / "mirrors" / "{owner}+{name}" / "repo")


def _serve_archive(monkeypatch: pytest.MonkeyPatch, src: Path, commit: str) -> None:
    """GitHub's codeload answer (``git archive`` of the commit under ``name-<commit>/``)."""
    data = subprocess.run(["git", "archive", "--format=tar.gz", f"--prefix=name-{commit}/",
                           commit], cwd=src, check=True, capture_output=True).stdout

    def urlopen(url: str, timeout: float) -> io.BytesIO:
        assert url == f"https://codeload.github.com/{REPO}/tar.gz/{commit}"
        return io.BytesIO(data)

    monkeypatch.setattr(upstream.urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(upstream, "github_reachable", lambda timeout=5.0: True)
    monkeypatch.delenv("MADBENCH_UPSTREAM_GIT", raising=False)


def test_mirror_and_archive_give_the_same_tree(tmp_path: Path, origin: tuple[Path, str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    src, commit = origin
    spec = UpstreamSource(repo=REPO, commit=commit, dest="x")
    monkeypatch.setenv("MADBENCH_UPSTREAM_GIT", _mirror(tmp_path, src))
    from_git = extract(spec, tmp_path / "a")
    _serve_archive(monkeypatch, src, commit)
    from_tar = extract(spec, tmp_path / "b")
    assert from_git == from_tar == tree_sha256(tmp_path / "a")
    assert (tmp_path / "a" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "b" / "pkg" / "mod.py").stat().st_mode & 0o777 == 0o644
    assert not (tmp_path / "a" / "link").exists() and not (tmp_path / "b" / "link").exists()
    assert (tmp_path / "a" / STAMP).read_text().split() == [commit, from_git]


def test_the_tree_hash_sees_paths_modes_and_bytes(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "a.py").write_text("1\n")
    first = tree_sha256(root)
    (root / STAMP).write_text("anything\n")
    assert tree_sha256(root) == first, "the stamp is not part of the tree"
    (root / "a.py").chmod(0o755)
    assert tree_sha256(root) != first
    (root / "a.py").chmod(0o644)
    (root / "a.py").rename(root / "b.py")
    assert tree_sha256(root) != first
    (root / "b.py").rename(root / "a.py")
    assert tree_sha256(root) == first
    (root / "a.py").write_text("2\n")
    assert tree_sha256(root) != first


def test_a_tree_that_differs_from_the_record_fails_naming_the_repo(
        tmp_path: Path, origin: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    src, commit = origin
    monkeypatch.setenv("MADBENCH_UPSTREAM_GIT", _mirror(tmp_path, src))
    good = extract(UpstreamSource(repo=REPO, commit=commit, dest="x"), tmp_path / "probe")
    spec = UpstreamSource(repo=REPO, commit=commit, dest="x", tree_sha256=good)
    dest = tmp_path / "x"
    assert fetch_source(spec, dest, "image.yaml") == good
    (dest / "pkg" / "mod.py").write_text("X = 2\n")  # tampered after unpacking: re-unpacked
    assert fetch_source(spec, dest, "image.yaml") == good
    assert (dest / "pkg" / "mod.py").read_text() == "X = 1\n"
    wrong = UpstreamSource(repo=REPO, commit=commit, dest="x", tree_sha256="0" * 64)
    with pytest.raises(ConfigError, match=rf"{REPO}@{commit[:12]}: the unpacked tree's sha256"):
        fetch_source(wrong, dest, "image.yaml")
    unrecorded = UpstreamSource(repo=REPO, commit=commit, dest="x")
    with pytest.raises(ConfigError, match="no tree_sha256; record"):
        fetch_source(unrecorded, dest, "image.yaml")


def test_a_partial_mirror_fails_unless_the_missing_files_are_excluded(
        tmp_path: Path, origin: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    src, commit = origin
    monkeypatch.setenv("MADBENCH_UPSTREAM_GIT", _mirror(tmp_path, src, partial=True))
    spec = UpstreamSource(repo=REPO, commit=commit, dest="x")
    with pytest.raises(ConfigError, match=r"lacks 1 file\(s\) \(a partial clone\): "
                                          r"media/demo\.mp4.*exclude"):
        extract(spec, tmp_path / "a")
    trimmed = UpstreamSource(repo=REPO, commit=commit, dest="x", exclude=("media/*",))
    from_git = extract(trimmed, tmp_path / "a")
    _serve_archive(monkeypatch, src, commit)
    assert extract(trimmed, tmp_path / "b") == from_git
    assert not (tmp_path / "b" / "media").exists()


def test_a_missing_mirror_without_github_fails_at_once(
        tmp_path: Path, origin: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _, commit = origin
    monkeypatch.setattr(upstream, "github_reachable", lambda timeout=5.0: False)
    monkeypatch.setenv("MADBENCH_UPSTREAM_GIT", str(tmp_path / "none" / "{owner}+{name}"))
    spec = UpstreamSource(repo=REPO, commit=commit, dest="x", tree_sha256="0" * 64)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        fetch_source(spec, tmp_path / "x", "image.yaml")
    assert time.perf_counter() - start < 5
    assert str(tmp_path / "none" / "owner+name") in str(err.value)
    assert f"git clone --mirror https://github.com/{REPO}.git" in str(err.value)
    monkeypatch.delenv("MADBENCH_UPSTREAM_GIT")
    with pytest.raises(ConfigError, match="MADBENCH_UPSTREAM_GIT is not set"):
        fetch_source(spec, tmp_path / "x", "image.yaml")


def test_a_mirror_without_the_commit_says_so(tmp_path: Path, origin: tuple[Path, str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    src, _ = origin
    monkeypatch.setenv("MADBENCH_UPSTREAM_GIT", _mirror(tmp_path, src))
    spec = UpstreamSource(repo=REPO, commit="1" * 40, dest="x")
    with pytest.raises(ConfigError, match="is not in the mirror"):
        extract(spec, tmp_path / "x")


def test_record_writes_the_hash_beside_the_commit(tmp_path: Path) -> None:
    path = tmp_path / "image.yaml"
    path.write_text("slug: s\nupstream_src:\n  - repo: a/b\n    commit: " + "c" * 40 +
                    "\n    dest: b\n  - repo: o/n\n    commit: " + "d" * 40 +
                    "\n    tree_sha256: " + "0" * 64 + "\n    dest: n\nnotes: x\n")
    record_tree_sha256(path, "o/n", "d" * 40, "e" * 64)
    record_tree_sha256(path, "a/b", "c" * 40, "f" * 64)
    assert path.read_text() == (
        "slug: s\nupstream_src:\n  - repo: a/b\n    commit: " + "c" * 40 +
        "\n    tree_sha256: " + "f" * 64 + "\n    dest: b\n  - repo: o/n\n    commit: " +
        "d" * 40 + "\n    tree_sha256: " + "e" * 64 + "\n    dest: n\nnotes: x\n")


def test_every_upstream_source_records_its_tree() -> None:
    srcs = [(i.slug, s) for i in list_images() for s in i.upstream_src]
    assert len({s.repo for _, s in srcs}) >= 13
    for slug, src in srcs:
        assert len(src.tree_sha256) == 64, f"{slug}: {src.repo} has no tree_sha256"
