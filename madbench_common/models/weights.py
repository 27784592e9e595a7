"""Model weights: what an image needs, pinned, fetched once, and found offline at run time.

Every model image lists its weights in ``images/<slug>/weights.yaml`` (hub repos with file
patterns, URLs), and ``madbench weights pin`` writes each entry's commit and sha256s in
place (:mod:`madbench_common.models.weights_pin`). ``madbench weights fetch`` downloads
exactly what is pinned into a weights root (the ``madbench-weights`` volume at
``/weights``; ``$MADBENCH_WEIGHTS`` elsewhere), refuses a file whose digest differs and an
unpinned entry unless allowed, and writes the root's lock. At run time adapters call
:func:`hf_path` / :func:`url_file`, which never download: a missing weight raises
:class:`WeightsMissing` naming the file and the command that fetches it. The file format
and the root's layout are in the README (Model weights).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import tempfile
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError, EnvironmentMissing
from madbench_common.core.hashing import digest_mismatch, file_digest
from madbench_common.models.weights_layout import (
    STANDIN_MARKER,
    TINY_ARCH_FILE,
    TINY_MARKER,
    TinyLayout,
    declared_layout,
    install_local_snapshot,
    tiny_layout,
    written_layout,
)

__all__ = [
    "DEFAULT_ROOT",
    "STANDIN_MARKER",
    "TINY_ARCH_FILE",
    "TINY_MARKER",
    "UNPINNED",
    "HFItem",
    "TinyLayout",
    "URLItem",
    "UnpinnedWeights",
    "WeightsMismatch",
    "WeightsMissing",
    "WeightsSpec",
    "check_weights",
    "declared_layout",
    "fetch_weights",
    "hf_env",
    "hf_path",
    "hub_endpoint",
    "install_local_snapshot",
    "layout_problems",
    "load_spec",
    "pin_problem",
    "spec_path",
    "tiny_layout",
    "unpinned_entries",
    "url_file",
    "weights_images",
    "weights_root",
    "written_layout",
]

DEFAULT_ROOT = "/weights"
UNPINNED = "unpinned"
"""The value of a URL item's ``sha256`` until ``madbench weights pin`` records it."""
_IMAGES = Path(__file__).resolve().parents[2] / "images"
"""The repository's images/ folder; inside an image ``$MADBENCH_IMAGES_DIR`` names the copy
of every ``weights.yaml`` the base image ships (``/opt/madbench/images``)."""
_HF_KEYS = frozenset({"repo", "revision", "files", "repo_type", "commit", "sha256"})
_URL_KEYS = frozenset({"name", "url", "sha256", "md5"})
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class WeightsMissing(EnvironmentMissing):
    """A model weight is not in the weights root; the message says how to fetch it."""

    def __init__(self, what: str, image: str, root: Path) -> None:
        self.what, self.image, self.root = what, image, root
        super().__init__(
            f"model weights missing: {what} is not under {root} (HF_HUB_OFFLINE=1, nothing is "
            f"downloaded at run time); fetch them with: madbench weights fetch --image {image} "
            f"--dest {root}"
        )


class UnpinnedWeights(ConfigError):
    """``weights.yaml`` entries without a pin, where pins are required."""


class WeightsMismatch(ConfigError):
    """A downloaded file is not the one ``weights.yaml`` pins (never retried: exit 3)."""


@dataclass(frozen=True)
class HFItem:
    """One Hugging Face repository (or the listed files of it) and its pin.

    ``commit`` is the commit ``revision`` resolved to when pinned, ``sha256`` the sha256 of
    every file of the item at that commit (path in the repo → hex); both empty until
    ``madbench weights pin`` writes them."""

    repo: str
    revision: str = "main"
    files: tuple[str, ...] = ()
    repo_type: str = "model"
    commit: str | None = None
    sha256: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def label(self) -> str:
        return f"{self.repo}@{self.revision}"


@dataclass(frozen=True)
class URLItem:
    """One file from outside the hub, pinned by sha256.

    ``sha256`` None (``unpinned`` in the YAML) until ``madbench weights pin`` downloads the
    file and records it. Where the publisher gives an ``md5`` (MMAudio's release files),
    pinning and fetching check it too.
    """

    name: str
    url: str
    sha256: str | None
    md5: str = ""

    @property
    def label(self) -> str:
        return self.name


@dataclass(frozen=True)
class WeightsSpec:
    """Everything one image's models load."""

    image: str
    hf: tuple[HFItem, ...] = ()
    urls: tuple[URLItem, ...] = ()
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def weights_images(images_dir: Path | None = None) -> list[str]:
    """Slugs of every image folder with a ``weights.yaml``, sorted."""
    folder = images_dir or Path(os.environ.get("MADBENCH_IMAGES_DIR") or _IMAGES)
    return sorted(p.parent.name for p in folder.glob("*/weights.yaml"))


def weights_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The weights root: ``root``, else ``$MADBENCH_WEIGHTS``, else ``/weights``."""
    return Path(root or os.environ.get("MADBENCH_WEIGHTS") or DEFAULT_ROOT)


def hub_endpoint(endpoint: str | None = None) -> str | None:
    """The hub to talk to: ``endpoint``, else ``$HF_ENDPOINT`` (read now, not at import)."""
    return endpoint or os.environ.get("HF_ENDPOINT") or None


def hf_env(root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Environment that points Hugging Face and torch hub at a weights root, offline."""
    base = weights_root(root)
    return {"HF_HOME": str(base / "huggingface"), "HF_HUB_CACHE": str(base / "huggingface/hub"),
            "TORCH_HOME": str(base / "torch"), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "MADBENCH_WEIGHTS": str(base)}


def spec_path(image: str, images_dir: Path | None = None) -> Path:
    """``<images>/<image>/weights.yaml`` (``$MADBENCH_IMAGES_DIR`` inside an image)."""
    folder = images_dir or Path(os.environ.get("MADBENCH_IMAGES_DIR") or _IMAGES)
    return folder / image / "weights.yaml"


def _url_sha256(value: Any, where: str) -> str | None:
    if value is None or value == UNPINNED:
        return None
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise ConfigError(f"{where}: sha256 needs 64 hex digits (quote it) or `{UNPINNED}`")
    if value == "0" * 64:
        raise ConfigError(f"{where}: an all-zero sha256 is a placeholder, not a hash; write "
                          f"`sha256: {UNPINNED}` and pin it with madbench weights pin")
    return value


def _hf_item(d: dict[str, Any], where: str) -> HFItem:
    item = HFItem(repo=d["repo"], revision=str(d.get("revision", "main")),
                  files=tuple(d.get("files", ())), repo_type=d.get("repo_type", "model"),
                  commit=d.get("commit"), sha256=dict(d.get("sha256") or {}))
    where = f"{where}: {item.repo}"
    if item.commit is not None and not (isinstance(item.commit, str)
                                        and _COMMIT.fullmatch(item.commit)):
        raise ConfigError(f"{where}: commit needs 40 hex digits (quote it)")
    if item.commit and _COMMIT.fullmatch(item.revision) and item.revision != item.commit:
        raise ConfigError(f"{where}: revision {item.revision} is a commit, but the pin says "
                          f"{item.commit}")
    for rel, sha in item.sha256.items():
        if not (isinstance(rel, str) and isinstance(sha, str) and _SHA256.fullmatch(sha)):
            raise ConfigError(f"{where}: sha256 of {rel!r} needs 64 hex digits (quote it)")
    return item


def load_spec(image: str, images_dir: Path | None = None) -> WeightsSpec:
    """Parse ``images/<image>/weights.yaml`` (strictly: unknown keys are errors)."""
    path = spec_path(image, images_dir)
    if not path.exists():
        raise ConfigError(f"{path}: no weights.yaml for image {image!r}")
    doc = yaml.safe_load(path.read_text()) or {}
    unknown = set(doc) - {"image", "hf", "urls", "notes"}
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}")
    if doc.get("image", image) != image:
        raise ConfigError(f"{path}: image {doc['image']!r} does not match folder {image!r}")
    for d, keys in [(d, _HF_KEYS) for d in doc.get("hf") or ()] + [
            (d, _URL_KEYS) for d in doc.get("urls") or ()]:
        if not isinstance(d, dict) or set(d) - keys:
            raise ConfigError(f"{path}: entry {d!r}: allowed keys are {sorted(keys)}")
    try:
        hf = tuple(_hf_item(d, str(path)) for d in doc.get("hf") or ())
        urls = tuple(URLItem(name=str(d["name"]), url=str(d["url"]),
                             sha256=_url_sha256(d.get("sha256"), f"{path}: {d['name']}"),
                             md5=str(d.get("md5") or "")) for d in doc.get("urls") or ())
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: malformed entry ({exc})") from None
    for u in urls:
        if "/" in u.name or not re.fullmatch(r"(|[0-9a-f]{32})", u.md5):
            raise ConfigError(f"{path}: {u.name}: needs an optional 32-hex md5 and a plain "
                              f"file name")
    if len({i.repo for i in hf}) != len(hf) or len({u.name for u in urls}) != len(urls):
        raise ConfigError(f"{path}: a repository or file name is listed twice")
    return WeightsSpec(image=image, hf=hf, urls=urls, notes=str(doc.get("notes", "")))


def _matches(rel: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatch(rel, pat) for pat in patterns)


def pin_problem(item: HFItem | URLItem) -> str:
    """Why ``item`` is not pinned (``""`` when it is): the reason ``weights status`` lists."""
    if isinstance(item, URLItem):
        return "" if item.sha256 else "no sha256 recorded"
    if item.commit is None:
        if _COMMIT.fullmatch(item.revision):
            return "revision is a commit, but no file sha256 is recorded"
        return f"revision {item.revision!r} not resolved to a commit"
    if not item.sha256:
        return "no file sha256 recorded"
    stale = [f for f in item.sha256 if item.files and not _matches(f, item.files)]
    if stale:
        return f"pinned file {stale[0]!r} matches none of files {list(item.files)} (pin again)"
    lacking = [p for p in item.files if not _matches_any(p, item.sha256)]
    if lacking:
        return f"pattern {lacking[0]!r} has no pinned file (pin again)"
    return ""


def _matches_any(pattern: str, files: Iterable[str]) -> bool:
    return any(fnmatch.fnmatch(f, pattern) for f in files)


def unpinned_entries(spec: WeightsSpec) -> list[tuple[HFItem | URLItem, str]]:
    """Every entry of ``spec`` that is not pinned, with the reason."""
    items: list[HFItem | URLItem] = [*spec.hf, *spec.urls]
    return [(i, why) for i in items if (why := pin_problem(i))]


def _hub_cache(root: Path) -> Path:
    return root / "huggingface" / "hub"


def hf_path(
    repo: str,
    *,
    image: str,
    filename: str | None = None,
    revision: str | None = None,
    root: str | os.PathLike[str] | None = None,
    repo_type: str = "model",
) -> Path:
    """Local path of a fetched repo snapshot, or of one file in it; never downloads."""
    base = weights_root(root)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snap = Path(snapshot_download(repo, revision=revision, repo_type=repo_type,
                                      cache_dir=_hub_cache(base), local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError):
        raise WeightsMissing(f"{repo}@{revision or 'main'}", image, base) from None
    if filename is None:
        return snap
    path = snap / filename
    if not path.exists():
        raise WeightsMissing(f"{repo}/{filename}", image, base)
    return path


def url_file(name: str, *, image: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Local path of a fetched non-hub file of ``image``; never downloads."""
    base = weights_root(root)
    path = base / "files" / image / name
    if not path.exists():
        raise WeightsMissing(f"files/{image}/{name}", image, base)
    return path



def _repo_folder(base: Path, item: HFItem) -> Path:
    return _hub_cache(base) / f"{item.repo_type}s--{item.repo.replace('/', '--')}"


def _write_ref(base: Path, item: HFItem, commit: str) -> None:
    """``refs/<revision>`` → ``commit``: what adapters' offline lookups of the revision find."""
    ref = _repo_folder(base, item) / "refs"
    ref.mkdir(parents=True, exist_ok=True)
    (ref / item.revision.replace("/", "_")).write_text(commit)


def _evict(path: Path) -> None:
    """Remove a snapshot file and the cache blob it links to."""
    blob = path.resolve()
    path.unlink(missing_ok=True)
    if blob != path:
        blob.unlink(missing_ok=True)


def _fetch_pinned_hf(item: HFItem, base: Path, endpoint: str | None) -> dict[str, Any]:
    """Exactly the pinned files at the pinned commit, each checked against its sha256."""
    from huggingface_hub import hf_hub_download

    assert item.commit is not None
    for rel in sorted(item.sha256):
        path = Path(hf_hub_download(item.repo, rel, revision=item.commit,
                                    repo_type=item.repo_type, cache_dir=_hub_cache(base),
                                    endpoint=endpoint))
        got = file_digest(path)
        if got != item.sha256[rel]:
            _evict(path)
            raise WeightsMismatch(
                f"{item.repo}@{item.commit}: {rel}: sha256 {got} != {item.sha256[rel]} "
                f"pinned in weights.yaml; refused and removed from {_hub_cache(base)} (the "
                "hub or a mirror served other bytes, or the local copy was damaged: fetch "
                "again; if it persists, the upstream file changed: check it, then pin again)")
    _write_ref(base, item, item.commit)
    return {"repo": item.repo, "revision": item.revision, "commit": item.commit,
            "pinned": True, "files": dict(sorted(item.sha256.items()))}


def _fetch_unpinned_hf(item: HFItem, base: Path, endpoint: str | None) -> dict[str, Any]:
    """The revision's current commit (allowed unpinned): its sha256s are recorded, not checked."""
    from huggingface_hub import HfApi, snapshot_download

    info = HfApi(endpoint=endpoint).repo_info(item.repo, revision=item.revision,
                                              repo_type=item.repo_type)
    commit = str(info.sha)
    snap = Path(snapshot_download(item.repo, revision=commit, repo_type=item.repo_type,
                                  cache_dir=_hub_cache(base), endpoint=endpoint,
                                  allow_patterns=list(item.files) or None))
    _write_ref(base, item, commit)
    files = {}
    for path in sorted(p for p in snap.rglob("*") if p.is_file()):
        rel = path.relative_to(snap).as_posix()
        if not item.files or _matches(rel, item.files):
            files[rel] = file_digest(path)
    if not files:
        raise ConfigError(f"{item.repo}@{commit}: no file matches {list(item.files)}")
    return {"repo": item.repo, "revision": item.revision, "commit": commit, "pinned": False,
            "files": files}


def _fetch_url(item: URLItem, image: str, base: Path) -> dict[str, Any]:
    dest = base / "files" / image / item.name
    if not (dest.exists() and not digest_mismatch(dest, item.sha256, item.md5)):
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=dest.parent, delete=False) as tmp, \
                urllib.request.urlopen(item.url, timeout=600) as resp:
            shutil.copyfileobj(resp, tmp)
        why = digest_mismatch(Path(tmp.name), item.sha256, item.md5)
        if why:
            Path(tmp.name).unlink()
            raise WeightsMismatch(f"{item.url}: {why} in weights.yaml; refused")
        os.replace(tmp.name, dest)
    return {"name": item.name, "url": item.url, "sha256": item.sha256 or file_digest(dest),
            "sha256_pinned": item.sha256 is not None, **({"md5": item.md5} if item.md5 else {})}


def _unpinned_message(image: str, loose: list[tuple[HFItem | URLItem, str]]) -> str:
    listed = "; ".join(f"{i.label}: {why}" for i, why in loose)
    return (f"images/{image}/weights.yaml has {len(loose)} unpinned entr"
            f"{'y' if len(loose) == 1 else 'ies'} ({listed}); pin them where the hub is "
            f"reachable with `madbench weights pin --image {image}` and commit weights.yaml, "
            "or pass --allow-unpinned (recorded in the weights lock)")


def fetch_weights(image: str, dest: str | os.PathLike[str], images_dir: Path | None = None,
                  *, allow_unpinned: bool = False, endpoint: str | None = None) -> Path:
    """Download exactly what ``weights.yaml`` pins into ``dest``; write the lock; return it.

    An unpinned entry is refused (:class:`UnpinnedWeights`) unless ``allow_unpinned``; then
    its revision's current commit (or the URL's current file) is fetched and its sha256s
    recorded, and the lock says so (``allow_unpinned``, ``unpinned``)."""
    spec = load_spec(image, images_dir)
    loose = unpinned_entries(spec)
    if loose and not allow_unpinned:
        raise UnpinnedWeights(_unpinned_message(image, loose))
    base, hub = Path(dest), hub_endpoint(endpoint)
    hf = [(_fetch_unpinned_hf if pin_problem(i) else _fetch_pinned_hf)(i, base, hub)
          for i in spec.hf]
    lock = {"image": image, "allow_unpinned": allow_unpinned,
            "unpinned": [i.label for i, _ in loose], "hf": hf,
            "urls": [_fetch_url(u, image, base) for u in spec.urls]}
    path = base / "locks" / image / "weights.lock.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    return path


def _check_hf(item: HFItem, image: str, base: Path, checksums: bool = True) -> list[str]:
    fix = f"fetch them with: madbench weights fetch --image {image} --dest {base}"
    if checksums and not pin_problem(item):
        return _check_pinned_hf(item, image, base, fix)
    try:
        snap = hf_path(item.repo, image=image, revision=item.revision, root=base,
                       repo_type=item.repo_type)
    except WeightsMissing as exc:
        return [str(exc)]
    files = [p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file()]
    return [f"model weights missing: {item.label}: no file matches {pat!r} under {snap}; {fix}"
            for pat in item.files if not any(fnmatch.fnmatch(f, pat) for f in files)]


def _check_pinned_hf(item: HFItem, image: str, base: Path, fix: str) -> list[str]:
    """The pinned commit's snapshot holds every pinned file with its sha256, and the
    revision's ref (what adapters look up) points at that commit."""
    try:
        snap = hf_path(item.repo, image=image, revision=item.commit, root=base,
                       repo_type=item.repo_type)
    except WeightsMissing as exc:
        return [str(exc)]
    problems = []
    ref = _repo_folder(base, item) / "refs" / item.revision.replace("/", "_")
    if not ref.exists() or ref.read_text().strip() != item.commit:
        problems.append(f"{item.label}: {ref} does not point at the pinned commit "
                        f"{item.commit}; {fix}")
    for rel, want in sorted(item.sha256.items()):
        path = snap / rel
        if not path.exists():
            problems.append(f"model weights missing: {item.repo}/{rel} at {item.commit}; {fix}")
        elif (got := file_digest(path)) != want:
            problems.append(f"{path}: sha256 {got} != {want} pinned in weights.yaml; {fix}")
    return problems


def _check_url(item: URLItem, image: str, base: Path,
               checksums: bool = True) -> list[str]:
    try:
        path = url_file(item.name, image=image, root=base)
    except WeightsMissing as exc:
        return [str(exc)]
    got = file_digest(path) if checksums else item.sha256
    if item.sha256 is not None and got != item.sha256:
        return [f"{path}: sha256 {got} != {item.sha256} in weights.yaml; fetch it again with: "
                f"madbench weights fetch --image {image} --dest {base}"]
    return []


def check_weights(image: str, root: str | os.PathLike[str] | None = None,
                  images_dir: Path | None = None, checksums: bool = True) -> list[str]:
    """Problems with what ``weights.yaml`` lists under ``root`` (offline); ``[]`` when all
    is there: every pinned hub file at its commit with its sha256 (an unpinned repo at
    its revision with a file per pattern), every URL file with its pinned sha256
    (``checksums=False``: present by name, whatever its bytes — a tiny checkpoint written
    where a pinned release file goes)."""
    spec = load_spec(image, images_dir)
    base = weights_root(root)
    problems = [msg for item in spec.hf for msg in _check_hf(item, image, base, checksums)]
    return problems + [msg for item in spec.urls
                       for msg in _check_url(item, image, base, checksums)]


_TINY_FILES = (TINY_ARCH_FILE, TINY_MARKER, STANDIN_MARKER)  # allowed anywhere in a layout


def layout_problems(image: str, layout: TinyLayout, images_dir: Path | None = None) -> list[str]:
    """How ``layout`` differs from ``images/<image>/weights.yaml`` by name (no checksums):
    every file is one the spec fetches (a whole-repo item takes any; ``TINY_ARCH_FILE``
    and the tiny/stand-in markers are allowed anywhere), every pattern has a file, every
    URL item is there."""
    spec = load_spec(image, images_dir)
    items = {i.repo: i for i in spec.hf}
    problems = []

    def real(files: Iterable[str]) -> list[str]:
        return [f for f in files if PurePosixPath(f).name not in _TINY_FILES]

    for repo, files in layout.hub.items():
        item = items.get(repo)
        if item is None:
            problems.append(f"{repo}: written, but images/{image}/weights.yaml fetches no "
                            "such repository")
            continue
        problems += [f"{repo}/{f}: written, but weights.yaml fetches no such file "
                     f"(files: {list(item.files)})" for f in real(files)
                     if item.files and not any(fnmatch.fnmatch(f, p) for p in item.files)]
    for item in spec.hf:
        have = real(layout.hub.get(item.repo, ()))
        if not have:
            problems.append(f"{item.repo}: in weights.yaml, but nothing is written for it")
            continue
        problems += [f"{item.repo}: weights.yaml fetches {pat!r}, but no such file is written"
                     for pat in item.files if not any(fnmatch.fnmatch(f, pat) for f in have)]
    names = {u.name for u in spec.urls}
    problems += [f"files/{image}/{n}: written, but weights.yaml has no such URL item"
                 for n in real(layout.urls) if n not in names]
    problems += [f"files/{image}/{n}: a URL item of weights.yaml, but not written"
                 for n in sorted(names - set(layout.urls))]
    return problems
