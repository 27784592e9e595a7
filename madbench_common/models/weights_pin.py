"""Pinning model weights: resolve ``weights.yaml`` entries and write the pins back in place.

``madbench weights pin [--image SLUG]`` runs where the hub (``$HF_ENDPOINT``, default
huggingface.co) and the URL items' hosts are reachable. Each entry not yet pinned (every
entry with ``update``) is resolved (:func:`resolve_hf`, :func:`hash_url`) and its pins
written into the entry itself (:func:`write_pins`). An entry that cannot be resolved is
reported and left unpinned: nothing is ever written that was not computed from the bytes
or the hub's metadata. :func:`weights_status` lists what is still unpinned, and
:func:`pin_conflicts` hub repositories two images pin at different commits.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import tempfile
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError
from madbench_common.core.hashing import file_digest
from madbench_common.models.weights import (
    HFItem,
    URLItem,
    hub_endpoint,
    load_spec,
    pin_problem,
    spec_path,
    unpinned_entries,
)

__all__ = ["PinResult", "Unpinned", "hash_url", "pin_conflicts", "pin_weights", "resolve_hf",
           "weights_status", "write_pins"]

_ITEM = re.compile(r"^(?P<ind> *)- (?P<key>repo|name):\s*(?P<val>.*?)\s*(#.*)?$")


@dataclass(frozen=True)
class Unpinned:
    """One entry ``weights status`` lists."""

    image: str
    kind: str
    """``hf`` or ``url``."""
    entry: str
    reason: str


@dataclass
class PinResult:
    """What ``pin_weights`` did for one image."""

    image: str
    pinned: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    """(entry, why) for entries left unpinned."""
    kept: list[str] = field(default_factory=list)
    """Entries already pinned and not re-resolved (no ``update``)."""


def weights_status(images: Iterable[str], images_dir: Path | None = None) -> list[Unpinned]:
    """Every unpinned entry of the given images' ``weights.yaml``."""
    out = []
    for image in images:
        for item, why in unpinned_entries(load_spec(image, images_dir)):
            out.append(Unpinned(image, "hf" if isinstance(item, HFItem) else "url",
                                item.label, why))
    return out


def pin_conflicts(images: Iterable[str], images_dir: Path | None = None) -> list[str]:
    """Hub repos pinned at different commits for one revision by two images (they share one
    cache folder, whose ref would flip between the two)."""
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for image in images:
        for item in load_spec(image, images_dir).hf:
            if item.commit:
                seen.setdefault((item.repo, item.revision), {})[image] = item.commit
    return [f"{repo}@{rev}: pinned at {', '.join(f'{c[:12]} ({i})' for i, c in by.items())}"
            for (repo, rev), by in sorted(seen.items()) if len(set(by.values())) > 1]



def resolve_hf(item: HFItem, endpoint: str | None = None) -> tuple[str, dict[str, str]]:
    """(commit, {path: sha256}) of ``item`` on the hub now.

    The ``revision`` is resolved to a commit (``repo_info``), the commit's tree listed
    (``list_repo_tree``), and every file matching ``files`` gets its sha256: an LFS file's
    from the hub's LFS pointer (the sha256 of its content by definition), a small git
    file's by downloading and hashing it; a pattern that matches nothing fails."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.hf_api import RepoFile

    hub = hub_endpoint(endpoint)
    api = HfApi(endpoint=hub)
    commit = str(api.repo_info(item.repo, revision=item.revision, repo_type=item.repo_type).sha)
    tree = [f for f in api.list_repo_tree(item.repo, revision=commit, recursive=True,
                                          repo_type=item.repo_type) if isinstance(f, RepoFile)]
    chosen = [f for f in tree if not item.files
              or any(fnmatch.fnmatch(f.path, p) for p in item.files)]
    lacking = [p for p in item.files if not any(fnmatch.fnmatch(f.path, p) for f in tree)]
    if lacking or not chosen:
        raise ConfigError(f"{item.repo}@{commit}: no file matches {lacking or list(item.files)}")
    files: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="mb-pin-") as cache:
        for f in sorted(chosen, key=lambda f: f.path):
            if f.lfs is not None:
                files[f.path] = str(f.lfs.sha256)
                continue
            path = hf_hub_download(item.repo, f.path, revision=commit, repo_type=item.repo_type,
                                   cache_dir=cache, endpoint=hub)
            files[f.path] = file_digest(Path(path))
    return commit, files


def hash_url(item: URLItem, timeout: float = 600) -> str:
    """The sha256 of the file at ``item.url`` now (its md5 checked when given)."""
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with urllib.request.urlopen(item.url, timeout=timeout) as resp:
        for block in iter(lambda: resp.read(1 << 20), b""):
            sha.update(block)
            md5.update(block)
    if item.md5 and md5.hexdigest() != item.md5:
        raise ConfigError(f"{item.url}: md5 {md5.hexdigest()} != {item.md5} in weights.yaml")
    return sha.hexdigest()


def pin_weights(image: str, images_dir: Path | None = None, *, update: bool = False,
                endpoint: str | None = None) -> PinResult:
    """Resolve ``image``'s unpinned entries (every entry with ``update``) and write the pins."""
    spec = load_spec(image, images_dir)
    result = PinResult(image)
    hf: dict[str, tuple[str, dict[str, str]]] = {}
    urls: dict[str, str] = {}
    for item in spec.hf:
        if not update and not pin_problem(item):
            result.kept.append(item.label)
            continue
        try:
            hf[item.repo] = resolve_hf(item, endpoint)
            result.pinned.append(item.label)
        except Exception as exc:
            result.failed.append((item.label, _reason(exc)))
    for u in spec.urls:
        if not update and not pin_problem(u):
            result.kept.append(u.label)
            continue
        try:
            urls[u.name] = hash_url(u)
            result.pinned.append(u.label)
        except Exception as exc:
            result.failed.append((u.label, _reason(exc)))
    if hf or urls:
        write_pins(spec_path(image, images_dir), hf, urls)
    return result


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


# ---------------------------------------------------------------- writing pins in place


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    text = line.strip()
    return bool(text) and not text.startswith("#")


def _item_blocks(lines: list[str]) -> list[tuple[str, str, int, int, int]]:
    """(key, value, first line, last content line, key indent) of every list item."""
    blocks = []
    for i, line in enumerate(lines):
        found = _ITEM.match(line)
        if not found:
            continue
        ind = len(found["ind"]) + 2
        end = i
        for j in range(i + 1, len(lines)):
            if not _content(lines[j]):
                continue
            if _indent(lines[j]) < ind:
                break
            end = j
        value = yaml.safe_load(found["val"]) if found["val"] else ""
        blocks.append((found["key"], str(value), i, end, ind))
    return blocks


def _drop_key(lines: list[str], start: int, end: int, ind: int, key: str) -> int:
    """Remove ``key:`` (at indent ``ind``) and its nested lines from lines[start:end+1];
    returns the new ``end``."""
    i = start + 1
    while i <= end:
        line = lines[i]
        if _indent(line) == ind and line.strip().startswith(f"{key}:"):
            j = i + 1
            while j <= end and (not _content(lines[j]) or _indent(lines[j]) > ind):
                j += 1
            del lines[i:j]
            end -= j - i
            continue
        i += 1
    while end > start and not _content(lines[end]):
        end -= 1
    return end


def _hf_lines(ind: int, commit: str, files: dict[str, str]) -> list[str]:
    pad = " " * ind
    return [f"{pad}commit: {commit}", f"{pad}sha256:",
            *(f"{pad}  {json.dumps(rel)}: \"{sha}\"" for rel, sha in sorted(files.items()))]


def _edit(lines: list[str], hf: dict[str, tuple[str, dict[str, str]]],
          urls: dict[str, str]) -> None:
    for key, value, start, end, ind in reversed(_item_blocks(lines)):
        if key == "repo" and value in hf:
            end = _drop_key(lines, start, end, ind, "commit")
            end = _drop_key(lines, start, end, ind, "sha256")
            lines[end + 1:end + 1] = _hf_lines(ind, *hf[value])
        elif key == "name" and value in urls:
            end = _drop_key(lines, start, end, ind, "sha256")
            lines.insert(end + 1, f"{' ' * ind}sha256: \"{urls[value]}\"")


def write_pins(path: Path, hf: dict[str, tuple[str, dict[str, str]]],
               urls: dict[str, str]) -> None:
    """Write ``hf`` (repo → (commit, {file: sha256})) and ``urls`` (name → sha256) into the
    entries of ``path``, editing only those lines (``commit`` and a ``sha256`` mapping; a
    URL item's ``sha256``), so comments and every other line stay as they were; refuse
    (and write nothing) unless the result parses back to exactly those pins with every
    other value unchanged."""
    before = path.read_text()
    lines = before.splitlines()
    _edit(lines, hf, urls)
    text = "\n".join(lines) + "\n"
    problem = _compare(yaml.safe_load(before) or {}, yaml.safe_load(text) or {}, hf, urls)
    if problem:
        raise ConfigError(f"{path}: cannot write the pins in place ({problem}); edit the "
                          "file by hand")
    path.write_text(text)


def _compare(old: dict[str, Any], new: dict[str, Any],
             hf: dict[str, tuple[str, dict[str, str]]], urls: dict[str, str]) -> str:
    """Why ``new`` is not ``old`` with exactly the pins applied (``""`` when it is)."""
    want = json.loads(json.dumps(old))
    for d in want.get("hf") or ():
        if d.get("repo") in hf:
            d["commit"], d["sha256"] = hf[d["repo"]][0], dict(hf[d["repo"]][1])
    for d in want.get("urls") or ():
        if d.get("name") in urls:
            d["sha256"] = urls[d["name"]]
    if json.loads(json.dumps(new)) != want:
        return "the edited YAML differs from the intended pins"
    return ""
