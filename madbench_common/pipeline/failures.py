"""Which failures quarantine one row and which fail the whole stage (one rule, every stage).

A stage runs item by item; what goes wrong on one item must not take the others
with it. :func:`row_failure` sorts an exception raised while handling one item:

* **the whole stage** (raised again, the CLI exits with its code):
  a missing tool, module, model or weight (:class:`EnvironmentMissing`, or any
  ``ImportError``, or a read-only file system where the stage must write: exit 3);
  any other configuration error, a damaged upstream object or manifest (exit 3; the
  runner recomputes what wrote a damaged object); transient trouble (the store
  unreachable, the run locked, a raw store fault such as a connection reset or a 5xx
  reply that reached stage code: :func:`~madbench_common.core.s3client.store_failure`)
  and a full disk (``ENOSPC``, ``EDQUOT``, ``EFBIG``: exit 75); a store's refusal
  (access denied, no such bucket: exit 3);
* **that row only** (returned as an :class:`InputRejected` with a reason code, the
  row is quarantined and the run goes on): everything else, i.e. bad input
  (:class:`InputRejected` with its own reason), a name the store refuses
  (``bad_name``), an ``OSError`` on the item's file (``io_error``, e.g. a file name
  too long), undecodable text (``bad_encoding``), memory exhausted by the item
  (``out_of_memory``), or any other exception of stage or model code on that item
  (``item_failed``: the message names the exception).

:func:`stage_failure` turns what escapes a whole shard or merge into a
:class:`~madbench_common.core.errors.MadbenchError` with one line naming stage, shard and
cause (the traceback goes to the debug log), so no shard ends in a bare traceback.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
from typing import Any, TypeVar

from madbench_common.core import compat
from madbench_common.core.errors import (
    EnvironmentMissing,
    InputRejected,
    MadbenchError,
    StoreKeyError,
    StoreWriteError,
)
from madbench_common.core.manifest import ManifestRow
from madbench_common.core.s3client import store_failure

__all__ = ["StageFailed", "blank_row", "environment_cause", "row_failure", "stage_failure"]

log = logging.getLogger("madbench")
ROW = TypeVar("ROW", bound=ManifestRow)
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_DETAIL_CHARS = 500


class StageFailed(MadbenchError):
    """Stage code failed on a whole shard or merge (not on one item): deterministic, exit 3."""


def environment_cause(exc: BaseException) -> EnvironmentMissing | None:
    """The missing tool, module, model or weight behind ``exc`` (its chain), if any."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, EnvironmentMissing):
            return seen
        if isinstance(seen, ImportError):
            name = getattr(seen, "name", None) or str(seen)
            return EnvironmentMissing(f"the Python module {name!r} cannot be imported "
                                      f"here ({seen}); it belongs in the stage's image")
        if isinstance(seen, OSError) and seen.errno == errno.EROFS:
            return EnvironmentMissing(f"{seen.filename or 'a path'}: read-only file system; "
                                      "the stage needs it writable")
        seen = seen.__cause__ or seen.__context__
    return None


def _no_space(exc: BaseException) -> StoreWriteError | None:
    if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
        where = exc.filename or "a local file"
        return StoreWriteError(f"{where}: no space left ({exc.strerror}); free space and "
                               "rerun, finished work is kept")
    return None


def _raw_store_fault(exc: BaseException, sockets: bool = True) -> MadbenchError | None:
    """A raw boto3/urllib3 (and, with ``sockets``, socket) fault in ``exc``'s chain as a
    madbench error."""
    found = store_failure(exc, sockets)
    return None if found is None or found is exc else found


def _detail(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def row_failure(exc: Exception, item: str) -> InputRejected:
    """The quarantine reason for ``exc`` raised on ``item``; raises it if the whole stage
    must fail (see the module doc)."""
    missing = environment_cause(exc)
    if missing is not None:
        raise missing from None
    full = _no_space(exc)
    if full is not None:
        raise full from None
    if isinstance(exc, InputRejected):
        return exc
    store = _raw_store_fault(exc, sockets=False)
    if store is not None:  # the store failed, not the item: never a quarantined row
        raise store from None
    if isinstance(exc, StoreKeyError):
        return InputRejected(item, "bad_name", str(exc))
    if isinstance(exc, MadbenchError):
        raise exc
    if isinstance(exc, OSError):
        return InputRejected(str(exc.filename or item), "io_error", _detail(exc))
    if isinstance(exc, UnicodeError):
        return InputRejected(item, "bad_encoding", _detail(exc))
    if isinstance(exc, MemoryError):
        return InputRejected(item, "out_of_memory", _detail(exc))
    # the row keeps the message; -vv shows where it came from (the rehearsal found 135
    # components rejected with only "index 80 is out of bounds" to go on)
    log.debug("%s: item_failed", item, exc_info=exc)
    return InputRejected(item, "item_failed", _detail(exc))


def stage_failure(exc: Exception, where: str) -> MadbenchError:
    """What a shard or merge that failed as a whole raises: ``exc`` if it is already a
    madbench error, else a missing environment, a full disk, or :class:`StageFailed`."""
    if isinstance(exc, MadbenchError):
        return exc
    found: MadbenchError | None = (environment_cause(exc) or _no_space(exc)
                                   or _raw_store_fault(exc))
    if found is not None:
        return found
    log.debug("%s failed", where, exc_info=exc)
    return StageFailed(f"{where} failed: {_detail(exc)} (a fault of the whole shard, not of "
                       "one item; run with -vv for the traceback)")


def _zero(hint: Any) -> Any:
    """The empty value of a manifest column type (``None`` for optional columns)."""
    text = str(hint)
    if "None" in text or "Optional" in text:
        return None
    for kind, value in ((bool, False), (int, 0), (float, 0.0), (str, "")):
        if hint is kind or text == kind.__name__:
            return value
    return ()


def blank_row(row_type: type[ROW], ids: dict[str, Any], exc: InputRejected) -> ROW:
    """A quarantine row of ``row_type``: ``ids`` set, other required columns empty."""
    hints = compat.type_hints(row_type)
    required = (dataclasses.MISSING, getattr(compat, "_REQUIRED", dataclasses.MISSING))
    values = {f.name: _zero(hints[f.name]) for f in dataclasses.fields(row_type)
              if any(f.default is r for r in required)
              and f.default_factory is dataclasses.MISSING and f.name not in ids}
    return row_type(**values, **ids, status="rejected", reason=exc.reason, detail=str(exc))
