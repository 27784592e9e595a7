"""Tiny checkpoints in the release layout: lay them out as hub snapshots and list what a
writer writes (re-exported by :mod:`madbench_common.models.weights`, whose
:func:`~madbench_common.models.weights.layout_problems` compares it with
``images/<image>/weights.yaml`` by name)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from madbench_common.core.errors import ConfigError

__all__ = ["STANDIN_MARKER", "TINY_ARCH_FILE", "TINY_MARKER", "TinyLayout", "declared_layout",
           "install_local_snapshot", "tiny_layout", "written_layout"]


def _hub_cache(root: Path) -> Path:
    return root / "huggingface" / "hub"


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
                          "(madbench_common.models.weights.tiny_layout)")
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
