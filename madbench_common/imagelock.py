"""Read ``images/images.lock.yaml`` entries and record local builds in it, one slug at a time.

Statuses (``images/images.lock.yaml`` documents them too):

- ``planned``: a slot for a model the paper uses; no Dockerfile yet;
- ``tagged``: ``images/<slug>/Dockerfile`` exists; never built here;
- ``built``: built on a machine by ``make image``; ``build:`` holds the local image id,
  size, build seconds, disk peak and torch/CUDA versions (``digest`` stays null: a local
  image id is not a registry manifest digest);
- ``pinned``: pushed; ``digest`` is the registry manifest digest the workflows pin.

:func:`record_build` rewrites only the slug's own block, so comments and every other
entry stay byte for byte (several engineers record builds of different slugs).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from madbench_common.errors import ConfigError

__all__ = ["LOCK", "STATUSES", "image_identity", "lock_entry", "read_lock", "record_build",
           "record_push", "write_entry"]

LOCK = Path(__file__).resolve().parents[1] / "images" / "images.lock.yaml"
STATUSES = ("planned", "tagged", "built", "pinned")


def read_lock(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """slug → entry."""
    doc = yaml.safe_load((path or LOCK).read_text()) or {}
    images: dict[str, dict[str, Any]] = doc.get("images") or {}
    return images


def lock_entry(slug: str, path: Path | None = None) -> dict[str, Any]:
    """The slug's entry; a clear error when the slug is not locked."""
    try:
        return read_lock(path)[slug]
    except KeyError:
        raise ConfigError(f"image {slug!r} is not in {path or LOCK}; add an entry "
                          f"(status: tagged, ref: ghcr.io/madbench/{slug}:0.1.0)") from None


def _block(slug: str, entry: dict[str, Any]) -> str:
    body = yaml.safe_dump({slug: entry}, sort_keys=False, default_flow_style=False, width=100)
    return "".join("  " + line + "\n" for line in body.splitlines())


def image_identity(entry: dict[str, Any]) -> str | None:
    """The image a lock entry's SBOM belongs to: its registry digest once pinned, else the
    local build's image id, else ``None`` (not built)."""
    found = entry.get("digest") or (entry.get("build") or {}).get("image_id")
    return str(found) if found else None


def record_build(slug: str, build: dict[str, Any], path: Path | None = None) -> None:
    """Set the slug's ``status: built`` and ``build:`` record (unless it is ``pinned``)."""
    path = path or LOCK
    entry = dict(lock_entry(slug, path))
    if entry.get("status") != "pinned":
        entry["status"] = "built"
    entry["build"] = build
    if entry.get("sbom"):  # the SBOM describes the lock, and so this build of it
        entry["sbom"] = {**entry["sbom"], "image": image_identity(entry)}
    text = path.read_text()
    found = re.search(rf"^  {re.escape(slug)}:\n(?:    .*\n)*", text, re.M)
    if found is None:
        raise ConfigError(f"{path}: cannot find the block of {slug!r}")
    path.write_text(text[:found.start()] + _block(slug, entry) + text[found.end():])


def write_entry(slug: str, entry: dict[str, Any], path: Path | None = None) -> None:
    """Replace the slug's block with ``entry`` (comments and other entries stay as they are)."""
    path = path or LOCK
    text = path.read_text()
    found = re.search(rf"^  {re.escape(slug)}:\n(?:    .*\n)*", text, re.M)
    if found is None:
        raise ConfigError(f"{path}: cannot find the block of {slug!r}")
    path.write_text(text[:found.start()] + _block(slug, entry) + text[found.end():])


def record_push(slug: str, digest: str, registry: str, path: Path | None = None) -> None:
    """Set the slug's ``status: pinned``, its registry manifest ``digest`` and ``pushed_to``
    (the registry it was read back from; :mod:`madbench_common.imagepush`)."""
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ConfigError(f"image {slug!r}: digest {digest!r} is not sha256:<64 hex>")
    entry = dict(lock_entry(slug, path))
    entry.update(status="pinned", digest=digest, pushed_to=registry)
    if entry.get("sbom"):  # the SBOM describes the lock, and so this pushed image of it
        entry["sbom"] = {**entry["sbom"], "image": image_identity(entry)}
    write_entry(slug, entry, path)
