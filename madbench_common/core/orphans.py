"""No orphans: helper processes (shard workers, the decoder server) die with their parent.

Killing only the runner's PID (``kill -9 <pid>``, an OOM kill, a crashed
interpreter) must not leave its shard workers writing to the store after its lease
is gone, nor decoders burning CPU. On Linux each helper asks the kernel for
``SIGKILL`` when its parent dies (``prctl(PR_SET_PDEATHSIG)``) and then checks that
the parent had not died already; elsewhere this is a no-op (the process group, as
the fault suite kills it, still ends them all).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(expected_parent: int | None = None) -> bool:
    """Arrange ``SIGKILL`` for this process when its parent exits; ``False`` where the
    platform cannot. ``expected_parent``: the parent's pid as the caller knew it (if it
    is gone already, this process exits at once)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)  # the parent died before the request took effect
    return True
