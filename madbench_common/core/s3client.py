"""The S3 client every store uses: retries for a stated time, counted, and clear errors.

:func:`make_s3_client` builds a client with botocore's adaptive retries; :func:`call_s3`
rides out an outage of a stated length and turns what is left into a retryable or a
deterministic error. Every transient reply is counted (:func:`retry_stats`, reported by
``madbench status``). An endpoint URL is never shown with credentials in it
(:func:`redact_uri`).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from madbench_common.core.errors import ConfigError, MadbenchError, StoreUnavailable

__all__ = [
    "S3_MAX_ATTEMPTS",
    "S3_OUTAGE_SECONDS",
    "call_s3",
    "is_not_found",
    "is_precondition_failed",
    "make_s3_client",
    "outage_seconds",
    "redact_uri",
    "reset_retry_stats",
    "retries_since",
    "retry_stats",
    "store_failure",
]

T = TypeVar("T")
S3_MAX_ATTEMPTS = 4
"""botocore's attempts per round (``MADBENCH_S3_MAX_ATTEMPTS`` overrides): a round of
a few seconds; how long a request is retried is :data:`S3_OUTAGE_SECONDS`."""
S3_OUTAGE_SECONDS = 120.0
"""Seconds a request is retried through an outage (``MADBENCH_S3_OUTAGE_SECONDS``)."""
_MAX_WAIT = 10.0
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s'\"]*@")
_TRANSIENT_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
    "RequestTimeout", "RequestTimeoutException", "InternalError", "ServiceUnavailable",
    "TooManyRequestsException", "BadDigest",
})
_CONFIG_CODES = frozenset({"AccessDenied", "NoSuchBucket", "InvalidAccessKeyId",
                           "SignatureDoesNotMatch", "InvalidBucketName"})
_TRANSIENT_4XX = frozenset({"408", "429", "OperationAborted"})
"""4xx replies a retry can cure: a request timeout, too many requests, a conflicting
operation still in progress. Every other 4xx (a ``403`` with no body, as HEAD replies
carry, included) is a refusal: retrying it only delays the same answer."""
_NETWORK_ERRORS = (ConnectionResetError, ConnectionAbortedError, ConnectionRefusedError,
                   TimeoutError)
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


def outage_seconds() -> float:
    """How long one request is retried through an outage (``MADBENCH_S3_OUTAGE_SECONDS``)."""
    raw = os.environ.get("MADBENCH_S3_OUTAGE_SECONDS", str(S3_OUTAGE_SECONDS))
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigError(f"MADBENCH_S3_OUTAGE_SECONDS={raw!r}: expected seconds >= 0")
    return value


def redact_uri(text: str) -> str:
    """``text`` with the ``user:password@`` part of every URI in it replaced by ``***@``."""
    return _USERINFO.sub(r"\1***@", text)


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
    """``fn(**kwargs)``, retried through an outage of up to :func:`outage_seconds`;
    failures left after that become madbench errors.

    botocore retries throttling (``503 SlowDown``), transient 5xx replies and dropped
    connections itself (``adaptive`` mode, :data:`S3_MAX_ATTEMPTS` attempts). Around that,
    a request whose attempts all failed transiently is retried until
    :data:`S3_OUTAGE_SECONDS` (120 s) have passed since it was first tried, waiting 1, 2,
    4 … 10 s between rounds: the outage a run rides out, stated in time, whatever the
    machine's load. What is left becomes
    :class:`~madbench_common.core.errors.StoreUnavailable` (retryable, exit 75: Argo
    retries the step), and a refusal a retry cannot cure (no such bucket, access denied,
    bad credentials) a deterministic error (exit 3) naming the object.

    Not-found and precondition replies are re-raised unchanged for the caller.
    """
    start, wait, rounds = time.monotonic(), 1.0, 0
    window = outage_seconds()
    while True:
        try:
            return _call_once(client, where, fn, **kwargs)
        except StoreUnavailable as exc:
            rounds += 1
            left = start + window - time.monotonic()
            if left <= 0:
                spent = time.monotonic() - start
                raise StoreUnavailable(
                    f"{exc} — still failing after {spent:.0f} s and {rounds} round(s) of "
                    f"retries (a run rides out {window:g} s: MADBENCH_S3_OUTAGE_SECONDS)"
                ) from None
            time.sleep(min(wait, left))
            wait = min(wait * 2, _MAX_WAIT)


def _call_once(client: Any, where: str, fn: Callable[..., T], **kwargs: Any) -> T:
    """One round: ``fn(**kwargs)`` with botocore's own retries."""
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
        raise _client_error(exc, where, str(client.meta.endpoint_url)) from None
    except (NoCredentialsError, ParamValidationError) as exc:
        raise ConfigError(f"{where}: {redact_uri(str(exc))}") from None
    except (BotoCoreError, *_NETWORK_ERRORS) as exc:
        raise _unreachable(exc, where, str(client.meta.endpoint_url)) from None
    except Exception as exc:
        if _is_urllib3(exc):  # a reply body broken off below botocore's wrappers
            raise _unreachable(exc, where, str(client.meta.endpoint_url)) from None
        raise


def _is_transient_reply(exc: Exception) -> bool:
    code = _code(exc)
    status = int((getattr(exc, "response", None) or {}).get("ResponseMetadata", {})
                 .get("HTTPStatusCode", 0) or 0)
    return (code in _TRANSIENT_CODES or code in _TRANSIENT_4XX or status >= 500
            or str(status) in _TRANSIENT_4XX or (code.isdigit() and int(code) >= 500))


def _client_error(exc: Exception, where: str, endpoint: str) -> MadbenchError:
    """An S3 error reply as a madbench error: transient (exit 75) when a retry can cure it
    (throttling, 5xx, a request timeout), else a refusal (exit 3) naming the code."""
    code, endpoint = _code(exc), redact_uri(endpoint)
    if _is_transient_reply(exc):
        return StoreUnavailable(f"{where}: S3 at {endpoint} failed ({code or 'error'}): "
                                f"{redact_uri(str(exc))}")
    what = "AccessDenied" if code == "403" else code or "error"
    return ConfigError(f"{where}: S3 refused ({what}) at {endpoint}: {redact_uri(str(exc))}")


def _unreachable(exc: BaseException, where: str, endpoint: str) -> StoreUnavailable:
    return StoreUnavailable(f"{where}: S3 at {redact_uri(endpoint)} unreachable: "
                            f"{redact_uri(str(exc) or type(exc).__name__)}")


def _is_urllib3(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("urllib3")


def store_failure(exc: BaseException, sockets: bool = True) -> MadbenchError | None:
    """A store fault that reached a worker or the CLI as a raw exception (not through
    :func:`call_s3`: a boto3 call made elsewhere, a socket reset while a body streams) as a
    madbench error: :class:`StoreUnavailable` (exit 75) for a dropped or refused
    connection, a timeout, throttling or a 5xx reply; a :class:`ConfigError` (exit 3) for
    any other S3 error reply (access denied, no such bucket). ``None``: not a store fault.
    The chain (``__cause__`` / ``__context__``) is searched, a few links deep; a plain
    socket error (a reset, a refused connection, a timeout) counts only with ``sockets``
    (an item's own decoder or model may raise those too)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None or isinstance(seen, MadbenchError):
            return seen
        found = _store_fault(seen, sockets)
        if found is not None:
            return found
        seen = seen.__cause__ or seen.__context__
    return None


def _store_fault(exc: BaseException, sockets: bool) -> MadbenchError | None:
    module = type(exc).__module__
    if module.startswith("botocore"):
        from botocore.exceptions import ClientError, NoCredentialsError, ParamValidationError

        if isinstance(exc, ClientError):
            return _client_error(exc, "S3", os.environ.get("AWS_ENDPOINT_URL", "the endpoint"))
        if isinstance(exc, (NoCredentialsError, ParamValidationError)):
            return ConfigError(f"S3: {redact_uri(str(exc))}")
        return _unreachable(exc, "S3", "the endpoint")
    if _is_urllib3(exc) or (sockets and isinstance(exc, _NETWORK_ERRORS)):
        return _unreachable(exc, "S3", "the endpoint")
    return None
