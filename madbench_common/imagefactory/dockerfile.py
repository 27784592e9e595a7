"""Generate every ``images/<slug>/Dockerfile`` from its ``image.yaml`` through one template.

``images/Dockerfile.j2`` is the only Dockerfile anyone writes (:func:`render`). ``make
dockerfiles`` (``python -m madbench_common.imagefactory.images render``) writes them; ``--check``
writes nothing and lists the stale ones, and a test fails on a stale Dockerfile, as for
``workflows/*.yaml``. The same command writes the image table of ``images/README.md``
(between its ``BEGIN``/``END`` markers) from the same ``image.yaml`` files, so no image
lacks its row.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from madbench_common.core.errors import ConfigError
from madbench_common.imagefactory.imagelock import LOCK, lock_entry, with_new_entries
from madbench_common.imagefactory.images import IMAGES, KINDS, ImageInfo, all_images, lock_blocks

__all__ = ["README", "TEMPLATE", "image_table", "render", "render_all"]

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
    """The Dockerfile of ``info``.

    What differs per image is data in ``image.yaml`` (``kind``, ``description``,
    ``licenses``, ``apt``, ``sdists``, ``upstream_src``) or an optional fragment:
    ``images/<slug>/Dockerfile.extra``, placed after the image's packages and upstream
    sources, before madbench_common, and ``images/<slug>/Dockerfile.post`` for steps that
    run madbench_common itself (placed after it). The template's conventions
    (``tests/imagefactory/test_images.py`` and hadolint check them): ``FROM`` an ARG (a registry
    base elsewhere, the debootstrap base here); the lock installed ``--require-hashes
    --no-deps``; pip reaching PyPI only through the build secret ``hostca``; no compilers
    in the final stage; madbench_common last in every runnable image; the image ending as
    uid 10001; OCI labels.
    """
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
