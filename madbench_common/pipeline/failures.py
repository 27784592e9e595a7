"""Which failures quarantine one row and which fail the whole stage (one rule, every stage).

A stage runs item by item; what goes wrong on one item must not take the others with
it. :func:`row_failure` sorts an exception raised on one item (the whole stage fails, or
that row alone is quarantined with a reason code); rejections for a fault reason
(:data:`FAULT_REASONS`) count against the stage's budget, and stage code that catches its
model call's exceptions sorts them with :func:`model_rejection`. :func:`stage_failure`
turns what escapes a whole shard or merge into a one-line error naming stage, shard and
cause (the traceback goes to the debug log).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import errno
import logging
import re
import sys
from collections.abc import Iterator, Mapping
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

__all__ = ["BUDGET_PARAM", "DEFAULT_MAX_FAILED_FRACTION", "FAULT_REASONS", "BatchOutOfMemory",
           "StageFailed", "blank_row", "environment_cause", "free_gpu_memory", "is_fault",
           "is_gpu_oom", "model_rejection", "oom_retry", "row_failure", "stage_failure"]

log = logging.getLogger("madbench")
ROW = TypeVar("ROW", bound=ManifestRow)
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_DETAIL_CHARS = 500


BUDGET_PARAM = "max_failed_fraction"
"""The stage parameter bounding the share of its rows rejected for a fault reason; every
stage takes it (``--set STAGE.max_failed_fraction=0.2``, Argo ``-p stage_params=...``) and
it is not part of the fingerprint (it decides pass or fail, never what a row holds)."""
DEFAULT_MAX_FAILED_FRACTION = 0.05

FAULT_REASONS: Mapping[str, str] = {
    "item_failed": "stage or model code raised on one item (an exception outside the "
                   "data-error set)",
    "generation_error": "a generator raised an exception outside the data-error set",
    "inference_error": "a model answering raised an exception outside the data-error set",
    "device_error": "a CUDA, device or dtype error",
    "gpu_out_of_memory": "GPU out of memory on one item (a batched stage retried at half "
                         "the batch first)",
    "out_of_memory": "host memory exhausted",
    "api_error": "an API call failed (network, quota, server)",
}
"""Reasons that count against a stage's rejection budget, with what each means. Every
other reason code (``too_long``, ``speaker_changed``, ``decode_crashed``, …) names
something about the input data, what a benchmark's filters are for, and never counts.
Each stage has a budget for faults (:data:`BUDGET_PARAM`, default
:data:`DEFAULT_MAX_FAILED_FRACTION` of its rows) and the merge fails with exit 3 over it
(:func:`~madbench_common.pipeline.stage.check_budget`), so a GPU-only bug that breaks most
rows cannot pass as a green run with a thin benchmark."""

# A RuntimeError whose message names the accelerator, a device mismatch or a dtype
# mismatch: torch's wording for CUDA, cuDNN, cuBLAS, NCCL errors, device-side asserts,
# tensors on different devices, and half/bfloat16 versus float kernels.
_DEVICE_ERROR = re.compile(
    r"CUDA|cuDNN|CUDNN|cuBLAS|CUBLAS|NCCL|device-side assert|same device|expected device|"
    r"dtype|scalar type|Input type .* (?:weight|bias) type|"
    r"not implemented for '(?:Half|BFloat16)'")

_OOM_RETRY: contextvars.ContextVar[bool] = contextvars.ContextVar("oom_retry", default=False)


class StageFailed(MadbenchError):
    """Stage code failed on a whole shard or merge (not on one item): deterministic, exit 3."""


class BatchOutOfMemory(Exception):
    """GPU out of memory inside a batched shard: the shard loop retries at half the batch
    (:func:`oom_retry`); never a row, never seen outside the loop."""

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(_detail(cause))


def is_fault(reason: str) -> bool:
    """Whether a rejection ``reason`` counts against the stage's budget (not about data)."""
    return reason in FAULT_REASONS


def is_gpu_oom(exc: BaseException) -> bool:
    """A CUDA out-of-memory error (torch's ``OutOfMemoryError``, or an adapter's wrapper
    of one that says so with ``gpu_out_of_memory = True``), without importing torch."""
    if getattr(exc, "gpu_out_of_memory", False):
        return True
    return any(k.__name__ == "OutOfMemoryError" and k.__module__.startswith("torch")
               for k in type(exc).__mro__) or str(exc).startswith("CUDA out of memory")


def _device_error(exc: BaseException) -> bool:
    return (isinstance(exc, RuntimeError) and not getattr(exc, "data_error", False)
            and _DEVICE_ERROR.search(str(exc)) is not None)


@contextlib.contextmanager
def oom_retry(enabled: bool) -> Iterator[None]:
    """While ``enabled`` (a batched shard of several items), a GPU out of memory raises
    :class:`BatchOutOfMemory` from :func:`row_failure` instead of rejecting the row."""
    token = _OOM_RETRY.set(enabled)
    try:
        yield
    finally:
        _OOM_RETRY.reset(token)


def free_gpu_memory() -> None:
    """Release torch's cached GPU blocks before a retry (nothing when torch is not loaded)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def model_rejection(exc: BaseException, item: str, data_reason: str,
                    fault_reason: str = "generation_error",
                    data_errors: tuple[type[BaseException], ...] = ()) -> InputRejected:
    """The rejection of ``item`` for ``exc`` raised by a model call that stage code caught.

    A data error (``ValueError``, :class:`InputRejected`, an exception that says
    ``data_error = True`` such as an adapter's ``GenerationFailed`` for empty text or a
    too-short reference, or one of ``data_errors``) gets ``data_reason``; a CUDA, device
    or dtype ``RuntimeError`` gets ``device_error``; anything else ``fault_reason``. A GPU
    out of memory is raised again, so the shard loop can retry at half the batch and
    :func:`row_failure` count it."""
    if is_gpu_oom(exc):
        raise exc
    detail = _detail(exc)
    if _device_error(exc):
        return InputRejected(item, "device_error", detail)
    if isinstance(exc, InputRejected):
        return InputRejected(item, data_reason, f"{exc.reason}: {exc.detail}"
                             if exc.detail else exc.reason)
    data = getattr(exc, "data_error", None)
    if data is True or (data is None and isinstance(exc, (ValueError, *data_errors))):
        return InputRejected(item, data_reason, detail)
    return InputRejected(item, fault_reason, detail)


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
    must fail.

    The whole stage (raised again, the CLI exits with its code): a missing tool, module,
    model or weight (:class:`EnvironmentMissing`, any ``ImportError``, or a read-only file
    system where the stage must write: exit 3); any other configuration error, a damaged
    upstream object or manifest (exit 3; the runner recomputes what wrote a damaged
    object); transient trouble (the store unreachable, the run locked, a raw store fault
    such as a connection reset or a 5xx reply that reached stage code:
    :func:`~madbench_common.core.s3client.store_failure`) and a full disk (``ENOSPC``,
    ``EDQUOT``, ``EFBIG``: exit 75); a store's refusal (access denied, no such bucket:
    exit 3).

    That row only (an :class:`InputRejected` with a reason code; the row is quarantined
    and the run goes on): everything else: bad input (:class:`InputRejected` with its own
    reason), a name the store refuses (``bad_name``), an ``OSError`` on the item's file
    (``io_error``, e.g. a file name too long), undecodable text (``bad_encoding``), memory
    exhausted by the item (``out_of_memory``), a GPU out of memory (``gpu_out_of_memory``,
    after a batched stage retried the batch at half its size down to one item), a CUDA,
    device or dtype error (``device_error``), or any other exception of stage or model
    code on that item (``item_failed``: the message names the exception).
    """
    missing = environment_cause(exc)
    if missing is not None:
        raise missing from None
    full = _no_space(exc)
    if full is not None:
        raise full from None
    if isinstance(exc, BatchOutOfMemory):
        raise exc
    if isinstance(exc, InputRejected):
        return exc
    store = _raw_store_fault(exc, sockets=False)
    if store is not None:  # the store failed, not the item: never a quarantined row
        raise store from None
    if is_gpu_oom(exc):
        if _OOM_RETRY.get():
            raise BatchOutOfMemory(exc) from exc
        return InputRejected(item, "gpu_out_of_memory", _detail(exc))
    if _device_error(exc):
        log.debug("%s: device_error", item, exc_info=exc)
        return InputRejected(item, "device_error", _detail(exc))
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
    if getattr(exc, "data_error", False) is True:  # e.g. GenerationFailed("empty_text")
        return InputRejected(item, "generation_failed", _detail(exc))
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
