"""The omni response cache: one stored reply per (model, image, prompt, inputs, mode, pairing).

A response is what an :class:`~madbench_common.models.roles.OmniModel` returned for one
question on one input: the generated text, the option log-probs (with their token ids) and
the wall time of the call, keyed by :class:`ResponseKey`. A rerun, another run over the same
samples, or a new version of one prompt therefore calls the model only for what changed.
Parsing and scoring are recomputed from the stored reply, so a parser change needs no model
call at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from madbench_common.core.errors import ChecksumError
from madbench_common.core.store import Store
from madbench_common.models.roles import OmniAnswer, OptionLogprob

__all__ = ["CACHE_PREFIX", "ResponseCache", "ResponseKey", "choices_setting"]

log = logging.getLogger("madbench")
CACHE_PREFIX = "_cache/omni"
_FORMAT = 1


@dataclass(frozen=True)
class ResponseKey:
    """What determines an omni model's reply to one question on one input.

    Model slug and version, the image it ran in (its reference, with the digest where
    pinned), the question's prompt hash, the sha256 of every input (audio, video), the
    input mode and the pairing, the call settings (frame rate and size, token limit,
    scored choices), and the model's identity (adapter code, weights pins, loaded dtype,
    message layout)."""

    model: str
    model_version: str
    image: str
    prompt_hash: str
    inputs: tuple[str, ...]
    """sha256 of each input the model sees (audio, then video if any)."""
    mode: str
    pairing: str = "paired"
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Call settings that change the input or the reply (fps, frame size, token limit…)."""
    identity: str = ""
    """The loaded model's identity: adapter code, weights pins, loaded dtype and the full
    message layout with the system prompt (:func:`madbench_common.pipeline.identity.
    cache_identity`)."""

    def digest(self) -> str:
        blob = json.dumps({**asdict(self), "settings": dict(self.settings), "format": _FORMAT},
                          sort_keys=True, default=list)
        return hashlib.sha256(blob.encode()).hexdigest()


def _answer_json(key: ResponseKey, answer: OmniAnswer) -> bytes:
    record = {"key": {**asdict(key), "settings": dict(key.settings)}, "text": answer.text,
              "logits": answer.logits, "seconds": answer.seconds,
              "options": [[o.text, o.token_id, o.logprob] for o in answer.options]}
    return json.dumps(record, sort_keys=True, ensure_ascii=False, indent=1).encode()


def _answer_from(data: bytes) -> OmniAnswer:
    record = json.loads(data)
    options = tuple(OptionLogprob(str(t), int(i), float(lp)) for t, i, lp in record["options"])
    return OmniAnswer(str(record["text"]), options, str(record["logits"]),
                      float(record["seconds"]))


class ResponseCache:
    """Replies in a store, keyed by :class:`ResponseKey`; counts hits and misses.

    Stored as JSON under ``<store root>/_cache/omni/<slug>/<2 hex>/<key digest>.json``,
    outside any run."""

    def __init__(self, store: Store, prefix: str = CACHE_PREFIX) -> None:
        self.store = store
        self.prefix = prefix
        self.hits = 0
        self.misses = 0

    def key_path(self, key: ResponseKey) -> str:
        digest = key.digest()
        return f"{self.prefix}/{key.model}/{digest[:2]}/{digest}.json"

    def get(self, key: ResponseKey) -> OmniAnswer | None:
        path = self.key_path(key)
        if not self.store.exists(path):
            return None
        try:
            return _answer_from(self.store.get_bytes(path))
        except (ChecksumError, ValueError, KeyError, TypeError) as exc:
            log.warning("omni cache: %s is damaged (%s); asking the model again", path, exc)
            return None

    def put(self, key: ResponseKey, answer: OmniAnswer) -> None:
        self.store.put_bytes(self.key_path(key), _answer_json(key, answer))

    def fetch(self, key: ResponseKey, ask: Callable[[], OmniAnswer]) -> tuple[OmniAnswer, bool]:
        """The cached reply, else ``ask()``'s (stored); and whether it came from the cache."""
        cached = self.get(key)
        if cached is not None:
            self.hits += 1
            return cached, True
        self.misses += 1
        answer = ask()
        self.put(key, answer)
        return answer, False


def choices_setting(choices: Sequence[str]) -> str:
    """A short, order-sensitive digest of the scored choices (for :attr:`ResponseKey.settings`)."""
    return hashlib.sha256("\x1f".join(choices).encode()).hexdigest()[:16]
