"""Math-library threads, pinned: results that do not depend on worker or CPU counts.

torch, BLAS and OpenMP split reductions by thread count, so the low-order bits of a
result (split's speaker embeddings, for one) change with it. Every shard therefore
runs with the same count, :func:`math_threads` (``MADBENCH_MATH_THREADS``, default 1:
parallelism comes from shards and ``--workers``), whatever ``--workers``, the shard
count or the CPU count; a count other than 1 is part of every stage's fingerprint
(:func:`~madbench_common.pipeline.stage.fingerprint`).
"""

from __future__ import annotations

import os
import sys

from madbench_common.core.errors import ConfigError

__all__ = ["math_threads", "pin_threads"]

_THREADS_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def math_threads() -> int:
    """Threads every shard gives its math libraries: ``MADBENCH_MATH_THREADS``, default 1."""
    raw = os.environ.get("MADBENCH_MATH_THREADS", "1")
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"MADBENCH_MATH_THREADS={raw!r}: expected a whole number >= 1")
    return value


def pin_threads(threads: int | None = None) -> int:
    """Pin torch, BLAS and OpenMP to ``threads`` (default :func:`math_threads`), here and in
    every library loaded later, so results never depend on worker or CPU counts."""
    n = threads or math_threads()
    for var in _THREADS_ENV:
        os.environ[var] = str(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(n)  # libraries already loaded (numpy's BLAS, OpenMP runtimes)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    return n
