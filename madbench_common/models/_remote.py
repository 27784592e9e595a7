"""Helpers for the remote-code omni adapters (MiniCPM-o 4.5, Baichuan-Omni-1.5).

:func:`first_step_logits` (option scores where a chat API returns text only),
:func:`one_second_chunks` (MiniCPM-o's omni layout), :func:`install_remote_shims` (the
``flash_attn`` and ``deepspeed`` imports of Baichuan-Omni's modules) and
:func:`writable_modules_cache` (where ``trust_remote_code`` copies the snapshot's code).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import tempfile
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["FirstLogits", "first_step_logits", "flash_attn_varlen_sdpa",
           "install_remote_shims", "one_second_chunks", "writable_modules_cache"]


@dataclass
class FirstLogits:
    """The last-position logits of a module's first forward call (``None`` until then)."""

    logits: Any = None
    calls: int = 0
    shapes: list[tuple[int, ...]] = field(default_factory=list)


def _logits_of(output: Any) -> Any:
    if hasattr(output, "logits"):
        return output.logits
    if isinstance(output, (tuple, list)) and output:
        return output[0]
    return output


@contextmanager
def first_step_logits(module: Any) -> Iterator[FirstLogits]:
    """Record ``module``'s first forward output logits at the last position.

    Where a model's chat API hides the logits (``chat()`` returns text only), a forward
    hook on its inner causal LM records the **first** forward call: the prefill over the
    whole prompt, whose last position is the answer position. The scores thus come from
    the very forward pass that produced the greedy answer, on the same inputs."""
    seen = FirstLogits()

    def hook(_mod: Any, _args: Any, output: Any) -> None:
        seen.calls += 1
        logits = _logits_of(output)
        seen.shapes.append(tuple(logits.shape))
        if seen.logits is None:
            seen.logits = logits[0, -1].detach().float().cpu()

    handle = module.register_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


def one_second_chunks(audio: np.ndarray, rate: int, frames: Sequence[Any] | None,
                      fps: float) -> list[tuple[Any, np.ndarray]]:
    """(frame, one second of audio) per second of audio: the frame nearest that second's
    start (the last frame when the video is shorter); no frames → ``(None, chunk)``."""
    n = max(1, int(np.ceil(len(audio) / rate)))
    out = []
    for i in range(n):
        chunk = np.asarray(audio[i * rate:(i + 1) * rate], dtype=np.float32)
        frame = None
        if frames is not None and len(frames):
            idx = min(len(frames) - 1, round(i * fps) if fps > 0 else i)
            frame = frames[idx]
        out.append((frame, chunk))
    return out


def flash_attn_varlen_sdpa(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                           max_seqlen_q: int = 0, max_seqlen_k: int = 0,
                           dropout_p: float = 0.0, softmax_scale: float | None = None,
                           causal: bool = False, **_unused: Any) -> Any:
    """``flash_attn_varlen_func`` on PyTorch SDPA: packed (total, heads, dim) tensors,
    attention within each sequence of ``cu_seqlens`` only (no dropout at inference)."""
    import torch
    import torch.nn.functional as F

    outs = []
    bounds_q, bounds_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for (q0, q1), (k0, k1) in zip(zip(bounds_q, bounds_q[1:]), zip(bounds_k, bounds_k[1:])):
        qi, ki, vi = (t.transpose(0, 1).unsqueeze(0) for t in
                      (q[q0:q1], k[k0:k1], v[k0:k1]))
        if ki.shape[1] != qi.shape[1]:  # grouped heads: repeat K/V as flash-attn does
            rep = qi.shape[1] // ki.shape[1]
            ki, vi = ki.repeat_interleave(rep, 1), vi.repeat_interleave(rep, 1)
        mask = None
        if causal and q1 - q0 != k1 - k0:  # flash-attn aligns the causal mask bottom-right
            mask = torch.ones(q1 - q0, k1 - k0, dtype=torch.bool, device=q.device).tril(
                (k1 - k0) - (q1 - q0))
        out = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, dropout_p=0.0,
                                             is_causal=causal and mask is None,
                                             scale=softmax_scale)
        outs.append(out.squeeze(0).transpose(0, 1))
    return torch.cat(outs, dim=0)


def _module(name: str) -> types.ModuleType:
    """An empty module with a spec (``importlib.util.find_spec`` — which transformers calls
    on import to probe for optional packages — refuses modules whose spec is ``None``);
    it has no distribution metadata, so transformers still reports the package absent."""
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    return module


def install_remote_shims() -> None:
    """Put the SDPA ``flash_attn`` and the ``deepspeed`` stub in ``sys.modules`` unless the
    real packages import (then they are used).

    Baichuan-Omni-1.5's modules import ``flash_attn`` (a CUDA build) and ``deepspeed`` at
    module level. The shim answers ``flash_attn_varlen_func`` with PyTorch's SDPA per
    packed sequence (:func:`flash_attn_varlen_sdpa`, the same block-diagonal attention),
    and stubs the one ``deepspeed`` call the inference path makes
    (``zero.register_external_parameter``, a ZeRO-3 training hook)."""
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        shim = _module("flash_attn")
        shim.flash_attn_varlen_func = flash_attn_varlen_sdpa  # type: ignore[attr-defined]
        shim.__madbench_shim__ = True  # type: ignore[attr-defined]
        sys.modules["flash_attn"] = shim
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        stub = _module("deepspeed")
        stub.zero = types.SimpleNamespace(  # type: ignore[attr-defined]
            register_external_parameter=lambda *_a, **_k: None)
        stub.__madbench_shim__ = True  # type: ignore[attr-defined]
        sys.modules["deepspeed"] = stub


def _can_write(folder: str) -> bool:
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def writable_modules_cache() -> str:
    """Where transformers will copy remote code: its modules cache if writable, else a folder
    in the temporary directory (``$HF_MODULES_CACHE`` and transformers' copy of it updated).

    ``HF_MODULES_CACHE`` defaults to ``$HF_HOME/modules``, on the weights volume that pods
    mount read-only: ``from_pretrained(..., trust_remote_code=True)`` would fail there.
    """
    import transformers.dynamic_module_utils as dmu

    current = str(dmu.HF_MODULES_CACHE)
    if _can_write(current):
        return current
    moved = os.path.join(tempfile.gettempdir(), "madbench-hf-modules")
    if not _can_write(moved):
        from madbench_common.core.errors import EnvironmentMissing

        raise EnvironmentMissing(f"no writable folder for remote code: {current} and {moved} "
                                 "are read-only (set HF_MODULES_CACHE or TMPDIR to a writable "
                                 "path)")
    dmu.HF_MODULES_CACHE = moved
    os.environ["HF_MODULES_CACHE"] = moved
    return moved
