"""Generate every ``images/<slug>/Dockerfile`` from its ``image.yaml`` through one template.

``images/Dockerfile.j2`` is the only Dockerfile anyone writes. What really differs per
image is data in ``image.yaml`` (``kind``, ``description``, ``licenses``, ``apt``,
``sdists``, ``upstream_src``) or, for anything else, an optional fragment
``images/<slug>/Dockerfile.extra`` that the template places after the image's packages and
upstream sources, before madbench_common, and ``images/<slug>/Dockerfile.post`` for steps
that run madbench_common itself (placed after it). ``make dockerfiles`` (``python -m
madbench_common.images render``) writes them; ``--check`` writes nothing and lists the
stale ones, and a test fails on a stale Dockerfile, as for ``workflows/*.yaml``.

The conventions the template carries (``tests/test_images.py`` and hadolint check them):
``FROM`` an ARG (a registry base elsewhere, the debootstrap base here); the lock
installed ``--require-hashes --no-deps``; pip reaching PyPI only through the build secret
``hostca``; no compilers in the final stage; madbench_common last in every runnable image;
the image ending as uid 10001; OCI labels.
"""

from __future__ import annotations

import re
from pathlib import Path

from madbench_common.imagelock import lock_entry
from madbench_common.images import IMAGES, ImageInfo, all_images, lock_blocks

__all__ = ["TEMPLATE", "render", "render_all"]

TEMPLATE = IMAGES / "Dockerfile.j2"
_PYTHON_IMAGES = {"3.11": "python:3.11-slim-bookworm", "3.9": "python:3.9-slim-bullseye"}
"""The registry image each Python base stands on where a registry can be pulled from."""


def _ref(slug: str, lock_path: Path | None) -> str:
    return str(lock_entry(slug, lock_path)["ref"])


def _locks_packages(info: ImageInfo) -> bool:
    """Whether the image's own lock installs anything (a model image whose every need its
    parents already meet has an empty lock, and no install step)."""
    lock = info.dir / "requirements.lock"
    return lock.exists() and bool(lock_blocks(lock.read_text()))


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
        lock=_locks_packages(info), extra=extra, post=post,
        python_image=_PYTHON_IMAGES[info.python],
        parent_ref=_ref(info.parent, lock_path) if info.parent else "",
        version=_ref(info.slug, lock_path).rsplit(":", 1)[1],
        upstream_src=[{"repo": s.repo, "commit": s.commit, "dest": s.dest,
                       "install": s.install, "pth": s.dest.replace("/", "-")}
                      for s in info.upstream_src])
    return re.sub(r"\n{3,}", "\n\n", text)


def render_all(check: bool = False, images_dir: Path | None = None,
               lock_path: Path | None = None) -> list[Path]:
    """Write every image's Dockerfile (``check``: write nothing); return those that were
    stale (with ``check``) or rewritten."""
    changed = []
    for info in all_images(images_dir):
        path = info.dir / "Dockerfile"
        text = render(info, lock_path)
        if not path.exists() or path.read_text() != text:
            changed.append(path)
            if not check:
                path.write_text(text)
    return changed
