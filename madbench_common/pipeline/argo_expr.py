"""The small languages inside an Argo Workflow, read as Argo v3.7.18 reads them.

``{{=…}}`` expressions (:func:`evaluate`), ``depends`` expressions (:func:`parse_depends`,
:func:`depends_names`) and the task graph they define (sorting, cycles, ancestry), Go
durations and Kubernetes quantities. Both the validator (:mod:`.argo_rules`) and the
local executor (:mod:`madbench_common.cluster.argo_local`) parse with these, so a text
is read the same way where it is checked and where it runs; each function cites the
Argo or Kubernetes source it re-implements.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from madbench_common.core.errors import ConfigError

__all__ = [
    "DependsError",
    "UnsupportedConstruct",
    "ancestry",
    "dependency_cycle",
    "depends_names",
    "evaluate",
    "parse_depends",
    "parse_go_duration",
    "parse_k8s_quantity",
    "sort_problem",
    "truth",
]


# ------------------------------------------------------------------ expressions


class UnsupportedConstruct(ConfigError):
    """The workflow uses something this interpreter does not implement."""


_TOKEN = re.compile(r"""\s*(?:
    (?P<num>\d+(?:\.\d+)?)
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!?:()])
)""", re.VERBOSE)
_KEYWORDS = {"true": True, "false": False, "nil": None}


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise UnsupportedConstruct(f"expression {text!r}: cannot read {text[pos:]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    """Recursive descent over the expr-lang subset: ternary, ||, &&, comparisons, !."""

    def __init__(self, text: str, lookup: Callable[[str], Any],
                 tokens: list[tuple[str, str]] | None = None) -> None:
        self.text, self.i, self.lookup = text, 0, lookup
        self.toks = _tokens(text) if tokens is None else tokens

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise UnsupportedConstruct(f"expression {self.text!r}: unexpected end")
        tok = self.toks[self.i]
        if want is not None and tok[1] != want:
            raise UnsupportedConstruct(f"expression {self.text!r}: expected {want!r}, "
                                       f"got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        value = self.ternary()
        if self.i != len(self.toks):
            raise UnsupportedConstruct(f"expression {self.text!r}: unsupported at "
                                       f"{self.toks[self.i][1]!r}")
        return value

    def ternary(self) -> Any:
        cond = self.or_()
        if self.peek() == "?":
            self.take("?")
            yes = self.ternary()
            self.take(":")
            no = self.ternary()
            return yes if truth(cond) else no
        return cond

    def or_(self) -> Any:
        value = self.and_()
        while self.peek() == "||":
            self.take()
            right = self.and_()
            value = truth(value) or truth(right)
        return value

    def and_(self) -> Any:
        value = self.compare()
        while self.peek() == "&&":
            self.take()
            right = self.compare()
            value = truth(value) and truth(right)
        return value

    def compare(self) -> Any:
        left = self.unary()
        op = self.peek()
        if op in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.unary()
            if op == "==":
                return left == right
            if op == "!=":
                return left != right
            if type(left) is not type(right) and not all(
                    isinstance(v, (int, float)) for v in (left, right)):
                raise UnsupportedConstruct(f"expression {self.text!r}: cannot compare "
                                           f"{left!r} {op} {right!r}")
            return {"<": left < right, "<=": left <= right, ">": left > right,
                    ">=": left >= right}[op]
        return left

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not truth(self.unary())
        return self.atom()

    def atom(self) -> Any:
        kind, text = self.take()
        if text == "(":
            value = self.ternary()
            self.take(")")
            return value
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "str":
            return json.loads('"' + text[1:-1].replace('"', '\\"').replace("\\'", "'") + '"')
        if kind == "name":
            if self.peek() == "(":
                raise UnsupportedConstruct(f"expression {self.text!r}: function {text}() "
                                           "is not supported")
            return _KEYWORDS[text] if text in _KEYWORDS else self.lookup(text)
        raise UnsupportedConstruct(f"expression {self.text!r}: unexpected {text!r}")


def truth(value: Any) -> bool:
    if not isinstance(value, bool):
        raise UnsupportedConstruct(f"expected a boolean, got {value!r}")
    return value


def evaluate(expr: str, lookup: Callable[[str], Any]) -> Any:
    """Evaluate an Argo ``{{=…}}`` expression; ``lookup`` resolves dotted names."""
    return _Parser(expr, lookup).parse()


# ------------------------------------------------------------------ durations and quantities


def parse_go_duration(text: str) -> float:
    """Seconds of an Argo duration string, as ``wfv1.ParseStringToDuration``
    (pkg/apis/workflow/v1alpha1/utils.go:9-20): an integer is seconds, anything else
    Go's ``time.ParseDuration``. ValueError carries Argo's message."""
    s = str(text)
    if re.fullmatch(r"[+-]?\d+", s):
        return float(int(s))
    m = re.fullmatch(r"[+-]?((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+", s)
    if s == "0":
        return 0.0
    if m is None:
        unit = re.search(r"\d([a-zA-Zµ]+)", s)
        if unit and unit.group(1) not in ("ns", "us", "µs", "ms", "s", "m", "h"):
            why = f'time: unknown unit "{unit.group(1)}" in duration "{s}"'
        elif re.fullmatch(r"[+-]?[\d.]+", s):
            why = f'time: missing unit in duration "{s}"'
        else:
            why = f'time: invalid duration "{s}"'
        raise ValueError(f"unable to parse {s} as a duration: {why}")
    scale = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total = sum(float(n) * scale[u] for n, u in
                re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", s))
    return -total if s.startswith("-") else total


# k8s.io/apimachinery/pkg/api/resource/quantity.go: splitREString, ErrFormatWrong,
# ErrSuffix; the suffixes of the <binarySI>, <decimalSI> and <decimalExponent> grammar
_QUANTITY_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY_FORMAT = f"quantities must match the regular expression '{_QUANTITY_RE}'"
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9,
            "T": 1e12, "P": 1e15, "E": 1e18}


def parse_k8s_quantity(value: Any) -> float:
    """A Kubernetes resource quantity's value (``512Mi``, ``500m``, ``1.5``, ``1e3``);
    ValueError with the API server's message for anything its parser refuses."""
    s = str(value)
    m = re.fullmatch(r"([+-]?)(\d*)(?:\.(\d*))?(.*)", s)
    if not s or m is None or not (m.group(2) or m.group(3)) or not re.fullmatch(
            _QUANTITY_RE, s):
        raise ValueError(_QUANTITY_FORMAT)
    number = float(f"{m.group(1)}{m.group(2) or '0'}.{m.group(3) or '0'}")
    suffix = m.group(4)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    e = re.fullmatch(r"[eE]([+-]?\d+)", suffix)
    if e is None:
        raise ValueError("unable to parse quantity's suffix")
    return number * 10.0 ** int(e.group(1))


# ------------------------------------------------------------------ depends


class DependsError(ValueError):
    """A ``depends`` expression Argo's expression evaluator cannot evaluate."""


_DEP_TOKEN = re.compile(r"\s*(?:(?P<op>&&|\|\||[!()])|(?P<name>[A-Za-z0-9][-A-Za-z0-9]*"
                        r"(?:\.[A-Za-z]+)?))")


def parse_depends(expr: str) -> Any:
    """The syntax tree of a ``depends`` expression: ``("name", task, result|None)``,
    ``("not", x)``, ``("and", a, b)``, ``("or", a, b)``.

    Argo evaluates the expression with expr-lang after replacing ``-`` by ``_``
    (workflow/controller/dag.go:1017-1021); a text it cannot evaluate makes the task an
    ``Error`` node with "unable to evaluate expression '…'" (dag.go:581-585). The
    grammar here is the subset Argo documents for ``depends``: task names, an optional
    ``.Result``, ``&&``, ``||``, ``!`` and parentheses.
    """
    toks: list[tuple[str, str]] = []
    pos, text = 0, expr.rstrip()
    while pos < len(text):
        m = _DEP_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise DependsError(f"unexpected {text[pos:]!r}")
        kind = m.lastgroup or ""
        toks.append((kind, m.group(kind)))
        pos = m.end()
    i = 0

    def peek() -> str | None:
        return toks[i][1] if i < len(toks) else None

    def take() -> tuple[str, str]:
        nonlocal i
        if i >= len(toks):
            raise DependsError("unexpected end of expression")
        i += 1
        return toks[i - 1]

    def or_() -> Any:
        left = and_()
        while peek() == "||":
            take()
            left = ("or", left, and_())
        return left

    def and_() -> Any:
        left = unary()
        while peek() == "&&":
            take()
            left = ("and", left, unary())
        return left

    def unary() -> Any:
        if peek() == "!":
            take()
            return ("not", unary())
        kind, tok = take()
        if tok == "(":
            inner = or_()
            if take()[1] != ")":
                raise DependsError("missing ')'")
            return inner
        if kind != "name":
            raise DependsError(f"unexpected {tok!r}")
        name, _, result = tok.partition(".")
        return ("name", name, result or None)

    if not toks:
        raise DependsError("empty expression")
    tree = or_()
    if i != len(toks):
        raise DependsError(f"unexpected {toks[i][1]!r}")
    return tree


# workflow/common/ancestry.go:34-35 (taskNameRegex)
_TASK_NAME = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)|([a-zA-Z0-9][-a-zA-Z0-9]*)")


def depends_names(task: Mapping[str, Any]) -> dict[str, bool]:
    """The tasks a DAG task depends on, as Argo reads them (GetTaskDependencies,
    workflow/common/ancestry.go:51-87: a regular expression over ``depends``, or the
    ``dependencies`` list), each mapped to whether an items-based result
    (``.AnySucceeded``/``.AllFailed``) names it."""
    if task.get("depends"):
        out: dict[str, bool] = {}
        for full, bare in _TASK_NAME.findall(str(task["depends"])):
            if full:
                name, result = full.split(".", 1)
                out[name] = out.get(name, False) or result in ("AnySucceeded", "AllFailed")
            else:
                out.setdefault(bare, False)
        return out
    return {str(d): False for d in task.get("dependencies") or []}


# ------------------------------------------------------------------ the task graph


def sort_problem(names: list[str], deps: Mapping[str, Mapping[str, bool]]) -> str:
    """util/sorting/topological_sorting.go:12-59: the first error Argo's sort reports."""
    seen: set[str] = set()
    for n in names:
        if n in seen:
            return f"duplicated nodeName {n}"
        seen.add(n)
    for n in names:
        for d in deps.get(n, {}):
            if d not in seen:
                return f"invalid dependency {d}"
    indeg = {n: len(deps.get(n, {})) for n in names}
    queue = [n for n in names if indeg[n] == 0]
    done = 0
    while queue:
        cur = queue.pop()
        done += 1
        for n in names:
            if cur in deps.get(n, {}):
                indeg[n] -= 1
                if indeg[n] == 0:
                    queue.append(n)
    return "" if done == len(names) else "graph with cycle"


def dependency_cycle(deps: Mapping[str, Mapping[str, bool]]) -> str:
    """verifyNoCycles (workflow/validate/validate.go:1551-1585): the first cycle, as Argo
    writes it."""
    visited: set[str] = set()

    def walk(n: str, path: list[str]) -> str:
        if n in visited:
            return ""
        for d in deps.get(n, {}):
            if d in path:
                return f"{'->'.join(path)}->{d}"
            found = walk(d, [*path, d])
            if found:
                return found
        visited.add(n)
        return ""

    for n in deps:
        found = walk(n, [])
        if found:
            return found
    return ""


def ancestry(task: str, deps: Mapping[str, Mapping[str, bool]]) -> set[str]:
    """GetTaskAncestry (workflow/common/ancestry.go:140-166): every task ``task`` waits on."""
    out: set[str] = set()
    stack = list(deps.get(task, {}))
    while stack:
        n = stack.pop()
        if n not in out and n in deps:
            out.add(n)
            stack += list(deps[n])
    return out
