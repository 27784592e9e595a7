"""Peak resident memory of the work done in this process, per shard or merge.

On Linux the kernel's high-water mark (``VmHWM``) is reset before the work by
writing ``5`` to ``/proc/self/clear_refs``, so a long-lived worker process reports
each shard's own peak (plus whatever it had imported already: an over- rather than
an under-estimate of a fresh pod). Elsewhere ``ru_maxrss`` (lifetime peak) is used.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

__all__ = ["peak_rss_bytes", "reset_peak_rss"]

_PROC = Path("/proc/self")


def reset_peak_rss() -> bool:
    """Reset the peak-RSS counter; ``False`` where the platform cannot."""
    try:
        (_PROC / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int:
    """Peak RSS since the last :func:`reset_peak_rss` (or since the process started)."""
    try:
        for line in (_PROC / "status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale
