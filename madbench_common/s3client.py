"""The S3 client every store uses: adaptive retries with backoff, counted, and clear errors.

botocore retries throttling (``503 SlowDown``), transient 5xx replies and dropped
connections itself (``adaptive`` mode: exponential backoff with jitter plus a
client-side rate limiter). This module sets that up, counts every transient reply
botocore sees (:func:`retry_stats`, reported by ``madbench status``), and turns what
is left after the last attempt into :class:`~madbench_common.errors.StoreUnavailable`
(retryable, exit 75) or a deterministic error (exit 3) naming the object.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from madbench_common.errors import ConfigError, StoreUnavailable

__all__ = [
    "S3_MAX_ATTEMPTS",
    "call_s3",
    "is_not_found",
    "is_precondition_failed",
    "make_s3_client",
    "reset_retry_stats",
    "retries_since",
    "retry_stats",
]

T = TypeVar("T")
S3_MAX_ATTEMPTS = 10
"""Default attempts per request (``MADBENCH_S3_MAX_ATTEMPTS`` overrides): with botocore's
capped exponential backoff (≤ 20 s a wait) this rides out a server restart of ~1 min."""
_TRANSIENT_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
    "RequestTimeout", "RequestTimeoutException", "InternalError", "ServiceUnavailable",
    "TooManyRequestsException", "BadDigest",
})
_CONFIG_CODES = frozenset({"AccessDenied", "NoSuchBucket", "InvalidAccessKeyId",
                           "SignatureDoesNotMatch", "InvalidBucketName"})
_lock = threading.Lock()
_stats: Counter[str] = Counter()


def retry_stats() -> dict[str, int]:
    """Transient S3 replies seen by this process, by code (``total`` sums them)."""
    with _lock:
        return dict(_stats)


def retries_since(before: dict[str, int]) -> dict[str, int]:
    """Transient replies counted since the snapshot ``before`` (a :func:`retry_stats`)."""
    now = retry_stats()
    return {k: v - before.get(k, 0) for k, v in now.items() if v > before.get(k, 0)}


def reset_retry_stats() -> None:
    with _lock:
        _stats.clear()


def _reason(response: Any, caught: Exception | None) -> str:
    """The transient cause of one attempt, or ``""`` when it succeeded or is final."""
    if caught is not None:
        return type(caught).__name__
    if not response:
        return ""
    http, parsed = response
    status = int(getattr(http, "status_code", 0) or 0)
    code = str((parsed or {}).get("Error", {}).get("Code", ""))
    if code in _TRANSIENT_CODES:
        return code
    if status >= 500 or status == 429:
        return code or str(status)
    return ""


def _count_transient(**kwargs: Any) -> None:
    """``needs-retry`` hook: tally transient replies; returns None so botocore decides."""
    reason = _reason(kwargs.get("response"), kwargs.get("caught_exception"))
    if reason:
        with _lock:
            _stats[reason] += 1
            _stats["total"] += 1


def max_attempts() -> int:
    raw = os.environ.get("MADBENCH_S3_MAX_ATTEMPTS", str(S3_MAX_ATTEMPTS))
    try:
        return max(1, int(raw))
    except ValueError:
        raise ConfigError(f"MADBENCH_S3_MAX_ATTEMPTS={raw!r} is not an integer") from None


def make_s3_client() -> Any:
    """A boto3 S3 client from the standard AWS environment, with counted adaptive retries."""
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": max_attempts(), "mode": "adaptive"},
        connect_timeout=float(os.environ.get("MADBENCH_S3_CONNECT_TIMEOUT", "5")),
        read_timeout=float(os.environ.get("MADBENCH_S3_READ_TIMEOUT", "60")),
        s3={"addressing_style": os.environ.get("MADBENCH_S3_ADDRESSING", "path")},
    )
    client = boto3.session.Session().client("s3", config=config)
    client.meta.events.register("needs-retry.s3", _count_transient)
    return client


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def is_not_found(exc: Exception) -> bool:
    return _code(exc) in ("404", "NoSuchKey", "NotFound")


def is_precondition_failed(exc: Exception) -> bool:
    return _code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict")


def call_s3(client: Any, where: str, fn: Callable[..., T], **kwargs: Any) -> T:
    """``fn(**kwargs)``; failures left after botocore's retries become madbench errors.

    Not-found and precondition replies are re-raised unchanged for the caller.
    """
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        NoCredentialsError,
        ParamValidationError,
    )

    try:
        return fn(**kwargs)
    except ClientError as exc:
        if is_not_found(exc) or is_precondition_failed(exc):
            raise
        code, endpoint = _code(exc), client.meta.endpoint_url
        if code in _CONFIG_CODES:
            raise ConfigError(f"{where}: S3 refused ({code}) at {endpoint}: {exc}") from None
        raise StoreUnavailable(f"{where}: S3 at {endpoint} failed after {max_attempts()} "
                               f"attempts ({code or 'error'}): {exc}") from None
    except (NoCredentialsError, ParamValidationError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except BotoCoreError as exc:
        raise StoreUnavailable(f"{where}: S3 at {client.meta.endpoint_url} unreachable after "
                               f"{max_attempts()} attempts: {exc}") from None
