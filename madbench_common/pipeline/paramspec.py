"""Typed stage parameters: each stage implementation's frozen ``Params`` dataclass.

A field is one parameter: its type, its default, and its doc (what it means, its unit,
and the paper section that fixes its value, or "our choice"). A field is *declared*
(in every stage the implementation runs, so in every fingerprint) unless marked
``optional``: then it is absent from the stage's parameters until the graph or the user
sets it, and reading it gives its default.

The parameters the fingerprint hashes stay a plain mapping: :func:`build_params` checks a
mapping against the fields and :func:`params_dict` gives back exactly the keys and values
it was given (no value is converted), so typing the parameters changes no fingerprint.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from madbench_common.core.compat import type_hints
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.failures import DEFAULT_MAX_FAILED_FRACTION

__all__ = ["OUR_CHOICE", "ParamDoc", "StageParams", "batch_param", "build_params", "check_value",
           "declared_defaults", "describe_type", "param", "param_docs", "param_types",
           "params_dict", "params_table", "suggest", "takes_text", "unfingerprinted"]

P = TypeVar("P", bound="StageParams")
OUR_CHOICE = "our choice"
"""A field's ``paper`` where the paper fixes no value."""


def param(default: Any, *, doc: str, unit: str = "", paper: str = OUR_CHOICE,
          optional: bool = False, shown: str = "", minimum: float | None = None,
          fingerprinted: bool = True) -> Any:
    """A parameter field: ``default`` (a list or mapping is copied for each instance),
    ``doc`` (what it does), ``unit`` (``s``, ``dBFS``, ``fraction``; empty: none) and
    ``paper`` (the section that fixes it, e.g. ``§3.2``, or "our choice"). ``optional``:
    absent from the stage's parameters (and its fingerprint) unless set. ``shown``: the
    default in words, for a table (a long list). ``minimum``: the least number accepted.
    ``fingerprinted=False``: the value decides how rows are computed or judged, never what
    they hold, so the fingerprint leaves it out (:func:`unfingerprinted`)."""
    meta = {"doc": doc, "unit": unit, "paper": paper, "optional": optional, "shown": shown,
            "minimum": minimum, "fingerprinted": fingerprinted}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def batch_param(inputs: str) -> Any:
    """The ``batch`` field of a stage that runs several ``inputs`` in one model call: unset,
    the model card's ``gpu.batch``; not fingerprinted, as batched results equal batch 1's
    within the README's tolerance (``models.batching.EQUIVALENCE_ATOL``), so a rerun at
    another batch size reuses what is done."""
    return param(None, optional=True, minimum=1, fingerprinted=False,
                 shown="the card's gpu.batch", unit=f"{inputs} per model call",
                 doc=f"{inputs} one model call takes (unset: the model card's gpu.batch); "
                     "results equal batch 1's within the README's tolerance, so not "
                     "fingerprinted")


def unfingerprinted(cls: type[StageParams]) -> frozenset[str]:
    """The fields of ``cls`` that the fingerprint leaves out (``fingerprinted=False``)."""
    return frozenset(f.name for f in _fields(cls) if not f.metadata.get("fingerprinted", True))


@dataclass(frozen=True)
class StageParams:
    """The parameters every stage takes; an implementation's ``Params`` adds its own."""

    max_failed_fraction: float = param(
        DEFAULT_MAX_FAILED_FRACTION, optional=True, unit="fraction of the stage's rows",
        fingerprinted=False, doc="rejection budget: rows rejected for a fault (device, "
        "memory, code) over this fraction fail the merge (data reasons never count); not "
        "fingerprinted")
    model: str = param("", optional=True, doc="registry slug of the one model the stage "
                       "runs (a stage with a swappable model; default: the graph's)")
    _given: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)


@dataclass(frozen=True)
class ParamDoc:
    """One field as the README's defaults table shows it."""

    name: str
    default: Any
    type: str
    unit: str
    paper: str
    doc: str
    optional: bool
    shown: str


def _fields(cls: type[StageParams]) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if not f.name.startswith("_")]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


_TYPES: dict[type[StageParams], dict[str, Any]] = {}


def param_types(cls: type[StageParams]) -> dict[str, Any]:
    """Field name → its type (annotations resolved in the class's module)."""
    if cls not in _TYPES:
        hints = type_hints(cls)
        _TYPES[cls] = {f.name: hints[f.name] for f in _fields(cls)}
    return dict(_TYPES[cls])


def declared_defaults(cls: type[StageParams]) -> dict[str, Any]:
    """The defaults of the fields that are not optional: every stage of ``cls`` has them."""
    return {f.name: _default(f) for f in _fields(cls) if not f.metadata.get("optional")}


def param_docs(cls: type[StageParams]) -> list[ParamDoc]:
    """Every field of ``cls`` but the common ones (:class:`StageParams`), in order."""
    common = {f.name for f in _fields(StageParams)}
    hints = param_types(cls)
    return [ParamDoc(f.name, _default(f), describe_type(hints[f.name], bare=True),
                     f.metadata.get("unit", ""), f.metadata.get("paper", OUR_CHOICE),
                     f.metadata.get("doc", ""), bool(f.metadata.get("optional")),
                     f.metadata.get("shown", ""))
            for f in _fields(cls) if f.name not in common]


_UNION = getattr(types, "UnionType", typing.Union)
"""``X | Y``'s type (3.10+); on 3.9 the annotations resolve to ``typing.Union``."""


def _arms(tp: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is _UNION:
        return typing.get_args(tp)
    return (tp,)


def _fits(value: Any, tp: Any) -> bool:
    """Whether ``value`` (JSON-shaped) has type ``tp``; an int is a float, a bool no int."""
    if tp is Any or tp is object:
        return True
    if len(arms := _arms(tp)) > 1:
        return any(_fits(value, a) for a in arms)
    if tp is None or tp is type(None):
        return value is None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return value in args
    if origin in (list, tuple):
        inner = args[0] if args else Any
        return isinstance(value, (list, tuple)) and all(_fits(v, inner) for v in value)
    if origin is dict:
        key, val = args or (Any, Any)
        return isinstance(value, dict) and all(_fits(k, key) and _fits(v, val)
                                               for k, v in value.items())
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp) if isinstance(tp, type) else True


_NAMES = {bool: "bool", int: "integer", float: "number", str: "string"}


def describe_type(tp: Any, bare: bool = False) -> str:
    """``tp`` in words: ``a number``, ``a list of strings``, ``a mapping or a string``
    (``bare``: without the articles, for a table: ``number``, ``list of strings``)."""
    nouns = sorted({_noun(a) for a in _arms(tp)}, key=lambda n: (n == "null", n))
    if bare:
        return " or ".join(nouns)
    return " or ".join(n if n.startswith(("one of", "null")) else
                       f"{'an' if n[0] in 'aeiou' else 'a'} {n}" for n in nouns)


def _noun(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is None or tp is type(None):
        return "null"
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (list, tuple):
        inner = sorted({_noun(a) + "s" for a in _arms(args[0])}) \
            if args and args[0] is not Any else []
        return "list" + (f" of {' or '.join(inner)}" if inner else "")
    if origin is dict or tp is dict:
        return "mapping"
    if tp is Any:
        return "value"
    return _NAMES.get(tp, getattr(tp, "__name__", str(tp)))


def takes_text(cls: type[StageParams], key: str) -> bool:
    """Whether field ``key`` takes a string (a ``--param KEY=VALUE`` is kept as text)."""
    tp = param_types(cls).get(key, Any)
    return tp is Any or any(a is str for a in _arms(tp))


def suggest(word: str, choices: list[str]) -> str:
    """``; did you mean 'x'?`` for the closest of ``choices``, or nothing."""
    close = difflib.get_close_matches(word, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_value(cls: type[StageParams], key: str, value: Any, stage: str, flag: str) -> None:
    """Refuse ``value`` for field ``key`` unless it has the field's type (an integer is a
    number) and is at least its ``minimum``, naming ``flag``, the stage, the key, the type,
    the default and the value."""
    tp = param_types(cls)[key]
    f = next(f for f in _fields(cls) if f.name == key)
    least = f.metadata.get("minimum")
    if not _fits(value, tp):
        raise ConfigError(f"{flag}: {stage}.{key} must be {describe_type(tp)} "
                          f"(default {_default(f)!r}), got {value!r} ({type(value).__name__})")
    if least is not None and isinstance(value, (int, float)) and value < least:
        raise ConfigError(f"{flag}: {stage}.{key} must be >= {least:g}, got {value!r}")


def build_params(cls: type[P], values: Mapping[str, Any], stage: str,
                 flag: str = "parameters") -> P:
    """``values`` as ``cls``: unknown keys and values of the wrong type are refused
    (:class:`ConfigError`, exit 3, naming ``flag`` and ``stage``); :func:`params_dict`
    gives back ``values``. A key absent from ``values`` reads its field's default."""
    names = [f.name for f in _fields(cls)]
    if unknown := sorted(set(values) - set(names)):
        said = ", ".join(repr(k) for k in unknown)
        raise ConfigError(f"{flag}: stage {stage!r} has no parameter {said}"
                          f"{suggest(unknown[0], names)} (its parameters: "
                          f"{', '.join(sorted(names))})")
    for key, value in values.items():
        check_value(cls, key, value, stage, flag)
    typed = cls(**values)
    object.__setattr__(typed, "_given", tuple(values))
    return typed


def params_dict(typed: StageParams) -> dict[str, Any]:
    """The mapping ``typed`` was built from: the same keys, the same values (the
    fingerprint hashes it)."""
    return {k: getattr(typed, k) for k in typed._given}



def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _shown(doc: ParamDoc) -> str:
    if doc.shown:
        return doc.shown
    return f"`{json.dumps(doc.default, ensure_ascii=False)}`"


def params_table(impls: Sequence[tuple[str, type[StageParams]]]) -> str:
    """A Markdown table of the fields of each ``(where, Params)``: stage, parameter, type,
    default, unit, the paper section that fixes it (or "our choice") and what it does."""
    lines = ["| stage | parameter | type | default | unit | paper | what |",
             "|---|---|---|---|---|---|---|"]
    optional = False
    for where, cls in impls:
        for doc in param_docs(cls):
            mark = " ‡" if doc.optional else ""
            optional |= doc.optional
            lines.append(f"| `{where}` | `{doc.name}`{mark} | {doc.type} | {_cell(_shown(doc))} | "
                         f"{_cell(doc.unit) or '–'} | {_cell(doc.paper)} | {_cell(doc.doc)} |")
    if optional:
        lines += ["", "‡ absent from the stage's parameters, and its fingerprint, unless the "
                      "graph or the run sets it; unset, the stage reads the default."]
    return "\n".join(lines) + "\n"
