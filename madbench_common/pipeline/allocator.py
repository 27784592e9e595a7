"""glibc's allocator kept from handing tensor buffers back to the kernel after every op.

glibc serves an allocation above its mmap threshold (dynamic, at most 32 MiB) with a
fresh ``mmap`` and returns it with ``munmap`` when freed, and it trims the heap's free
top back to the kernel. A CPU forward allocates and frees the same large activations
again and again, so every op pays the kernel to map and zero new pages.
:func:`tune_malloc` keeps that memory in the process where no GPU is seen (:func:`wanted`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from pathlib import Path

from madbench_common.core.errors import ConfigError

__all__ = ["MALLOC_ENV", "TRIM_THRESHOLD", "gpu_visible", "tune_malloc", "wanted"]

log = logging.getLogger(__name__)

MALLOC_ENV = "MADBENCH_MALLOC"
TRIM_THRESHOLD = 1 << 30
"""Free heap top a process keeps (bytes); above it glibc returns memory as usual."""

# <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4

_applied: bool | None = None


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc only: musl has no such symbol)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def gpu_visible(dev: Path = Path("/dev")) -> bool:
    """Whether this process sees a GPU: an NVIDIA (``nvidia<N>``) or AMD (``kfd``) device
    node, as the device plugins mount them into a pod."""
    return (dev / "kfd").exists() or any(p.name[6:].isdigit() for p in dev.glob("nvidia*"))


def wanted() -> bool:
    """Whether :func:`tune_malloc` tunes here (``MADBENCH_MALLOC``).

    The default, ``auto``, tunes only a process that sees no GPU (no ``/dev/nvidia<N>`` or
    ``/dev/kfd``): on a GPU node the activations live on the device, and the host heap
    mostly holds weights on their way there, which should go back to the kernel.
    ``retain`` tunes always, ``default`` never (glibc's own settings).

    Raises :class:`ConfigError` for a value other than ``auto``, ``retain`` or ``default``.
    """
    mode = os.environ.get(MALLOC_ENV, "auto").strip().lower() or "auto"
    if mode not in ("auto", "retain", "default"):
        raise ConfigError(f"{MALLOC_ENV}={mode!r}: expected 'auto' (the default: tuned when "
                          "no GPU is visible), 'retain' (always) or 'default' (glibc's own "
                          "settings)")
    return mode == "retain" or (mode == "auto" and not gpu_visible())


def tune_malloc() -> bool:
    """Apply the settings above to this process (once) where :func:`wanted`; ``True`` when
    they are in force. Every shard calls it before it loads a model.

    With ``mallopt``: ``M_MMAP_MAX = 0`` (large blocks come from the heap, so a freed one is
    reused) and ``M_TRIM_THRESHOLD = 1 GiB`` (up to 1 GiB of free heap top stays with the
    process; more is still returned, so a pod's memory does not stay at a one-off peak).
    This is the ``mallopt`` form of PyTorch's CPU performance advice (a caching allocator
    such as jemalloc or tcmalloc) that needs no extra library in any image. It changes no
    result, only where freed memory goes. Measured on this project's CPU runs: an IndexTTS2
    shard spent a third of its CPU time in the kernel (about 250,000 minor page faults a
    second, nearly all in ``index_select``'s output copy), and a small conv net over 8
    video frames spent 0.62 s of system time per 6 forwards with glibc's settings and 0.02
    s with these. The cost is memory: model shards' peak RSS rose by 0-70 % (IndexTTS2 3.8
    -> 4.9 GB, FoleyCrafter 2.7 -> 4.6 GB, all far under their templates' limits), while
    their pod seconds fell by a third on the scene, TTS and VC stages and not measurably
    on FoleyCrafter and AVH-Align. Outside glibc (musl, macOS) nothing is tuned.
    """
    global _applied
    if not wanted():
        return False
    if _applied is not None:
        return _applied
    libc = _glibc()
    if libc is None:
        _applied = False
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    _applied = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not _applied:
        log.warning("mallopt refused the allocator settings; glibc's defaults stay")
    return _applied
