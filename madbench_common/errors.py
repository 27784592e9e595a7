"""Exception types; each carries enough context to name the file and the reason."""

from __future__ import annotations

__all__ = [
    "ChecksumError",
    "ConfigError",
    "InputRejected",
    "MadbenchError",
    "ManifestError",
    "StoreKeyError",
]


class MadbenchError(Exception):
    """Base class for every error raised by madbench_common."""


class ConfigError(MadbenchError):
    """A configuration value or CLI argument is invalid."""


class StoreKeyError(MadbenchError):
    """An object key is malformed or escapes its run prefix."""


class ChecksumError(MadbenchError):
    """Bytes read back from the store do not match their recorded sha256."""


class ManifestError(MadbenchError):
    """A manifest is missing, of the wrong schema, or has the wrong columns."""


class InputRejected(MadbenchError):
    """A source input cannot be used; ``reason`` is a short machine-readable code."""

    def __init__(self, path: str, reason: str, detail: str = "") -> None:
        self.path = path
        self.reason = reason
        self.detail = detail
        super().__init__(f"{path}: {reason}" + (f" ({detail})" if detail else ""))
