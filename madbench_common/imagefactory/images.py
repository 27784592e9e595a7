"""The image factory's metadata: one ``images/<slug>/image.yaml`` per image, of four kinds.

Images are layered python → base or torch → model, each built FROM its parent and adding
only what the parent lacks (:class:`ImageInfo`); their locks are layered the same way
(:func:`write_lock`), and each Dockerfile is rendered from ``images/Dockerfile.j2``
(:func:`render_all`). A model image's test runs its catalog cards' slot stages, plus its
optional ``image_test:`` block (:class:`ImageTest`, ``madbench_common.testing.imagetest``).
``python -m madbench_common.imagefactory.images <command> <slug>`` is what the Makefile calls.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError
from madbench_common.imagefactory.imagelock import LOCK, lock_entry, with_new_entries
from madbench_common.imagefactory.upstream import UpstreamSource, fetch_source, record_tree_sha256

__all__ = ["IMAGES", "KINDS", "README", "TEMPLATE", "ImageInfo", "ImageTest", "UpstreamSource",
           "all_images", "build_order", "card_models", "card_stages", "effective_lock",
           "effective_pins", "fetch_upstream", "image_table", "list_images", "load_image",
           "lock_blocks", "lock_command", "lock_inputs_sha256", "lock_is_current", "lock_misses",
           "lock_problems", "render", "render_all", "render_readme", "select_lock", "torch_base",
           "write_lock"]

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
KINDS = ("python", "base", "torch", "model")
"""What an image is: the Python runtime, the madbench base, a torch base, a model image."""
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PLATFORM = "x86_64-manylinux_2_28"
_KEYS = {"slug", "kind", "description", "licenses", "paper_name", "upstream", "licence",
         "python", "torch", "gpu", "models", "adapter_tests", "upstream_src", "uv_args",
         "notes", "image_test", "apt", "sdists"}
_MODEL_KEYS = ("paper_name", "upstream", "licence", "torch", "gpu")
_SRC_KEYS = {"repo", "commit", "dest", "install", "subdir", "exclude", "tree_sha256"}
_TEST_KEYS = {"stages", "params", "weights", "clips", "load_models"}
_UNAVAILABLE = "models.adapters.unavailable:"
"""Card targets of paper models with no public code or weights (never run)."""
_HEADER = "# madbench-lock inputs-sha256="
_PYTHONS = ("3.11", "3.9")
TORCH_FAMILY = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-.+|cuda-.+)$")
"""Packages a torch base owns: torch, its companions, and the CUDA wheels torch pins. A
model image's resolution is constrained to its base's pins of these, and its lock may
not pin them again."""
_TORCH_OWN = ("torch", "torchvision", "torchaudio", "triton")

RUNTIME_CONFLICTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("numpy", "<2", "pyarrow", ">=26",
     "pyarrow 26 refuses NumPy 1 at import (\"pyarrow requires NumPy 2.0 or newer\") "
     "though its metadata does not say so, and uv cannot see it: add `pyarrow<26` to "
     "the requirements.in of an image on numpy<2 (numpy 1.26.4 + pyarrow 25.0.1 imports)"),
)
"""Pairs of pins that install together but fail at import, which no resolver sees
(the metadata is silent): (package, specifier, other package, specifier, why).
:func:`lock_problems` reports an image whose installed set has both."""


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


def card_models(slug: str) -> tuple[str, ...]:
    """The models of image ``slug``: every catalog card that names it (an unavailable slot,
    which has no code to run, excepted), in slug order."""
    from madbench_common.models.catalog import cards

    return tuple(c.slug for c in cards().values()
                 if c.image == slug and not c.target.startswith(_UNAVAILABLE))


def card_stages(models: Iterable[str]) -> dict[str, dict[str, Any]]:
    """stage → ``{model: slug}`` for each slot stage of the cards of ``models``."""
    from madbench_common.models.catalog import cards

    every = cards()
    return {stage: {"model": slug} for slug in models if (card := every.get(slug)) and card.slot
            for stage in card.slot.stages}


def _image_test(doc: Any, path: Path, derived: dict[str, dict[str, Any]]) -> ImageTest | None:
    """The ``image_test:`` block; ``derived`` (the cards' slot stages, when the image's
    models come from the cards) runs first, and the block's ``stages`` and ``params`` add
    to it (a stage's params are merged over its card's ``model``)."""
    if doc is None:
        return None
    unknown = set(doc) - _TEST_KEYS if isinstance(doc, dict) else {"<not a mapping>"}
    if unknown or not (doc.get("stages") or derived):
        raise ConfigError(f"{path}: image_test needs `stages` (or models whose cards have a "
                          f"slot) and takes only {sorted(_TEST_KEYS)} "
                          f"(unknown: {sorted(unknown)})")
    weights = str(doc.get("weights") or "")
    if weights and not re.match(r"^[\w.]+:\w+$", weights):
        raise ConfigError(f"{path}: image_test.weights must be module:function")
    params = doc.get("params") or {}
    if not all(isinstance(v, dict) for v in params.values()):
        raise ConfigError(f"{path}: image_test.params maps a stage to its parameters")
    stages = [*derived, *(s for s in doc.get("stages") or () if s not in derived)]
    merged = {k: dict(v) for k, v in derived.items()}
    for stage, extra in params.items():
        merged[stage] = {**merged.get(stage, {}), **extra}
    return ImageTest(stages=tuple(stages), params=merged, weights=weights,
                     clips=int(doc.get("clips", 2)), load_models=bool(doc.get("load_models",
                                                                               True)))


def torch_base(python: str, torch: str) -> str:
    """The slug of the torch base of a torch/CUDA pair on a Python: ``torch-2.8.0-py311``."""
    return f"torch-{torch}-py{python.replace('.', '')}"


@dataclass(frozen=True)
class ImageInfo:
    """One ``images/<slug>/image.yaml``. Every image is built FROM its parent and adds only
    what the parent lacks::

        debian-python:<suite>   python:3.X-slim, or its debootstrap stand-in (imagebuild)
        └─ python-py3XX         kind python: /opt/venv with madbench_common's locked deps,
           │                    the user 10001, the environment (no madbench code)
           ├─ base-py3XX        kind base: + madbench_common and every image's weights.yaml
           └─ torch-<v>-py3XX   kind torch: + torch, torchvision/torchaudio and the nvidia-*
              │                 wheels of one torch/CUDA pair, from a hash lock of its own
              └─ <model image>  kind model: + the family's own lock (its torch pins and
                                every pin equal to its parent's left out), upstream
                                sources, madbench_common and the weights.yaml catalogue

    A model image's parent is ``torch-<torch>-py<python>`` (from its ``torch`` and
    ``python``), so every image of one torch/CUDA pair shares those layers: a node pulls
    them once, and a cold build installs them once. Every folder holds ``image.yaml`` and a
    ``Dockerfile`` generated from it through the one template ``images/Dockerfile.j2``
    (:func:`render_all`; an optional ``Dockerfile.extra`` fragment);
    images with packages add ``requirements.in`` and its ``requirements.lock``; model
    images add ``weights.yaml``. Code that is not on PyPI is listed under ``upstream_src``
    at a pinned commit with the sha256 of its unpacked tree
    (:mod:`madbench_common.imagefactory.upstream`).

    A model image's ``models`` are the catalog cards that name it (:func:`card_models`,
    :func:`card_stages`): image.yaml does not repeat them. An image.yaml that lists
    ``models`` itself (reference-cpu, which runs none of its references in its image
    test) derives nothing.
    """

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
    kind: str = "model"
    description: str = ""
    licenses: str = ""
    """SPDX expression of the image's own code, for the ``org.opencontainers.image.licenses``
    label (``licence`` is the prose for people; the SBOM lists every package's)."""
    apt: tuple[str, ...] = ()
    """Debian packages the image's code needs at run time."""
    sdists: tuple[str, ...] = ()
    """Locked packages PyPI has as sdists only: built into wheels in a build stage."""

    @property
    def dir(self) -> Path:
        return self.folder / self.slug

    @property
    def parent(self) -> str:
        """The slug this image is built FROM (``""``: the Python image itself)."""
        python = "python-py" + self.python.replace(".", "")
        if self.kind == "python":
            return ""
        if self.kind == "model" and self.torch:
            return torch_base(self.python, self.torch)
        return python

    @property
    def base(self) -> str:
        """The parent image's slug (kept for callers of the one-base layout)."""
        return self.parent

    @property
    def has_lock(self) -> bool:
        return (self.dir / "requirements.in").exists()

    @property
    def leaf(self) -> bool:
        """Whether madbench_common is installed (and ``madbench`` is the entry point)."""
        return self.kind in ("base", "model")


def _sources(doc: Any, path: Path) -> tuple[UpstreamSource, ...]:
    srcs = []
    for d in doc or ():
        unknown = set(d) - _SRC_KEYS
        if unknown:
            raise ConfigError(f"{path}: upstream_src takes {sorted(_SRC_KEYS)} "
                              f"(unknown: {sorted(unknown)})")
        src = UpstreamSource(**{**d, "exclude": tuple(d.get("exclude") or ())})
        if not _COMMIT.match(src.commit) or src.install not in {"pip", "path", "copy"}:
            raise ConfigError(f"{path}: {src.repo}: needs a 40-hex commit, install "
                              "pip|path|copy")
        if src.tree_sha256 and not _SHA256.match(src.tree_sha256):
            raise ConfigError(f"{path}: {src.repo}: tree_sha256 must be 64 hex digits")
        srcs.append(src)
    return tuple(srcs)


def load_image(slug: str, images_dir: Path | None = None) -> ImageInfo:
    """Parse and check ``images/<slug>/image.yaml``."""
    folder = images_dir or IMAGES
    path = folder / slug / "image.yaml"
    if not path.exists():
        raise ConfigError(f"{path}: missing (every image has an image.yaml)")
    doc = yaml.safe_load(path.read_text()) or {}
    unknown = set(doc) - _KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}")
    if doc.get("slug") != slug:
        raise ConfigError(f"{path}: slug {doc.get('slug')!r} does not match folder {slug!r}")
    if str(doc.get("python")) not in _PYTHONS:
        raise ConfigError(f"{path}: python must be 3.11 (bookworm) or 3.9 (bullseye)")
    kind = str(doc.get("kind", "model"))
    if kind not in KINDS:
        raise ConfigError(f"{path}: kind must be one of {list(KINDS)}")
    needed = _MODEL_KEYS if kind == "model" else ("description", "licenses")
    missing = [k for k in needed if k not in doc]
    if missing:
        raise ConfigError(f"{path}: missing key(s) {missing}")
    if kind == "torch" and not doc.get("torch"):
        raise ConfigError(f"{path}: a torch base names its torch version")
    # A model image's models and image-test stages come from the catalog cards naming it,
    # unless image.yaml lists its models itself (reference-cpu: none of its references).
    listed = "models" in doc
    models = tuple(doc.get("models") or ()) if listed or kind != "model" else card_models(slug)
    derived = {} if listed or kind != "model" else card_stages(models)
    return ImageInfo(
        slug=slug, kind=kind, paper_name=str(doc.get("paper_name", "")),
        upstream=str(doc.get("upstream", "")), licence=str(doc.get("licence", "")),
        python=str(doc["python"]), torch=str(doc.get("torch") or ""),
        gpu=bool(doc.get("gpu", False)), models=models,
        adapter_tests=tuple(doc.get("adapter_tests") or ()),
        upstream_src=_sources(doc.get("upstream_src"), path),
        uv_args=tuple(doc.get("uv_args") or ()), notes=str(doc.get("notes", "")),
        image_test=_image_test(doc.get("image_test"), path, derived), folder=folder,
        description=str(doc.get("description", "")), licenses=str(doc.get("licenses", "")),
        apt=tuple(doc.get("apt") or ()), sdists=tuple(doc.get("sdists") or ()))


def all_images(images_dir: Path | None = None) -> list[ImageInfo]:
    """Every folder with an ``image.yaml`` (every kind), sorted by slug."""
    folder = images_dir or IMAGES
    return [load_image(p.parent.name, folder) for p in sorted(folder.glob("*/image.yaml"))]


def list_images(images_dir: Path | None = None) -> list[ImageInfo]:
    """The model images (kind ``model``), sorted by slug."""
    return [i for i in all_images(images_dir) if i.kind == "model"]


def build_order(slugs: Iterable[str] | None = None,
                images_dir: Path | None = None) -> list[ImageInfo]:
    """``slugs`` (default: every image) with their ancestors, each after its parent."""
    by_slug = {i.slug: i for i in all_images(images_dir)}
    out: list[ImageInfo] = []

    def visit(slug: str, child: str) -> None:
        if slug not in by_slug:
            raise ConfigError(f"{child}: its parent image {slug!r} has no folder "
                              f"images/{slug}/ with an image.yaml")
        info = by_slug[slug]
        if info.parent:
            visit(info.parent, slug)
        if all(i.slug != slug for i in out):
            out.append(info)

    for slug in (by_slug if slugs is None else slugs):
        visit(slug, "command line")
    return out


def chain(info: ImageInfo) -> list[ImageInfo]:
    """``info``'s ancestors, root first, then ``info``."""
    out = [info]
    while out[0].parent:
        if len(out) > len(KINDS):
            raise ConfigError(f"images/{info.slug}: its parent chain loops")
        out.insert(0, load_image(out[0].parent, info.folder))
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_blocks(text: str) -> dict[str, str]:
    """A lock's blocks (``name==version`` line, hashes, ``# via`` comments) by package name."""
    out = {}
    for block in re.split(r"\n(?=\S)", text):
        found = re.match(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)(?:\[[^\]]*\])?==", block)
        if found:
            out[_norm(found.group(1))] = block.strip()
    return out


def _pin(block: str) -> str:
    """``name==version`` of a lock block (markers and hashes dropped)."""
    return re.split(r"[\s;\\]", block, maxsplit=1)[0]


def effective_blocks(info: ImageInfo) -> dict[str, str]:
    """Every block installed in the image: its chain's locks, a child's pin overriding."""
    blocks: dict[str, str] = {}
    for link in chain(info):
        lock = link.dir / "requirements.lock"
        if lock.exists():
            blocks.update(lock_blocks(lock.read_text()))
    return blocks


def effective_pins(info: ImageInfo) -> dict[str, str]:
    """package → version of everything locked into the image (parents included)."""
    return {name: _pin(b).split("==", 1)[1] for name, b in effective_blocks(info).items()}


def effective_lock(info: ImageInfo) -> str:
    """The whole set installed in the image as one hash lock (``pip --require-hashes``)."""
    blocks = effective_blocks(info)
    return (f"# every package locked into {info.slug}: "
            f"{' + '.join(i.slug for i in chain(info) if i.has_lock)}\n"
            + "\n".join(blocks[n] for n in sorted(blocks)) + "\n")


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


def _parent_info(info: ImageInfo) -> ImageInfo | None:
    return load_image(info.parent, info.folder) if info.parent else None


def lock_inputs_sha256(info: ImageInfo) -> str:
    """sha256 of what ``requirements.lock`` is resolved from: its files, the python, uv
    arguments, and the locks of the parent chain it is layered on."""
    files: list[Path] = []
    _lock_inputs((info.dir / "requirements.in").resolve(), files)
    files += [info.dir / n for n in ("overrides.txt", "constraints.txt") if (info.dir / n).exists()]
    h = hashlib.sha256(f"python={info.python} platform={_PLATFORM} "
                       f"uv_args={list(info.uv_args)}\n".encode())
    for path in files:
        h.update(f"{path.name}\n".encode() + path.read_bytes() + b"\n")
    parent = _parent_info(info)
    if parent is not None:
        h.update(f"parent={parent.slug}\n{effective_lock(parent)}".encode())
    return h.hexdigest()


def lock_misses(info: ImageInfo) -> list[str]:
    """Requirements of ``requirements.in`` (and its includes) that the image's installed
    set (:func:`effective_pins`) does not satisfy, for its python on x86_64 Linux;
    checked offline with ``packaging``."""
    from packaging.requirements import Requirement

    pins = effective_pins(info)
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
            pinned = pins.get(_norm(req.name))
            if pinned is None or not req.specifier.contains(pinned, prereleases=True):
                misses.append(f"{path.name}: {text} (locked: {pinned or 'absent'})")
    return misses


def _torch_base_of(info: ImageInfo) -> ImageInfo | None:
    """The torch base in ``info``'s chain (``None`` for an image without torch)."""
    return next((i for i in chain(info)[:-1] if i.kind == "torch"), None)


def _family_pins(base: ImageInfo) -> dict[str, str]:
    """The torch-family blocks of a torch base's own lock."""
    blocks = lock_blocks((base.dir / "requirements.lock").read_text())
    return {n: b for n, b in blocks.items() if TORCH_FAMILY.match(n)}


def lock_problems(info: ImageInfo) -> list[str]:
    """Why the image's lock is not consistent with its parent chain: a pin of torch, a
    companion or a CUDA wheel that its torch base locks (the base's pins are the only
    ones), torch or a companion its base lacks, a pin equal to its parent chain's
    (``make lock`` leaves those out), or a pair of :data:`RUNTIME_CONFLICTS`."""
    lock = info.dir / "requirements.lock"
    if not lock.exists():
        return []
    own = lock_blocks(lock.read_text())
    problems = []
    base = _torch_base_of(info)
    if base is not None:
        family = _family_pins(base)
        for name in sorted(own.keys() & family.keys()):
            problems.append(f"{info.slug} pins {_pin(own[name])}, which its torch base "
                            f"{base.slug} locks as {_pin(family[name])}")
        problems += [f"{info.slug} pins {_pin(own[n])}, which its torch base {base.slug} "
                     f"lacks: add it to images/{base.slug}/requirements.in"
                     for n in sorted(own) if n in _TORCH_OWN and n not in family]
    parent = _parent_info(info)
    if parent is not None:
        inherited = effective_blocks(parent)
        problems += [f"{info.slug} repeats its parent chain's pin {_pin(b)}"
                     for n, b in sorted(own.items())
                     if n in inherited and _pin(inherited[n]) == _pin(b)]
    return problems + runtime_conflicts(info)


def runtime_conflicts(info: ImageInfo) -> list[str]:
    """:data:`RUNTIME_CONFLICTS` in the image's whole installed set (parents included), for
    a runnable image: a python or torch base runs no Python of ours, and each image on it
    is checked with its own pins."""
    from packaging.specifiers import SpecifierSet

    if not info.leaf:
        return []
    pins = effective_pins(info)
    return [f"{info.slug} installs {a}=={pins[a]} with {b}=={pins[b]}: {why}"
            for a, spec_a, b, spec_b, why in RUNTIME_CONFLICTS
            if a in pins and b in pins and pins[a] in SpecifierSet(spec_a)
            and pins[b] in SpecifierSet(spec_b)]


def write_lock(info: ImageInfo, uv: str = "uv") -> Path:
    """Re-resolve ``requirements.lock`` with uv on top of the parent chain and stamp its
    inputs' sha256 in the header.

    Locks are layered like the images. ``make lock IMAGE=<slug>`` resolves
    ``requirements.in`` with uv for the image's Python on x86_64-manylinux_2_28, preferring
    the versions its parent chain (and the previous lock) pins; a model image's resolution
    is constrained to every pin of its torch base's own lock, so its torch, CUDA wheels and
    their dependencies are the base's. Pins identical to the parent chain's are then left
    out: the lock holds exactly what the image's own layer installs. The header records the
    sha256 of its inputs, the parent chain's locks included, so a stale lock (or a base
    that moved under it) is caught offline; :func:`effective_lock` is the whole set
    installed in the image (adapter-test venvs and SBOMs use it).
    """
    lock = info.dir / "requirements.lock"
    parent = _parent_info(info)
    inherited = effective_blocks(parent) if parent is not None else {}
    before = lock.read_text() if lock.exists() else ""
    # uv prefers the versions already in its output file: a model image's own previous
    # pins, then its parents'; a base's parents' pins first (so they are shared).
    own = lock_blocks(before)
    seed = {**inherited, **own} if info.kind == "model" else {**own, **inherited}
    lock.write_text("\n".join(seed[n] for n in sorted(seed)) + "\n" if seed else "")
    cmd = lock_command(info, uv)
    base = _torch_base_of(info) if info.kind == "model" else None
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", dir=info.dir) as pins:
            if base is not None:  # the torch base's pins are the only ones allowed
                pins.write("".join(_pin(b) + "\n" for b in _family_pins(base).values()))
                pins.flush()
                cmd[-3:-3] = ["--constraints", Path(pins.name).name]
            subprocess.run(cmd, cwd=info.dir, check=True)
    except BaseException:
        lock.write_text(before)
        raise
    resolved = lock_blocks(lock.read_text())
    kept = {n: b for n, b in resolved.items()
            if n not in inherited or _pin(inherited[n]) != _pin(b)}
    parent_note = (f"# on top of {parent.slug}: pins equal to its chain's are left out "
                   f"(python -m madbench_common.imagefactory.images effective-lock {info.slug})\n"
                   if parent is not None and inherited else "")
    lock.write_text(f"{_HEADER}{lock_inputs_sha256(info)}\n"
                    f"# regenerate with: make lock IMAGE={info.slug}\n{parent_note}"
                    + "\n".join(kept[n] for n in sorted(kept)) + "\n")
    problems = lock_problems(info)
    if problems:
        raise ConfigError("; ".join(problems))
    return lock


def lock_is_current(info: ImageInfo) -> bool:
    """Whether ``requirements.lock``'s header matches its inputs as they are now (its
    parents' locks included), every requirement of the inputs is satisfied by the image's
    installed set, and the lock is consistent with its parent chain."""
    lock = info.dir / "requirements.lock"
    first = lock.read_text().partition("\n")[0] if lock.exists() else ""
    return (first == _HEADER + lock_inputs_sha256(info) and not lock_misses(info)
            and not lock_problems(info))


def select_lock(lock_text: str, names: list[str]) -> str:
    """The blocks (``name==version`` plus its hashes) of ``names`` from a lock's text."""
    blocks = lock_blocks(lock_text)
    wanted = {_norm(n) for n in names}
    missing = wanted - blocks.keys()
    if missing:
        raise ConfigError(f"not in the lock: {sorted(missing)}")
    return "\n".join(blocks[n] for n in blocks if n in wanted) + "\n"


def fetch_upstream(info: ImageInfo) -> list[Path]:
    """Unpack every ``upstream_src`` at its commit into ``images/<slug>/.upstream/<dest>``
    and check each tree's sha256 against ``image.yaml`` (a mismatch raises)."""
    out = []
    for src in info.upstream_src:
        dest = info.dir / ".upstream" / src.dest
        fetch_source(src, dest, f"images/{info.slug}/image.yaml")
        out.append(dest)
    return out


def record_upstream(info: ImageInfo) -> list[str]:
    """Unpack every ``upstream_src`` afresh and write its tree's sha256 into image.yaml."""
    from madbench_common.imagefactory.upstream import extract

    lines = []
    for src in info.upstream_src:
        digest = extract(src, info.dir / ".upstream" / src.dest)
        record_tree_sha256(info.dir / "image.yaml", src.repo, src.commit, digest)
        lines.append(f"{src.repo}@{src.commit[:12]}: tree_sha256 {digest}")
    return lines


# ---------------------------------------------------------------- Dockerfiles

TEMPLATE = IMAGES / "Dockerfile.j2"
README = IMAGES / "README.md"
_BEGIN = "<!-- BEGIN image table: generated from images/*/image.yaml by `make dockerfiles` -->"
_END = "<!-- END image table -->"
_PYTHON_IMAGES = {"3.11": "python:3.11-slim-bookworm", "3.9": "python:3.9-slim-bullseye"}
"""The registry image each Python base stands on where a registry can be pulled from."""


def _ref(slug: str, lock_path: Path | None) -> str:
    return str(lock_entry(slug, lock_path)["ref"])


def _locks_packages(info: ImageInfo) -> bool:
    """Whether the image's own lock installs anything (a model image whose every need its
    parents already meet has an empty lock, and no install step)."""
    lock = info.dir / "requirements.lock"
    return lock.exists() and bool(lock_blocks(lock.read_text()))


def _own_pip(info: ImageInfo) -> bool:
    """Whether a model image's own lock pins pip. That pip is installed before the rest
    of the lock: det-avh-align (omegaconf 2.0.6, hydra-core 1.0.7: ``PyYAML>=5.1.*``) and
    det-batfd (pytorch_lightning 1.7.7: ``torch (>=1.9.*)``) lock packages whose metadata
    pip 24.1 and later refuse, so their locks pin pip 24.0."""
    lock = info.dir / "requirements.lock"
    return (info.kind != "python" and lock.exists()
            and "pip" in lock_blocks(lock.read_text()))


def render(info: ImageInfo, lock_path: Path | None = None) -> str:
    """The Dockerfile of ``info``."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    extra_path = info.dir / "Dockerfile.extra"
    extra = extra_path.read_text().strip("\n") if extra_path.exists() else ""
    post_path = info.dir / "Dockerfile.post"
    post = post_path.read_text().strip("\n") if post_path.exists() else ""
    if post and not info.leaf:
        raise ValueError(f"{post_path}: only a runnable image installs madbench_common")
    if '"' in info.description or '"' in info.licenses:
        raise ValueError(f"images/{info.slug}/image.yaml: description and licenses are "
                         "label values; they cannot hold a double quote")
    text = env.get_template(TEMPLATE.name).render(
        slug=info.slug, kind=info.kind, leaf=info.leaf, description=info.description,
        licenses=info.licenses, apt=info.apt, sdists=info.sdists,
        sdist_names=[re.sub(r"[-_.]+", "-", n).lower() for n in info.sdists],
        lock=_locks_packages(info), own_pip=_own_pip(info), extra=extra, post=post,
        python_image=_PYTHON_IMAGES[info.python],
        parent_ref=_ref(info.parent, lock_path) if info.parent else "",
        version=_ref(info.slug, lock_path).rsplit(":", 1)[1],
        upstream_src=[{"repo": s.repo, "commit": s.commit, "dest": s.dest,
                       "install": s.install, "pth": s.dest.replace("/", "-")}
                      for s in info.upstream_src])
    return re.sub(r"\n{3,}", "\n\n", text)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|") or "—"


def _served(slugs: list[str]) -> str:
    refs = [s for s in slugs if s.startswith("ref-")]
    named = ", ".join(f"`{s}`" for s in sorted(set(slugs) - set(refs)))
    if refs:
        named += f"{', ' if named else ''}{len(refs)} CPU references (`ref-…`)"
    return named or "—"


def image_table(images_dir: Path | None = None) -> str:
    """The Markdown table of every image (Python runtimes, bases, torch bases, then model
    images), one row each: the registry slugs it serves, the paper's name, upstream, licence,
    Python and torch."""
    from madbench_common.models.registry import REGISTRY

    served: dict[str, list[str]] = {}
    for spec in REGISTRY.values():
        served.setdefault(spec.image, []).append(spec.slug)
    rows = ["| slug | kind | serves (registry slugs) | paper name | upstream | licence | python "
            "| torch |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for info in sorted(all_images(images_dir), key=lambda i: (KINDS.index(i.kind), i.slug)):
        model = info.kind == "model"
        rows.append("| " + " | ".join([
            f"`{info.slug}`", info.kind, _served(served.get(info.slug, [])),
            _cell(info.paper_name if model else ""),
            _cell(info.upstream if model else info.description),
            _cell(info.licence if model else info.licenses), info.python,
            info.torch or "—"]) + " |")
    return "\n".join(rows) + "\n"


def render_readme(text: str, images_dir: Path | None = None) -> str:
    """``text`` (``images/README.md``) with the part between the markers regenerated."""
    try:
        head, rest = text.split(_BEGIN + "\n", 1)
        _, tail = rest.split(_END, 1)
    except ValueError:
        raise ConfigError(f"{README}: the image table markers {_BEGIN!r} … {_END!r} are "
                          "missing") from None
    return f"{head}{_BEGIN}\n{image_table(images_dir)}{_END}{tail}"


def render_all(check: bool = False, images_dir: Path | None = None,
               lock_path: Path | None = None) -> list[Path]:
    """Write every image's Dockerfile, the README's image table and a ``tagged`` lock entry
    for every image the lock lacks (``check``: write nothing); return those that were stale
    (with ``check``) or rewritten."""
    changed = []
    infos = all_images(images_dir)
    lock = lock_path or LOCK
    current = lock.read_text()
    text = with_new_entries(current, [(i.slug, i.description) for i in infos])
    with tempfile.TemporaryDirectory() as tmp:
        if text != current:
            changed.append(lock)
            if not check:
                lock.write_text(text)
            else:  # render against the entries the lock would get
                lock = Path(tmp) / lock.name
                lock.write_text(text)
        outputs = [(info.dir / "Dockerfile", render(info, lock)) for info in infos]
    readme = (images_dir or IMAGES) / README.name
    if readme.exists():
        outputs.append((readme, render_readme(readme.read_text(), images_dir)))
    for path, text in outputs:
        if not path.exists() or path.read_text() != text:
            changed.append(path)
            if not check:
                path.write_text(text)
    return changed


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m madbench_common.imagefactory.images")
    parser.add_argument("command", choices=["list", "show", "lock-cmd", "lock", "check-lock",
                                            "upstream", "tests", "select", "effective-lock",
                                            "render"])
    parser.add_argument("slug", nargs="?", help="image slug (select: a lock file)")
    parser.add_argument("names", nargs="*", help="select: package names")
    parser.add_argument("--uv", default="uv")
    parser.add_argument("--all", action="store_true",
                        help="list: every image in build order (default: model images)")
    parser.add_argument("--record", action="store_true",
                        help="upstream: unpack afresh and record each tree's sha256")
    parser.add_argument("--check", action="store_true",
                        help="render: write nothing; exit 1 if a committed Dockerfile is stale")
    args = parser.parse_args(argv)
    if args.command == "list":
        infos = build_order() if args.all else list_images()
        print("\n".join(i.slug for i in infos))
        return 0
    if args.command == "render":
        stale = render_all(check=args.check)
        for path in stale:
            print(f"{'stale' if args.check else 'wrote'}: {path.relative_to(ROOT)}")
        if args.check and stale:
            print("run `make dockerfiles` and commit the result", file=sys.stderr)
            return 1
        return 0
    if not args.slug:
        parser.error("this command needs an image slug")
    if args.command == "select":
        print(select_lock(Path(args.slug).read_text(), args.names), end="")
        return 0
    info = load_image(args.slug)
    if args.command in ("lock", "check-lock"):
        return _lock_main(info, args.command, args.uv)
    if args.command == "show":
        print(f"python={info.python} torch={info.torch} gpu={info.gpu} kind={info.kind} "
              f"parent={info.parent or '-'}")
    elif args.command == "lock-cmd":
        print(" ".join(lock_command(info)))
    elif args.command == "effective-lock":
        print(effective_lock(info), end="")
    elif args.command == "upstream":
        if args.record:
            print("\n".join(record_upstream(info)))
            info = load_image(args.slug)
        for path in fetch_upstream(info):
            print(path)
    else:
        print(" ".join(info.adapter_tests))
    return 0


def _lock_main(info: ImageInfo, command: str, uv: str) -> int:
    if not info.has_lock:
        return 0
    if command == "lock":
        print(write_lock(info, uv))
        return 0
    if lock_is_current(info):
        return 0
    reasons = "".join(f"\n  not satisfied: {m}" for m in lock_misses(info))
    reasons += "".join(f"\n  inconsistent: {p}" for p in lock_problems(info))
    print(f"images/{info.slug}/requirements.lock is stale: its inputs (or its parents' "
          f"locks) changed since it was resolved; run: make lock IMAGE={info.slug}{reasons}",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(_main())
