"""Python 3.9 support: what madbench_common uses from 3.10+, for the bullseye (3.9) images.

The Python 3.9 model images (fairseq-era pins) install madbench_common too, so every
module must import and run on 3.9. The newer features go through this module:
:func:`row` (``@dataclass(frozen=True, kw_only=True)``), :func:`zip_strict`,
:func:`type_hints` (``X | None`` string annotations) and :func:`working_dir`
(``contextlib.chdir``). ``tests/test_py39_compat.py`` rejects the 3.10+ spellings
elsewhere in the package.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import sys
import types
import typing
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["UNION_TYPES", "row", "type_hints", "working_dir", "zip_strict"]

_T = TypeVar("_T")
UNION_TYPES: tuple[Any, ...] = (typing.Union, *((types.UnionType,)
                                                if sys.version_info >= (3, 10) else ()))
"""``typing.get_origin`` of ``X | Y`` (``types.UnionType`` exists from 3.10 only)."""

if TYPE_CHECKING:
    from typing import dataclass_transform
else:
    def dataclass_transform(**_kwargs: Any) -> Any:
        return lambda func: func


class _Required:
    """Sentinel default of a required field on 3.9."""

    def __repr__(self) -> str:
        return "<required>"


_REQUIRED: Any = _Required()


@dataclass_transform(kw_only_default=True, frozen_default=True)
def row(cls: type[_T]) -> type[_T]:
    """``@dataclass(frozen=True, kw_only=True)``, emulated on Python 3.9.

    On 3.9, fields without a default get a sentinel default (so a subclass may add
    required fields after the base's defaulted ones), ``__init__`` takes keywords only, and
    a missing required field raises ``TypeError`` as on 3.10."""
    if sys.version_info >= (3, 10):
        return dataclasses.dataclass(frozen=True, kw_only=True)(cls)
    for name in vars(cls).get("__annotations__", {}):
        if name not in cls.__dict__:
            setattr(cls, name, _REQUIRED)
    made = dataclasses.dataclass(frozen=True)(cls)
    init = made.__init__

    @functools.wraps(init)
    def __init__(self: Any, **kwargs: Any) -> None:
        init(self, **kwargs)
        missing = [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is _REQUIRED]
        if missing:
            raise TypeError(f"{cls.__name__}.__init__() missing required keyword-only "
                            f"argument(s): {', '.join(missing)}")

    made.__init__ = __init__
    return made


def zip_strict(*iterables: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    """``zip(*iterables, strict=True)``: ``ValueError`` when the lengths differ."""
    if sys.version_info >= (3, 10):
        yield from zip(*iterables, strict=True)
        return
    end = object()
    for items in itertools.zip_longest(*iterables, fillvalue=end):
        if any(x is end for x in items):
            raise ValueError("zip_strict: iterables have different lengths")
        yield items


def type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, also for ``X | None`` string annotations on 3.9."""
    if sys.version_info >= (3, 10):
        return typing.get_type_hints(cls)
    from eval_type_backport import eval_type_backport

    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        globalns = vars(sys.modules[base.__module__])
        for name, ann in vars(base).get("__annotations__", {}).items():
            ref = typing.ForwardRef(ann, is_argument=False) if isinstance(ann, str) else ann
            hints[name] = eval_type_backport(ref, globalns, dict(vars(base)))
    return hints


@contextlib.contextmanager
def working_dir(path: str | os.PathLike[str]) -> Iterator[None]:
    """``contextlib.chdir`` (Python 3.11+) for the Python 3.9 images' sake."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)
