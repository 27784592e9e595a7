"""Read ``images/images.lock.yaml`` entries and record local builds in it, one slug at a time.

Each slug's entry has a status (``planned``, ``tagged``, ``built``, ``pinned``:
:func:`read_lock`). :func:`record_build` rewrites only the slug's own block, so comments and
every other entry stay byte for byte (several engineers record builds of different slugs).
"""

from __future__ import annotations

import fcntl
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError

__all__ = ["LOCK", "STATUSES", "LayerTotals", "image_identity", "image_layers", "layer_totals",
           "lock_entry", "read_lock", "record_build", "record_image_test", "record_push",
           "update_entry", "with_new_entries", "write_entry"]

LOCK = Path(__file__).resolve().parents[2] / "images" / "images.lock.yaml"
STATUSES = ("planned", "tagged", "built", "pinned")


def read_lock(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """slug → entry.

    Statuses (``images/images.lock.yaml`` documents them too): ``planned`` (a slot for a
    model the paper uses; no Dockerfile yet); ``tagged`` (``images/<slug>/Dockerfile``
    exists; never built here); ``built`` (by ``make image``: ``build:`` holds the local
    image id, size, build seconds, disk peak, torch/CUDA versions, the commit it was built
    from and every layer (diff id and bytes; :func:`layer_totals` sums them); ``digest``
    stays null, since a local image id is not a registry manifest digest; ``image_test:``
    the last ``make image-test`` of that image); ``pinned`` (pushed; ``digest`` is the
    registry manifest digest the workflows pin).
    """
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


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<lock>.flock`` while a block is read and rewritten:
    builds, image tests and SBOMs of different slugs record concurrently."""
    with open(path.with_name(path.name + ".flock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def record_build(slug: str, build: dict[str, Any], path: Path | None = None) -> None:
    """Set the slug's ``status: built`` and ``build:`` record (unless it is ``pinned``)."""
    path = path or LOCK
    with _locked(path):
        _record_build(slug, build, path)


def _record_build(slug: str, build: dict[str, Any], path: Path) -> None:
    entry = dict(lock_entry(slug, path))
    if entry.get("status") != "pinned":
        entry["status"] = "built"
    entry["build"] = build
    entry.pop("image_test", None)  # it tested the image this build replaces
    if entry.get("sbom"):  # the SBOM describes the lock, and so this build of it
        entry["sbom"] = {**entry["sbom"], "image": image_identity(entry)}
    text = path.read_text()
    found = re.search(rf"^  {re.escape(slug)}:\n(?:    .*\n)*", text, re.M)
    if found is None:
        raise ConfigError(f"{path}: cannot find the block of {slug!r}")
    path.write_text(text[:found.start()] + _block(slug, entry) + text[found.end():])


def with_new_entries(text: str, images: Iterable[tuple[str, str]]) -> str:
    """``text`` (the lock file) with a ``tagged`` entry appended for every ``(slug,
    description)`` it lacks: a new image's entry is generated (``make dockerfiles``), not
    hand-written; ``make image`` and ``make push`` then fill its build and digest."""
    have = set((yaml.safe_load(text) or {}).get("images") or {})
    blocks = [_block(slug, {"status": "tagged", "ref": f"ghcr.io/madbench/{slug}:0.1.0",
                            "digest": None, "description": description})
              for slug, description in images if slug not in have]
    return text if not blocks else text.rstrip("\n") + "\n" + "".join(blocks)


def write_entry(slug: str, entry: dict[str, Any], path: Path | None = None) -> None:
    """Replace the slug's block with ``entry`` (comments and other entries stay as they are)."""
    path = path or LOCK
    with _locked(path):
        _write_entry(slug, entry, path)


def _write_entry(slug: str, entry: dict[str, Any], path: Path) -> None:
    text = path.read_text()
    found = re.search(rf"^  {re.escape(slug)}:\n(?:    .*\n)*", text, re.M)
    if found is None:
        raise ConfigError(f"{path}: cannot find the block of {slug!r}")
    path.write_text(text[:found.start()] + _block(slug, entry) + text[found.end():])


def image_layers(entry: dict[str, Any]) -> list[tuple[str, int]]:
    """(diff id, bytes) of every layer a build record lists (``[]``: none recorded)."""
    out = []
    for item in (entry.get("build") or {}).get("layers") or ():
        digest, _, size = str(item).partition(" ")
        out.append((digest, int(size)))
    return out


@dataclass(frozen=True)
class LayerTotals:
    """What a set of images weighs: each image's size summed, and the unique layers."""

    images: tuple[str, ...]
    summed_bytes: int
    """Sum of the images' sizes: what separate copies of every image would take."""
    unique_bytes: int
    """Bytes of the distinct layers (by uncompressed diff id): what a node pulls."""
    unrecorded: tuple[str, ...]
    """Images without a layer record (never built here): not counted."""

    @property
    def ratio(self) -> float:
        return self.unique_bytes / self.summed_bytes if self.summed_bytes else 0.0


def layer_totals(slugs: Iterable[str], path: Path | None = None) -> LayerTotals:
    """Sum of sizes and unique layer bytes of ``slugs`` from their build records."""
    lock = read_lock(path)
    wanted = sorted(set(slugs))
    seen: dict[str, int] = {}
    summed, unrecorded = 0, []
    for slug in wanted:
        layers = image_layers(lock.get(slug) or {})
        if not layers:
            unrecorded.append(slug)
            continue
        summed += sum(n for _, n in layers)
        seen.update(layers)
    return LayerTotals(tuple(wanted), summed, sum(seen.values()), tuple(unrecorded))


def update_entry(slug: str, change: Callable[[dict[str, Any]], dict[str, Any]],
                 path: Path | None = None) -> None:
    """Read the slug's entry, apply ``change`` and write it back, all under the lock."""
    path = path or LOCK
    with _locked(path):
        _write_entry(slug, change(dict(lock_entry(slug, path))), path)


def record_image_test(slug: str, result: dict[str, Any], path: Path | None = None) -> None:
    """Set the slug's ``image_test:`` record (result, wall seconds, stages, the image)."""
    update_entry(slug, lambda e: {**e, "image_test": result}, path)


def record_push(slug: str, digest: str, registry: str, path: Path | None = None) -> None:
    """Set the slug's ``status: pinned``, its registry manifest ``digest`` and ``pushed_to``
    (the registry it was read back from; :mod:`madbench_common.imagefactory.imagepush`),
    under the lock."""
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ConfigError(f"image {slug!r}: digest {digest!r} is not sha256:<64 hex>")

    def pinned(entry: dict[str, Any]) -> dict[str, Any]:
        entry = {**entry, "status": "pinned", "digest": digest, "pushed_to": registry}
        if entry.get("sbom"):  # the SBOM describes the lock, and so this pushed image of it
            entry["sbom"] = {**entry["sbom"], "image": image_identity(entry)}
        return entry

    update_entry(slug, pinned, path)
