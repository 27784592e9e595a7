"""What the local executor reads in a workflow's texts: ``{{tag}}`` and ``{{=expression}}``
substitution, Kubernetes quantities and Argo durations, and the tasks a DAG task waits on.

The expression and ``depends`` grammars are the validator's
(:mod:`madbench_common.pipeline.argo_expr`), so a text runs here as ``madbench lint``
read it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.argo_expr import UnsupportedConstruct, depends_names, evaluate

__all__ = ["ParamValue", "deps_of", "parse_duration", "parse_quantity", "subst_tree",
           "substitute", "toposort"]

ParamValue = Union[str, Callable[[], str]]
"""A workflow parameter's value: a string, or a callable bound when a pod is resolved."""


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def substitute(text: str, scope: Mapping[str, ParamValue], where: str = "") -> str:
    """Replace every ``{{tag}}`` and ``{{=expression}}`` in ``text`` from ``scope``.

    ``scope`` maps full tag names (``workflow.parameters.store``, ``item``, …) to values;
    an unknown tag fails (Argo refuses unresolved variables too).
    """
    def lookup(name: str) -> str:
        if name not in scope:
            raise UnsupportedConstruct(f"{where or 'workflow'}: unknown variable {{{{{name}}}}}"
                                       f" (known here: {', '.join(sorted(scope)) or 'none'})")
        value = scope[name]
        return value() if callable(value) else value

    def one(m: re.Match[str]) -> str:
        body = m.group(1).strip()
        if body.startswith("="):
            return _render(evaluate(body[1:], lookup))
        return lookup(body)

    return _TAG.sub(one, text)


def subst_tree(value: Any, scope: Mapping[str, ParamValue], where: str) -> Any:
    if isinstance(value, str):
        return substitute(value, scope, where)
    if isinstance(value, list):
        return [subst_tree(v, scope, where) for v in value]
    if isinstance(value, dict):
        return {k: subst_tree(v, scope, where) for k, v in value.items()}
    return value


# ------------------------------------------------------------------ quantities


_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity (``512Mi``, ``2Gi``, ``500m``, ``1``) as a number."""
    m = _QUANTITY.match(str(value).strip())
    if m is None or m.group(2) not in _SUFFIX:
        raise UnsupportedConstruct(f"quantity {value!r} is not supported")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(value: Any) -> float:
    """Seconds of an Argo duration: ``30s``, ``1m30s``, ``2h``, or a plain number."""
    text = str(value).strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise UnsupportedConstruct(f"duration {value!r} is not supported")
    scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


# ------------------------------------------------------------------ dependencies


def deps_of(task: dict[str, Any]) -> list[str]:
    """The tasks ``task`` waits on, read as Argo reads them (GetTaskDependencies)."""
    return sorted(depends_names(task))


def toposort(tasks: Sequence[dict[str, Any]], where: str) -> list[str]:
    """The tasks' names, each after every task it waits on; a cycle is a ConfigError."""
    deps = {t["name"]: deps_of(t) for t in tasks}
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, path: tuple[str, ...]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            raise ConfigError(f"{where}: dependency cycle {' -> '.join((*path, n))}")
        state[n] = 1
        for d in deps[n]:
            visit(d, (*path, n))
        state[n] = 2
        order.append(n)

    for t in tasks:
        visit(t["name"], ())
    return order
