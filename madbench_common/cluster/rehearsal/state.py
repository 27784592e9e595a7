"""``<work>/state.json``: what the passes in a work folder built, weighted and ran, written
atomically at every change, and the parts (one run of ``make rehearsal`` each) of the pass
under way, so that a killed pass resumes and its record adds up every part."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class State:
    """``<work>/state.json``: images built and weighted, pods done; written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.data: dict[str, Any] = {"images": {}, "memo": {}, "passes": []}
        if path.exists():
            self.data.update(json.loads(path.read_text()))
        self._part: dict[str, Any] | None = None
        self._part_t0 = 0.0

    def begin_part(self) -> None:
        """One run of ``make rehearsal`` on this work folder: a part of a pass (a pass of
        hours runs in parts across sessions). Its wall time is brought up to date at every
        save, so a part killed outright (SIGKILL, the machine going away) still says how
        long it ran, up to its last save; its outcome then stays ``killed``."""
        with self.lock:
            self._part_t0 = time.monotonic()
            self._part = {"started_at": _utc_now(), "wall_s": 0, "outcome": "killed"}
            self.data["passes"].append(self._part)
            self.save()

    def end_part(self, outcome: str) -> None:
        """``complete``, ``incomplete``, ``interrupted`` or ``error``."""
        with self.lock:
            if self._part is None:
                return
            self._part.update(outcome=outcome, finished_at=_utc_now())
            self.save()
            self._part = None

    def pass_parts(self) -> list[dict[str, Any]]:
        """The parts of the latest pass: every part after the last complete one before it
        (a run after a complete pass starts a new pass; ``--fresh`` forgets them all)."""
        with self.lock:
            parts = self.data["passes"]
            start = max((i + 1 for i, p in enumerate(parts[:-1])
                         if p.get("outcome") == "complete"), default=0)
            return [dict(p) for p in parts[start:]]

    def save(self) -> None:
        with self.lock:
            if self._part is not None:
                self._part["wall_s"] = round(time.monotonic() - self._part_t0)
                self._part["saved_at"] = _utc_now()
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
            tmp.replace(self.path)

    def image(self, slug: str) -> dict[str, Any]:
        with self.lock:
            return dict(self.data["images"].get(slug, {}))

    def update_image(self, slug: str, **values: Any) -> None:
        with self.lock:
            self.data["images"].setdefault(slug, {}).update(values)
            self.save()
