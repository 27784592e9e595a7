"""A model's identity: what a model stage's output depends on besides its inputs.

For every model a stage runs, :func:`model_identity` adds to the stage's fingerprint:
``adapter`` (the card slug and a digest of the adapter's code in normal form,
:func:`adapter_code`: AST dumps with docstrings and module paths taken out, so a move or a
reformat changes nothing and a code edit changes it), ``weights`` (the ``weights.yaml``
pins of the entries the adapter reads) and ``dtype``. The omni response cache also keys on
the message layout (:func:`message_layout`). Nothing here imports a model: the
orchestrator stays light.
"""

from __future__ import annotations

import ast
import glob
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["accelerator", "adapter_code", "cache_identity", "canonical_name", "compute_dtype",
           "identity_digest", "loaded_dtype", "message_layout", "model_identity",
           "stage_identity", "stage_models", "unpinned_weights"]

_PACKAGE = "madbench_common"


# ---------------------------------------------------------------- which models a stage runs


def stage_models(model: str, params: Mapping[str, Any]) -> list[str]:
    """Registered slugs a stage runs: ``model`` (``+``-joined for compound stages, whose
    parameters then name the ones actually used) and every parameter value that is a slug."""
    from madbench_common.models.registry import REGISTRY

    named = [str(params.get("model") or model)] if "+" not in model else []
    named += [v for v in params.values() if isinstance(v, str)]
    return sorted({s for s in named if s in REGISTRY})


# ---------------------------------------------------------------- adapter code


def canonical_name(target: str) -> str:
    """A ``module:attr`` target (or a module) named the way a move leaves unchanged: the
    attribute alone, or a bare module's last component."""
    module, _, attr = target.partition(":")
    return attr or module.rsplit(".", 1)[-1]


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


_Ref = tuple[str, "str | None"]
"""(module, top-level name), or (module, None) for the whole module."""


@dataclass(frozen=True)
class _Module:
    """One parsed module: its top-level statements, normalised, and what they refer to."""

    code: dict[int, tuple[str, frozenset[_Ref], frozenset[str]]]
    """statement index → (sha256 of its normalised AST dump, the code it names, its string
    constants, docstrings included)."""
    defs: dict[str, tuple[int, ...]]
    """name → the statements that bind it."""
    imports: dict[str, tuple[str, str | None]]
    """name → where the module's top-level imports take it from (re-exports)."""
    glue: tuple[int, ...]
    """Statements that are not definitions (``if``/``try`` blocks, calls run at import):
    part of the module whenever any of it is used."""
    doc: frozenset[str]
    """The module docstring (its strings count where the module is used)."""


def _ours(name: str, roots: tuple[str, ...]) -> bool:
    return any(name == r or name.startswith(f"{r}.") for r in roots)


def _import_map(stmts: Iterable[ast.stmt], module: str,
                is_package: bool) -> dict[str, tuple[str, str | None]]:
    """local name → (module, name imported from it; None for ``import a.b``) of every
    import in ``stmts``, nested ones included."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    out: dict[str, tuple[str, str | None]] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Import):
                for a in node.names:
                    out[a.asname or a.name.split(".")[0]] = (a.name, None)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package[:len(package) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                for a in node.names:
                    out[a.asname or a.name] = (base, a.name)
    return out


def _is_text(stmt: ast.AST) -> bool:
    """A statement that is a bare string: a docstring, or an attribute's docstring below
    its assignment. It does nothing, so it is never part of an identity."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and \
        isinstance(stmt.value.value, str)


_BLOCKS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.If, ast.For, ast.AsyncFor,
           ast.While, ast.With, ast.AsyncWith, ast.Try)
"""Statements whose ``body`` is a list of statements."""


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, _BLOCKS) and any(_is_text(s) for s in node.body):
            node.body = [s for s in node.body if not _is_text(s)] or [ast.Pass()]


_TARGET = re.compile(r"^[A-Za-z_]\w*(\.\w+)+(:\w+)?$")


def _drop_locations(tree: ast.AST, roots: tuple[str, ...]) -> None:
    """Take out where code lives: an import from our packages keeps only the names it
    binds, and a string naming one of our modules only its last part."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or _ours(node.module or "", roots)):
            node.module, node.level = None, 0
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _ours(a.name, roots):
                    a.name = canonical_name(a.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                _TARGET.match(node.value) and _ours(node.value.split(":")[0], roots):
            node.value = canonical_name(node.value)


def _binds(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id}
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}


def _constants(node: ast.AST) -> frozenset[str]:
    return frozenset(n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
                     and isinstance(n.value, str) and len(n.value) < 200)


@lru_cache(maxsize=1024)
def _parse(path: str, module: str, roots: tuple[str, ...], mtime_ns: int,
           size: int) -> _Module:
    """One module's statements (cached until the file changes)."""
    del mtime_ns, size  # the cache key: a changed file is read again
    tree = ast.parse(Path(path).read_bytes())
    is_package = path.endswith("__init__.py")
    body = list(tree.body)
    doc: frozenset[str] = frozenset()
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        doc = _constants(body.pop(0))
    imports = _import_map(body, module, is_package)
    code: dict[int, tuple[str, frozenset[_Ref], frozenset[str]]] = {}
    defs: dict[str, list[int]] = {}
    glue: list[int] = []
    for i, stmt in enumerate(body):
        if _is_text(stmt):  # an attribute's docstring: its words, as the module's, only
            doc |= _constants(stmt)
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue  # followed where a statement uses the name it binds
        used = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        refs: set[_Ref] = {(module, n) for n in used}
        refs |= {imports[n] for n in used if n in imports}
        refs |= set(_import_map([stmt], module, is_package).values())  # nested imports
        strings = _constants(stmt)
        _strip_docstrings(stmt)
        _drop_locations(stmt, roots)
        code[i] = (hashlib.sha256(ast.dump(stmt).encode()).hexdigest(), frozenset(refs),
                   strings)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.Assign, ast.AnnAssign)):
            for name in _binds(stmt):
                defs.setdefault(name, []).append(i)
        else:
            glue.append(i)
    return _Module(code, {k: tuple(v) for k, v in defs.items()},
                   {k: v for k, v in imports.items() if v[1] is not None}, tuple(glue), doc)


def _read(name: str, roots: tuple[str, ...]) -> _Module | None:
    path = _module_file(name)
    if path is None:
        return None
    st = path.stat()
    return _parse(str(path), name, roots, st.st_mtime_ns, st.st_size)


def _closure(target: str) -> tuple[list[str], set[str]]:
    """(sorted sha256 of each normalised statement, string constants) of the code a
    ``module:attr`` target runs: its definition and, transitively, every top-level
    definition of our packages that it names. It follows names, not modules: a move, a
    reformat or an edit elsewhere in a helper's module leaves it unchanged."""
    module, _, attr = target.partition(":")
    roots = tuple(sorted({_PACKAGE, module.split(".")[0]}))
    todo: list[_Ref] = [(module, attr or None)]
    seen: set[_Ref] = set()
    done: set[tuple[str, int]] = set()
    digests: list[str] = []
    strings: set[str] = set()
    while todo:
        ref = todo.pop()
        mod, name = ref
        if ref in seen or not _ours(mod, roots):
            continue
        seen.add(ref)
        parsed = _read(mod, roots)
        if parsed is None:  # ``from a import b``: ``b`` may be a module
            continue
        if name is None:
            keys = list(parsed.code)
        elif name in parsed.defs:
            keys = list(parsed.defs[name]) + list(parsed.glue)
        elif name in parsed.imports:  # a re-export
            todo.append(parsed.imports[name])
            continue
        else:
            todo.append((f"{mod}.{name}", None))
            continue
        strings |= parsed.doc
        for key in keys:
            if (mod, key) in done:
                continue
            done.add((mod, key))
            digest, refs, found = parsed.code[key]
            digests.append(digest)
            strings |= found
            todo += [r for r in refs if r not in seen and (r[0] != mod or r[1] in parsed.defs
                                                           or r[1] in parsed.imports)]
    return sorted(digests), strings


def adapter_code(target: str) -> str:
    """sha256 of the normalised code a target runs (:func:`_closure`)."""
    return identity_digest(_closure(target)[0])


# ---------------------------------------------------------------- weights


def _model_strings(slug: str) -> set[str]:
    from madbench_common.models.registry import REGISTRY

    return _closure(REGISTRY[slug].target)[1]


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
    from madbench_common.models.registry import REGISTRY

    spec = REGISTRY[slug]
    digests, strings = _closure(spec.target)
    uses = sorted(s for s in strings if s in REGISTRY and s != slug and s not in _seen)
    adapter = {"slug": slug, "code": identity_digest(digests),
               "uses": {u: model_identity(u, None, _seen | {slug})["adapter"] for u in uses}}
    return {"adapter": identity_digest(adapter),
            "weights": _weights_pins(spec.image, strings),
            "dtype": compute_dtype(params or {})}


def stage_identity(model: str, params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """slug → :func:`model_identity` for every model a stage runs (``{}`` for core stages)."""
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
