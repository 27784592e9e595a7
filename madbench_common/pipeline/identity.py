"""A model's identity: what a model stage's output depends on besides its inputs (issue 21).

A stage's fingerprint (:func:`madbench_common.pipeline.stage.fingerprint`) already holds the
stage's image reference — a registry ``@sha256:`` digest once the images lock pins one,
and the local image's digest when the local container engine runs it — its parameters
and its inputs. For every model the stage runs (its ``model`` parameter and every
parameter naming a registered slug: the compound QC stages' ``vad``, ``asr``…),
:func:`model_identity` adds:

- ``adapter``: the sha256 of the adapter module's source and of its helpers — every
  ``madbench_common`` module it imports, transitively, except the interface and plumbing
  modules of :data:`_NOT_HELPERS` — plus the identity of every model its source names by
  slug (the A-V detectors' face cropper ``ref-haar-face``), so an edit to the adapter,
  its preprocessing or its cropper changes it;
- ``weights``: the pins in ``images/<image>/weights.yaml`` (a hub entry's commit and the
  sha256 of each file, a URL entry's sha256; ``null`` while unpinned) of the entries the
  adapter reads: those whose repository id or file name its sources spell out, or, where
  none is spelled out, every entry of the image;
- ``dtype``: the stage's ``dtype`` parameter, else ``auto:cuda`` or ``auto:cpu`` — the
  adapters pick bf16/fp16 on a GPU and fp32 on the CPU, so the device class the stage
  runs on stands for the dtype it will load (the caches, which run after loading, record
  the loaded dtype itself: :func:`loaded_dtype`).

The omni response cache also keys on the full message layout, system prompt included
(:func:`message_layout`). Nothing here imports a model: the orchestrator stays light.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import glob
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["LEGACY_MODULES", "accelerator", "adapter_sources", "cache_identity",
           "canonical_name", "canonical_source", "compute_dtype",
           "identity_digest", "loaded_dtype", "message_layout", "model_identity",
           "stage_identity", "stage_models", "unpinned_weights"]

_PACKAGE = "madbench_common"
_NOT_HELPERS = frozenset({
    "madbench_common", "madbench_common.core.errors", "madbench_common.core.types",
    "madbench_common.models.roles", "madbench_common.models.registry",
    "madbench_common.models.weights",
    "madbench_common.models.weights_layout", "madbench_common.models.weights_pin",
    "madbench_common.core.manifest", "madbench_common.benchmarks.madbench.rows",
    "madbench_common.core.store",
    "madbench_common.core.s3client", "madbench_common.models", "madbench_common.models.reference",
    "madbench_common.models.tiny",
})
"""Modules whose code does not shape a model's output: errors, type aliases, role
protocols, the registry and weights lookups (the weights' own pins are in the identity),
manifests and storage, and bare packages."""

LEGACY_MODULES: dict[str, str] = {
    f"{_PACKAGE}.{new}": f"{_PACKAGE}.{old}" for new, old in (
        ("benchmarks.madbench.stages", "stages"), ("benchmarks.madbench.rows", "rows"),
        ("benchmarks.madbench.sources", "sources"),
        ("models.speech_prep", "speech_prep"),
        ("benchmarks.madbench.taxonomy_propose", "taxonomy_propose"),
        ("models.taxonomy", "taxonomy"),
        ("models.data", "data"),  # the models' data files: taxonomy.json
        ("benchmarks.madbench.corpora", "corpora"), ("benchmarks.madbench.eval", "eval"),
        ("benchmarks.madbench.omni_models", "pipeline.omni_models"),
        ("benchmarks.madbench.omni", "omni"), ("models.answer_cache", "omni.cache"),
        ("benchmarks.madbench.release", "release"),
        ("benchmarks.madbench.robustness", "robustness"),
        ("benchmarks.madbench.prompts", "prompts"),
        ("benchmarks.madbench.graph", "pipeline.definition"),
        ("benchmarks.madbench.eval_models", "pipeline.eval_models"),
        ("benchmarks.deaf", "deaf"), ("models.deaf_roles", "deaf.roles"),
        ("models.reference", "reference"), ("models.adapters", "models"),
        ("build.images", "images"), ("build.imagebuild", "imagebuild"),
        ("build.imagelock", "imagelock"), ("build.imagepush", "imagepush"),
        ("testing.imagetest", "imagetest"), ("build.adaptertest", "adaptertest"),
        ("build.sbom", "sbom"), ("build.containers", "containers"),
        ("build.secrets_scan", "secrets_scan"), ("build.dockerfile", "dockerfile"),
        ("build.upstream", "upstream"), ("core.usage", "pipeline.usage"),
        ("core.orphans", "pipeline.orphans"), ("cli.deaf", "deaf.cli"))}
"""Where modules lived before the package was laid out by concern (issue 22): new → old.

Fingerprints and model identities name code by this older, canonical name
(:func:`canonical_name`, :func:`canonical_source`), so that the move alone changes no
stage's fingerprint: a run started before it resumes after it without recomputing a
stage, and a cache keeps its hits. An edit to a module's code still changes them."""

_LEGACY_LONGEST_FIRST = sorted(LEGACY_MODULES.items(), key=lambda kv: -len(kv[0]))
"""The entries, the longest new name first, so a nested move wins over its parent's."""
_LEGACY_RX = [(re.compile(rf"(?<![\w.]){re.escape(new)}(?![\w])"), old)
              for new, old in _LEGACY_LONGEST_FIRST]
_LEGACY_PATHS = [(re.compile(rf"(?<![\w/]){re.escape(new.replace('.', '/'))}(?![\w])"),
                  old.replace(".", "/")) for new, old in _LEGACY_LONGEST_FIRST]
_LEGACY_TESTS = [(re.compile(rf"(?<![\w/]){re.escape(new)}" + ("" if new.endswith("/") else
                                                              r"(?![\w])")), old)
                 for new, old in (
    ("tests/benchmarks/madbench/", "tests/"), ("tests/benchmarks/deaf", "tests/deaf"),
    ("tests/models/reference", "tests/reference"), ("tests/build/", "tests/"))]


def canonical_name(name: str) -> str:
    """A module name or ``module:attr`` target under its canonical (pre-move) module name."""
    module, sep, attr = name.partition(":")
    for new, old in _LEGACY_LONGEST_FIRST:
        if module == new or module.startswith(f"{new}."):
            return f"{old}{module[len(new):]}{sep}{attr}"
    return name


def canonical_source(text: str) -> str:
    """A module's source with every moved module named as it was before the move (dotted
    names, ``madbench_common/…`` paths and the tests' paths)."""
    for rx, old in _LEGACY_RX:
        text = rx.sub(old, text)
    for rx, old in _LEGACY_PATHS + _LEGACY_TESTS:
        text = rx.sub(old, text)
    return text


# ---------------------------------------------------------------- which models a stage runs


def stage_models(model: str, params: Mapping[str, Any]) -> list[str]:
    """Registered slugs a stage runs: ``model`` (``+``-joined for compound stages, whose
    parameters then name the ones actually used) and every parameter value that is a slug."""
    from madbench_common.models.registry import REGISTRY

    named = [str(params.get("model") or model)] if "+" not in model else []
    named += [v for v in params.values() if isinstance(v, str)]
    return sorted({s for s in named if s in REGISTRY})


# ---------------------------------------------------------------- adapter code


def _module_file(name: str) -> Path | None:
    """The source file of module ``name``, found without importing anything (a dotted name
    that is not a module, e.g. an imported class, has none)."""
    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)  # a top-level lookup imports nothing
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if not rest:
        return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    for location in spec.submodule_search_locations or ():
        base = Path(location).joinpath(*rest)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _imports(tree: ast.AST, module: str) -> set[str]:
    """Every module imported anywhere in ``tree`` (inside functions too), absolute."""
    found: set[str] = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def _strings(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and len(n.value) < 200}


@lru_cache(maxsize=512)
def _parse(path: str, module: str, mtime_ns: int,
           size: int) -> tuple[str, frozenset[str], frozenset[str]]:
    """(sha256 of the source, imported modules, string constants) of one module's file."""
    del mtime_ns, size  # the cache key: a changed file is read again
    text = Path(path).read_bytes()
    tree = ast.parse(text)
    canonical = canonical_source(text.decode()).encode()
    return (hashlib.sha256(canonical).hexdigest(), frozenset(_imports(tree, module)),
            frozenset(_strings(tree)))


def _read(name: str) -> tuple[str, frozenset[str], frozenset[str]] | None:
    path = _module_file(name)
    if path is None:
        return None
    st = path.stat()
    return _parse(str(path), name, st.st_mtime_ns, st.st_size)


_SNAPSHOT: contextvars.ContextVar[dict[Any, Any] | None] = contextvars.ContextVar(
    "identity_snapshot", default=None)
"""Helper closures (by module) and adapter digests (by slug and the slugs above it), kept
while one identity is computed (:func:`_snapshot`)."""


@contextlib.contextmanager
def _snapshot() -> Iterator[None]:
    """Within it, each module's helper closure is walked, and each adapter digest computed,
    once. One model's identity walks the same closures many times (every model it names,
    each of those models' own, every model of its image for the weights): a stage's
    identity took about a second, and ``madbench run``'s preflight, which computes every
    stage's, 10–40 s. Outside it, every call reads the files again (a long-lived process
    sees edits)."""
    if _SNAPSHOT.get() is not None:
        yield
        return
    token = _SNAPSHOT.set({})
    try:
        yield
    finally:
        _SNAPSHOT.reset(token)


def _helper_modules(module: str) -> dict[str, str]:
    """module → sha256 of its canonical source (:func:`canonical_source`): the adapter
    module and its helpers — the modules of ``madbench_common`` and of the adapter's own
    package it imports — transitively."""
    kept = _SNAPSHOT.get()
    if kept is None:
        return _walk_helpers(module)
    if ("helpers", module) not in kept:
        kept["helpers", module] = _walk_helpers(module)
    return dict(kept["helpers", module])


def _walk_helpers(module: str) -> dict[str, str]:
    roots = (_PACKAGE, module.split(".")[0])
    out: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        parsed = _read(name)
        if parsed is None:
            continue
        out[name] = parsed[0]
        todo += [m for m in parsed[1] if m not in _NOT_HELPERS and m not in out
                 and any(m == r or m.startswith(f"{r}.") for r in roots)]
    return out


def adapter_sources(module: str) -> dict[str, str]:
    """Canonical module name (:func:`canonical_name`) → sha256 of its canonical source, for
    the adapter module and its helpers (see :func:`_helper_modules`)."""
    return dict(sorted((canonical_name(k), v) for k, v in _helper_modules(module).items()))


def _strings_of(modules: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for name in modules:
        parsed = _read(name)
        if parsed is not None:
            found |= parsed[2]
    return found


# ---------------------------------------------------------------- weights


def _model_strings(slug: str) -> set[str]:
    from madbench_common.models.registry import REGISTRY

    return _strings_of(_helper_modules(REGISTRY[slug].target.partition(":")[0]))


def _weights_pins(image: str, strings: set[str]) -> dict[str, Any]:
    """The pins of the entries of ``image``'s weights.yaml the adapter reads: those its
    sources name, and those no model of the image names (read through another library's
    default, e.g. torchaudio's HuBERT file name); every entry when it names none."""
    from madbench_common.models.registry import REGISTRY
    from madbench_common.models.weights import load_spec, spec_path

    if not image or not spec_path(image).exists():
        return {}
    spec = load_spec(image)
    hf = {i.repo: {"revision": i.revision, "commit": i.commit, "sha256": dict(i.sha256) or None}
          for i in spec.hf}
    urls = {u.name: {"sha256": u.sha256} for u in spec.urls}
    named = set().union(*(_model_strings(s) for s, m in REGISTRY.items() if m.image == image))
    if not strings & (set(hf) | set(urls)):
        strings = set(hf) | set(urls)
    keep = strings | ((set(hf) | set(urls)) - named)
    return {"image": image, "hf": {k: v for k, v in hf.items() if k in keep},
            "urls": {k: v for k, v in urls.items() if k in keep}}


# ---------------------------------------------------------------- dtype


def accelerator() -> str:
    """``cuda`` when an NVIDIA GPU is visible to this process, else ``cpu`` (no torch import)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1") or os.environ.get(
            "NVIDIA_VISIBLE_DEVICES") in ("void", "none", ""):
        return "cpu"
    return "cuda" if glob.glob("/dev/nvidia[0-9]*") else "cpu"


def compute_dtype(params: Mapping[str, Any]) -> str:
    """The dtype a stage asks for (``dtype`` parameter), else ``auto:<device class>``."""
    return str(params.get("dtype") or f"auto:{accelerator()}")


def loaded_dtype(model: Any) -> str:
    """The dtype of the first torch module a loaded adapter holds (``n/a`` without one)."""
    for _name, value in sorted(getattr(model, "__dict__", {}).items()):
        if not hasattr(value, "parameters"):
            continue
        dtype = getattr(value, "dtype", None)
        if dtype is not None:
            return str(dtype)
        try:
            return str(next(iter(value.parameters())).dtype)
        except (StopIteration, TypeError, AttributeError):
            continue
    return str(getattr(model, "dtype", None) or "n/a")


# ---------------------------------------------------------------- identities


def model_identity(slug: str, params: Mapping[str, Any] | None = None,
                   _seen: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Adapter code, weights pins and dtype of a registered model (see the module doc)."""
    with _snapshot():
        return _model_identity(slug, params, _seen)


def _model_identity(slug: str, params: Mapping[str, Any] | None,
                    _seen: frozenset[str]) -> dict[str, Any]:
    from madbench_common.models.registry import REGISTRY

    spec = REGISTRY[slug]
    strings = _strings_of(_helper_modules(spec.target.partition(":")[0]))
    return {"adapter": _adapter_digest(slug, _seen),
            "weights": _weights_pins(spec.image, strings),
            "dtype": compute_dtype(params or {})}


def _adapter_digest(slug: str, seen: frozenset[str]) -> str:
    """The ``adapter`` of :func:`model_identity`: its sources and, by slug, the adapters
    of the models they name (``seen``: the slugs above it, which break cycles)."""
    from madbench_common.models.registry import REGISTRY

    kept = _SNAPSHOT.get()
    if kept is not None and ("adapter", slug, seen) in kept:
        return str(kept["adapter", slug, seen])
    spec = REGISTRY[slug]
    module = spec.target.partition(":")[0]
    sources = adapter_sources(module)
    strings = _strings_of(_helper_modules(module))
    uses = sorted(s for s in strings if s in REGISTRY and s != slug and s not in seen)
    adapter = {"target": canonical_name(spec.target), "sources": sources,
               "uses": {u: _adapter_digest(u, seen | {slug}) for u in uses}}
    digest = identity_digest(adapter)
    if kept is not None:
        kept["adapter", slug, seen] = digest
    return digest


def stage_identity(model: str, params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """slug → :func:`model_identity` for every model a stage runs (``{}`` for core stages)."""
    with _snapshot():
        return {slug: model_identity(slug, params) for slug in stage_models(model, params)}


def unpinned_weights(identities: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``slug: entry`` for each weights entry without a pin in ``identities``."""
    out = []
    for slug, ident in sorted(identities.items()):
        weights = ident.get("weights") or {}
        out += [f"{slug}: {repo}@{pin['revision']}" for repo, pin in
                sorted((weights.get("hf") or {}).items()) if not (pin["commit"] and pin["sha256"])]
        out += [f"{slug}: {name}" for name, pin in sorted((weights.get("urls") or {}).items())
                if not pin["sha256"]]
    return out


def identity_digest(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def message_layout(model: Any) -> str:
    """An omni adapter's full message layout for a placeholder prompt, system prompt and
    chat template included: its ``message_layout()`` if it has one, else its
    ``conversation`` (with and without video) and its processor's chat template."""
    own = getattr(model, "message_layout", None)
    if callable(own):
        return str(own())
    parts: list[Any] = []
    conversation = getattr(model, "conversation", None)
    if callable(conversation):
        for video in (False, True):
            try:
                parts.append(conversation("{prompt}", video))
            except TypeError:
                parts.append(conversation("{prompt}"))
                break
    processor = getattr(model, "processor", None)
    template = getattr(processor, "chat_template", None) or getattr(
        getattr(processor, "tokenizer", None), "chat_template", None)
    parts.append(template if isinstance(template, (str, dict, list)) else None)
    return json.dumps(parts, sort_keys=True, default=str)


def cache_identity(slug: str, image: str, params: Mapping[str, Any], model: Any,
                   omni: bool = False) -> str:
    """What a cache of a loaded model's outputs keys on: the image, the model's identity
    with the dtype it loaded, and for omni models the message layout (a hex digest)."""
    from madbench_common.models.registry import REGISTRY

    ident = dict(model_identity(slug, params)) if slug in REGISTRY else {"slug": slug}
    ident["dtype"] = loaded_dtype(model)
    value: dict[str, Any] = {"image": image, "model": ident}
    if omni:
        value["layout"] = message_layout(model)
    return identity_digest(value)
