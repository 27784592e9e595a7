"""A cache of LLM-judge verdicts, shared across runs in the store.

Model answers go through the omni response cache (:mod:`madbench_common.models.answer_cache`);
verdicts, which are not model answers, come here: small JSON objects under
``_cache/deaf/<kind>/<hh>/<sha256>.json`` at the store's root (beside the runs), keyed
by the sha256 of the judge model, the judge prompt's version and the rendered messages.
A rerun, or a new answer version, pays only for what changed. ``cache=off`` disables it;
``cache=<store URI>`` moves it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from madbench_common.core.store import Store, open_store

__all__ = ["ResponseCache", "cache_key", "open_cache"]


def cache_key(**parts: Any) -> str:
    """sha256 of the canonical JSON of ``parts``."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """Get/put JSON values by (kind, key) in a store."""

    def __init__(self, store: Store, prefix: str = "_cache/deaf") -> None:
        self.store, self.prefix = store, prefix
        self.hits = self.misses = 0

    def _key(self, kind: str, key: str) -> str:
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in kind)
        return f"{self.prefix}/{safe}/{key[:2]}/{key}.json"

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        path = self._key(kind, key)
        if not self.store.exists(path):
            self.misses += 1
            return None
        self.hits += 1
        value: dict[str, Any] = json.loads(self.store.get_bytes(path))
        return value

    def put(self, kind: str, key: str, value: dict[str, Any]) -> None:
        self.store.put_bytes(self._key(kind, key), json.dumps(value, sort_keys=True).encode())


def open_cache(setting: str, run_store: Store) -> ResponseCache | None:
    """``""``: the run's store root; ``off``: no cache; otherwise a store URI."""
    if setting == "off":
        return None
    return ResponseCache(open_store(setting) if setting else run_store)
