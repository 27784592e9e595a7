"""The run lock: one runner per run id, held as a lease object that outlives a crash.

``<run>/_LOCK`` is created with a conditional write (S3 ``If-None-Match: *``; an
``flock``-guarded create on the file system) and holds who owns it and until when; renewal,
takeover of an expired lease and loss are on :class:`RunLease`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from madbench_common.core.errors import RunLocked
from madbench_common.core.store import RunStore

__all__ = ["LEASE_SECONDS", "LOCK_KEY", "RunLease"]

log = logging.getLogger("madbench")
LOCK_KEY = "_LOCK"
LEASE_SECONDS = 60.0
"""Default lease; ``MADBENCH_LEASE_SECONDS`` overrides (tests use a few seconds)."""


@dataclass
class _Holder:
    owner: str
    host: str
    pid: int
    renewed: float
    lease: float

    @property
    def expires(self) -> float:
        return self.renewed + self.lease

    @property
    def crashed(self) -> bool:
        """Its process is gone from this very host (no need to wait for the lease)."""
        if self.host != socket.gethostname() or self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def describe(self) -> str:
        left = self.expires - time.time()
        state = f"expires in {left:.0f}s" if left > 0 else f"expired {-left:.0f}s ago"
        return f"{self.host} pid {self.pid} (lease {state})"


class RunLease:
    """Hold ``<run>/_LOCK`` for the life of a ``with`` block.

    A heartbeat thread renews the lease every third of its length with ``If-Match`` on the
    version it wrote. A second runner sees a live lease and fails fast with a message
    naming the holder, or waits up to ``wait`` seconds. A crashed runner's lease expires
    (at once when the holder ran on this host and its process is gone); the next runner
    takes it over with ``If-Match`` on the stale version, so two runners racing for it
    cannot both win. A holder whose renewal fails (its lease was taken over after it
    stalled) marks itself lost, and :meth:`check`, called before every merge, stops it
    before it writes another marker. Expiry compares the holder's wall clock with the
    reader's: hosts must keep time (NTP); the default lease (60 s) leaves a wide margin.
    """

    def __init__(self, run: RunStore, wait: float = 0.0, lease: float | None = None) -> None:
        self.run = run
        self.wait = wait
        self.lease = lease or float(os.environ.get("MADBENCH_LEASE_SECONDS", LEASE_SECONDS))
        self.owner = uuid.uuid4().hex
        self.token: str | None = None
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _payload(self) -> bytes:
        return json.dumps({"owner": self.owner, "host": socket.gethostname(),
                           "pid": os.getpid(), "renewed": time.time(),
                           "lease": self.lease}).encode()

    def _holder(self) -> tuple[_Holder, str] | None:
        got = self.run.read_versioned(LOCK_KEY)
        if got is None:
            return None
        data, token = got
        try:
            raw: dict[str, Any] = json.loads(data)
            holder = _Holder(str(raw["owner"]), str(raw["host"]), int(raw["pid"]),
                             float(raw["renewed"]), float(raw["lease"]))
        except (ValueError, KeyError, TypeError):
            holder = _Holder("?", "unknown", 0, 0.0, 0.0)  # damaged lock: treat as expired
        return holder, token

    def _try_acquire(self) -> _Holder | None:
        """Take the lock if free or expired; otherwise return its live holder."""
        self.token = self.run.put_if_absent(LOCK_KEY, self._payload())
        if self.token is not None:
            return None
        current = self._holder()
        if current is None:
            return self._try_acquire()
        holder, token = current
        if holder.owner == self.owner:  # our create landed but its reply was lost
            self.token = token
            return None
        if holder.expires > time.time() and not holder.crashed:
            return holder
        self.token = self.run.put_if_match(LOCK_KEY, self._payload(), token)
        if self.token is None:
            return self._holder_or_retry()
        log.warning("run %s: took over the lease of %s, %s", self.run.run_id,
                    holder.describe(), "which crashed" if holder.crashed else "now expired")
        return None

    def _holder_or_retry(self) -> _Holder | None:
        current = self._holder()
        return current[0] if current else self._try_acquire()

    def acquire(self) -> RunLease:
        deadline = time.monotonic() + self.wait
        while True:
            holder = self._try_acquire()
            if holder is None:
                break
            if time.monotonic() >= deadline:
                raise RunLocked(
                    f"run {self.run.run_id!r} is locked by another runner on "
                    f"{holder.describe()}; {self.run.uri(LOCK_KEY)} holds the lease. Wait "
                    "for it (--lock-wait SECONDS), or, if that runner is gone, let the "
                    "lease expire and rerun")
            time.sleep(min(0.25, max(0.05, deadline - time.monotonic())))
        self._thread = threading.Thread(target=self._heartbeat, name="madbench-lease",
                                        daemon=True)
        self._thread.start()
        return self

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.lease / 3):
            if self.token is None:
                return
            try:
                self.token = self._renew(self.token)
            except Exception as exc:  # store hiccup: the next beat tries again
                log.warning("run %s: lease renewal failed: %s", self.run.run_id, exc)
                continue
            if self.token is None:
                self.lost = True
                log.error("run %s: the lease was taken over by another runner",
                          self.run.run_id)
                return

    def _renew(self, token: str) -> str | None:
        new = self.run.put_if_match(LOCK_KEY, self._payload(), token)
        if new is None:  # a retried renewal whose first try landed is still ours
            current = self._holder()
            if current is not None and current[0].owner == self.owner:
                return current[1]
        return new

    def check(self) -> None:
        """Raise :class:`RunLocked` if this runner lost its lease."""
        if self.lost:
            raise RunLocked(f"run {self.run.run_id!r}: this runner's lease was taken over by "
                            "another runner; stopping before writing anything more")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.token is not None and not self.lost:
            try:
                self.run.delete_if_match(LOCK_KEY, self.token)
            except Exception as exc:  # the lease expires by itself
                log.warning("run %s: lease not released (%s); it expires in %.0fs",
                            self.run.run_id, exc, self.lease)
        self.token = None

    def __enter__(self) -> RunLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
