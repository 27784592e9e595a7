"""Exception types; each carries enough context to name the file and the reason.

Every error has an :attr:`MadbenchError.exit_code` that the CLI returns: ``3`` for a
deterministic problem (bad input or configuration: retrying cannot help, and Argo's
retry expression skips it), ``75`` (``EX_TEMPFAIL``) for a transient one (the store is
unreachable, the disk is full, another runner holds the run): a retry may succeed.
"""

from __future__ import annotations

__all__ = [
    "EXIT_DETERMINISTIC",
    "EXIT_TRANSIENT",
    "ChecksumError",
    "ConfigError",
    "EnvironmentMissing",
    "InputRejected",
    "MadbenchError",
    "ManifestError",
    "RunLocked",
    "StoreKeyError",
    "StoreUnavailable",
    "StoreWriteError",
    "TransientError",
]

EXIT_DETERMINISTIC = 3
"""Bad input or configuration: retrying cannot help (Argo does not retry it)."""
EXIT_TRANSIENT = 75
"""A temporary failure (sysexits ``EX_TEMPFAIL``): Argo retries it with backoff."""


class MadbenchError(Exception):
    """Base class for every error raised by madbench_common."""

    exit_code = EXIT_DETERMINISTIC


class ConfigError(MadbenchError):
    """A configuration value or CLI argument is invalid."""


class EnvironmentMissing(ConfigError):
    """A tool, model or weight the stage needs is not installed: a configuration error.

    Never turned into a rejected row: a stage that cannot run must fail (exit 3)
    rather than "succeed" with every item quarantined.
    """


class StoreKeyError(MadbenchError):
    """An object key is malformed or escapes its run prefix."""


class ChecksumError(MadbenchError):
    """Bytes read back from the store do not match their recorded sha256.

    ``key`` is the store-relative key of the damaged object, so the runner can find
    the shard that wrote it and recompute that shard.
    """

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key

    def __reduce__(self) -> tuple[type[ChecksumError], tuple[str, str]]:
        return (type(self), (str(self), self.key))


class ManifestError(MadbenchError):
    """A manifest is missing, of the wrong schema, or has the wrong columns."""


class TransientError(MadbenchError):
    """A failure that a later retry may not meet."""

    exit_code = EXIT_TRANSIENT


class StoreUnavailable(TransientError):
    """The object store did not answer (after botocore's retries with backoff)."""


class StoreWriteError(TransientError):
    """A write failed (e.g. no space left); nothing was left under the final name."""


class RunLocked(TransientError):
    """Another runner holds the run's lease."""


class InputRejected(MadbenchError):
    """A source input cannot be used; ``reason`` is a short machine-readable code."""

    def __init__(self, path: str, reason: str, detail: str = "") -> None:
        self.path = path
        self.reason = reason
        self.detail = detail
        super().__init__(f"{path}: {reason}" + (f" ({detail})" if detail else ""))

    def __reduce__(self) -> tuple[type[InputRejected], tuple[str, str, str]]:
        return (type(self), (self.path, self.reason, self.detail))
