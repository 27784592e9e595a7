"""Model weights: what an image needs, fetching it once, and finding it offline at run time.

Every model image lists its weights in ``images/<slug>/weights.yaml``::

    image: tts-f5
    hf:                                  # Hugging Face repos
      - repo: SWivid/F5-TTS
        revision: main                   # branch, tag or commit; the commit is locked
        files: ["F5TTS_v1_Base/*"]       # glob patterns; omit for the whole repo
    urls:                                # files from outside the hub
      - name: AASIST.pth
        url: https://github.com/clovaai/aasist/raw/<commit>/models/weights/AASIST.pth
        sha256: <64 hex>                 # or null: unknown offline, recorded on first fetch
        md5: <32 hex>                    # optional: the publisher's md5, checked on fetch

A weights root (the ``madbench-weights`` volume, mounted read-only at ``/weights`` in
every stage pod; ``$MADBENCH_WEIGHTS`` elsewhere) is laid out as::

    <root>/huggingface/hub/models--org--name/...   Hugging Face cache (HF_HOME=<root>/huggingface)
    <root>/files/<image>/<name>                    files from outside the hub
    <root>/locks/<image>/weights.lock.json         resolved commits and file sha256s

Only ``madbench weights fetch`` (and the one-off ``workflows/weights.yaml``) talks to the
hub. At run time adapters call :func:`hf_path` / :func:`url_file`, which never download:
a missing weight raises :class:`WeightsMissing` naming the file and the command that
fetches it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import tempfile
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import yaml

from madbench_common.errors import ConfigError, EnvironmentMissing

__all__ = [
    "DEFAULT_ROOT",
    "STANDIN_MARKER",
    "TINY_ARCH_FILE",
    "TINY_MARKER",
    "HFItem",
    "TinyLayout",
    "URLItem",
    "WeightsMissing",
    "WeightsSpec",
    "check_weights",
    "declared_layout",
    "fetch_weights",
    "hf_env",
    "hf_path",
    "install_local_snapshot",
    "layout_problems",
    "load_spec",
    "tiny_layout",
    "url_file",
    "weights_root",
    "written_layout",
]

DEFAULT_ROOT = "/weights"
_IMAGES = Path(__file__).resolve().parents[1] / "images"
"""The repository's images/ folder; inside an image ``$MADBENCH_IMAGES_DIR`` names the copy
of every ``weights.yaml`` the base image ships (``/opt/madbench/images``)."""


class WeightsMissing(EnvironmentMissing):
    """A model weight is not in the weights root; the message says how to fetch it."""

    def __init__(self, what: str, image: str, root: Path) -> None:
        self.what, self.image, self.root = what, image, root
        super().__init__(
            f"model weights missing: {what} is not under {root} (HF_HUB_OFFLINE=1, nothing is "
            f"downloaded at run time); fetch them with: madbench weights fetch --image {image} "
            f"--dest {root}"
        )


@dataclass(frozen=True)
class HFItem:
    """One Hugging Face repository (or the listed files of it)."""

    repo: str
    revision: str = "main"
    files: tuple[str, ...] = ()
    repo_type: str = "model"


@dataclass(frozen=True)
class URLItem:
    """One file from outside the hub, pinned by sha256.

    ``sha256`` None means the publisher gives no checksum and none could be computed
    offline: the first fetch records the file's sha256 in ``weights.lock.json`` (trust on
    first use); pin it in ``weights.yaml`` from that lock. Where the publisher gives an
    ``md5`` (MMAudio's release files), the fetch checks it.
    """

    name: str
    url: str
    sha256: str | None
    md5: str = ""


@dataclass(frozen=True)
class WeightsSpec:
    """Everything one image's models load."""

    image: str
    hf: tuple[HFItem, ...] = ()
    urls: tuple[URLItem, ...] = ()
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def weights_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The weights root: ``root``, else ``$MADBENCH_WEIGHTS``, else ``/weights``."""
    return Path(root or os.environ.get("MADBENCH_WEIGHTS") or DEFAULT_ROOT)


def hf_env(root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Environment that points Hugging Face and torch hub at a weights root, offline."""
    base = weights_root(root)
    return {"HF_HOME": str(base / "huggingface"), "HF_HUB_CACHE": str(base / "huggingface/hub"),
            "TORCH_HOME": str(base / "torch"), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "MADBENCH_WEIGHTS": str(base)}


def load_spec(image: str, images_dir: Path | None = None) -> WeightsSpec:
    """Parse ``images/<image>/weights.yaml`` (strictly: unknown keys are errors)."""
    folder = images_dir or Path(os.environ.get("MADBENCH_IMAGES_DIR") or _IMAGES)
    path = folder / image / "weights.yaml"
    if not path.exists():
        raise ConfigError(f"{path}: no weights.yaml for image {image!r}")
    doc = yaml.safe_load(path.read_text()) or {}
    unknown = set(doc) - {"image", "hf", "urls", "notes"}
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}")
    if doc.get("image", image) != image:
        raise ConfigError(f"{path}: image {doc['image']!r} does not match folder {image!r}")
    try:
        hf = tuple(HFItem(repo=d["repo"], revision=str(d.get("revision", "main")),
                          files=tuple(d.get("files", ())), repo_type=d.get("repo_type", "model"))
                   for d in doc.get("hf") or ())
        urls = tuple(URLItem(name=str(d["name"]), url=str(d["url"]), sha256=d.get("sha256"),
                             md5=str(d.get("md5") or "")) for d in doc.get("urls") or ())
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: malformed entry ({exc})") from None
    for u in urls:
        if (u.sha256 is not None and not (isinstance(u.sha256, str)
                                          and re.fullmatch(r"[0-9a-f]{64}", u.sha256))) or (
                "/" in u.name) or not re.fullmatch(r"(|[0-9a-f]{32})", u.md5):
            raise ConfigError(f"{path}: {u.name}: needs a 64-hex sha256 (quote it) or null "
                              f"(recorded on first fetch), an optional 32-hex md5 and a plain "
                              f"file name")
    return WeightsSpec(image=image, hf=hf, urls=urls, notes=str(doc.get("notes", "")))


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


def _sha256(path: Path, algo: str = "sha256") -> str:
    h = hashlib.new(algo)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fetch_hf(item: HFItem, base: Path) -> dict[str, Any]:
    from huggingface_hub import HfApi, snapshot_download

    info = HfApi().repo_info(item.repo, revision=item.revision, repo_type=item.repo_type,
                             files_metadata=True)
    commit = str(info.sha)
    snap = Path(snapshot_download(item.repo, revision=commit, repo_type=item.repo_type,
                                  cache_dir=_hub_cache(base),
                                  allow_patterns=list(item.files) or None))
    ref = _hub_cache(base) / f"{item.repo_type}s--{item.repo.replace('/', '--')}" / "refs"
    ref.mkdir(parents=True, exist_ok=True)
    (ref / item.revision.replace("/", "_")).write_text(commit)
    files = {}
    for path in sorted(p for p in snap.rglob("*") if p.is_file()):
        rel = path.relative_to(snap).as_posix()
        if not item.files or any(fnmatch.fnmatch(rel, pat) for pat in item.files):
            files[rel] = _sha256(path)
    if not files:
        raise ConfigError(f"{item.repo}@{commit}: no file matches {list(item.files)}")
    return {"repo": item.repo, "revision": item.revision, "commit": commit, "files": files}


def _mismatch(path: Path, item: URLItem) -> str:
    """Why ``path`` is not the file ``item`` pins (empty when it is)."""
    if item.sha256 is not None and (got := _sha256(path)) != item.sha256:
        return f"sha256 {got} != {item.sha256}"
    if item.md5 and (got := _sha256(path, "md5")) != item.md5:
        return f"md5 {got} != {item.md5}"
    return ""


def _fetch_url(item: URLItem, image: str, base: Path) -> dict[str, Any]:
    dest = base / "files" / image / item.name
    if not (dest.exists() and not _mismatch(dest, item)):
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=dest.parent, delete=False) as tmp, \
                urllib.request.urlopen(item.url, timeout=600) as resp:
            shutil.copyfileobj(resp, tmp)
        why = _mismatch(Path(tmp.name), item)
        if why:
            Path(tmp.name).unlink()
            raise ConfigError(f"{item.url}: {why} in weights.yaml")
        os.replace(tmp.name, dest)
    return {"name": item.name, "url": item.url, "sha256": item.sha256 or _sha256(dest),
            "sha256_pinned": item.sha256 is not None, **({"md5": item.md5} if item.md5 else {})}


def fetch_weights(image: str, dest: str | os.PathLike[str],
                  images_dir: Path | None = None) -> Path:
    """Download exactly what ``weights.yaml`` lists into ``dest``; write the lock; return it."""
    spec = load_spec(image, images_dir)
    base = Path(dest)
    lock = {"image": image, "hf": [_fetch_hf(i, base) for i in spec.hf],
            "urls": [_fetch_url(u, image, base) for u in spec.urls]}
    path = base / "locks" / image / "weights.lock.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    return path


def _check_hf(item: HFItem, image: str, base: Path) -> list[str]:
    try:
        snap = hf_path(item.repo, image=image, revision=item.revision, root=base,
                       repo_type=item.repo_type)
    except WeightsMissing as exc:
        return [str(exc)]
    files = [p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file()]
    return [f"model weights missing: {item.repo}@{item.revision}: no file matches {pat!r} "
            f"under {snap}; fetch them with: madbench weights fetch --image {image} "
            f"--dest {base}"
            for pat in item.files if not any(fnmatch.fnmatch(f, pat) for f in files)]


def _check_url(item: URLItem, image: str, base: Path, checksums: bool = True) -> list[str]:
    try:
        path = url_file(item.name, image=image, root=base)
    except WeightsMissing as exc:
        return [str(exc)]
    got = _sha256(path) if checksums else item.sha256
    if item.sha256 is not None and got != item.sha256:
        return [f"{path}: sha256 {got} != {item.sha256} in weights.yaml; fetch it again with: "
                f"madbench weights fetch --image {image} --dest {base}"]
    return []


def check_weights(image: str, root: str | os.PathLike[str] | None = None,
                  images_dir: Path | None = None, checksums: bool = True) -> list[str]:
    """Problems with what ``weights.yaml`` lists under ``root`` (offline); ``[]`` when all
    is there: every hub repo at its revision with a file per pattern, every URL file
    with its sha256 (``checksums=False``: present, whatever its bytes — a tiny checkpoint
    written where a pinned release file goes)."""
    spec = load_spec(image, images_dir)
    base = weights_root(root)
    problems = [msg for item in spec.hf for msg in _check_hf(item, image, base)]
    return problems + [msg for item in spec.urls
                       for msg in _check_url(item, image, base, checksums)]


def install_local_snapshot(
    root: str | os.PathLike[str], repo: str, src: str | os.PathLike[str],
    revision: str = "0" * 40, ref: str = "main", repo_type: str = "model",
) -> Path:
    """Lay out a local directory (e.g. a tiny ``save_pretrained`` model) as a cached snapshot.

    Tests and ``make image-test`` use it to put tiny random checkpoints where the real
    ones go, so adapters run their real offline loading code against them.
    """
    folder = _hub_cache(Path(root)) / f"{repo_type}s--{repo.replace('/', '--')}"
    snap = folder / "snapshots" / revision
    shutil.copytree(src, snap, dirs_exist_ok=True)
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / ref).write_text(revision)
    return snap


TINY_ARCH_FILE = "madbench_arch.json"
"""A file a tiny checkpoint may add to a release layout: the widths an adapter gives
upstream classes whose sizes are fixed in code (F5-TTS's packaged config, MMAudio's named
networks). A real release never has it, and the adapter then uses upstream's own sizes."""
TINY_MARKER = "madbench_tiny_random.json"
"""A file a tiny checkpoint may add: it marks the snapshot as tiny and random, so the omni and
audio-LM adapters label their versions (and answers) as such."""
STANDIN_MARKER = "madbench_standin.json"
"""A file a stand-in snapshot adds (hub-only remote code replaced by
:mod:`madbench_common.models.standins`): which release it stands in for."""
_TINY_FILES = (TINY_ARCH_FILE, TINY_MARKER, STANDIN_MARKER)

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True)
class TinyLayout:
    """What a tiny-checkpoint writer writes under a weights root: hub repo → paths inside
    its snapshot, and the names it writes under ``files/<image>/`` (URL items)."""

    hub: Mapping[str, tuple[str, ...]]
    urls: tuple[str, ...] = ()

    def merged(self, *others: TinyLayout) -> TinyLayout:
        hub = {repo: set(files) for repo, files in self.hub.items()}
        for other in others:
            for repo, files in other.hub.items():
                hub.setdefault(repo, set()).update(files)
        return TinyLayout({r: tuple(sorted(f)) for r, f in hub.items()},
                          tuple(sorted({*self.urls, *(u for o in others for u in o.urls)})))


def tiny_layout(hub: Mapping[str, Iterable[str]], urls: Iterable[str] = (),
                *parts: Callable[..., Any]) -> Callable[[_F], _F]:
    """Declare what a tiny-checkpoint writer writes (plus what the writers in ``parts``
    it calls write); ``tests/models/test_tiny_layouts.py`` compares the declaration with
    ``weights.yaml`` in the main suite and with the files written in the image's venv."""
    own = TinyLayout({r: tuple(f) for r, f in hub.items()}, tuple(urls))

    def mark(fn: _F) -> _F:
        setattr(fn, "__madbench_tiny_layout__",  # noqa: B010 (a function attribute)
                own.merged(*(declared_layout(p) for p in parts)))
        return fn
    return mark


def declared_layout(writer: Callable[..., Any]) -> TinyLayout:
    """The :class:`TinyLayout` a writer declared with :func:`tiny_layout`."""
    layout = getattr(writer, "__madbench_tiny_layout__", None)
    if not isinstance(layout, TinyLayout):
        raise ConfigError(f"{getattr(writer, '__qualname__', writer)} declares no tiny layout "
                          "(madbench_common.weights.tiny_layout)")
    return layout


def written_layout(root: str | os.PathLike[str], image: str) -> TinyLayout:
    """What is under a weights root: every hub snapshot's files (by repo; the hub cache's
    ``models--org--name`` folders) and the names under ``files/<image>/``."""
    base = Path(root)
    hub: dict[str, set[str]] = {}
    for folder in sorted(_hub_cache(base).glob("models--*")):
        repo = folder.name[len("models--"):].replace("--", "/")
        for snap in sorted((folder / "snapshots").glob("*")):
            hub.setdefault(repo, set()).update(
                p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())
    files = base / "files" / image
    urls = sorted(p.name for p in files.iterdir() if p.is_file()) if files.is_dir() else []
    return TinyLayout({r: tuple(sorted(f)) for r, f in hub.items()}, tuple(urls))


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
