"""Helpers shared by the QC adapters: the torch device, snapshot lookup and clip windows."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.models.weights import hf_path

__all__ = ["QC_IMAGE", "even_windows", "model_version", "snapshot", "torch_device"]

QC_IMAGE = "qc"


def torch_device(device: str | None = None) -> Any:
    """``device``, else CUDA when there is a GPU, else the CPU."""
    import torch

    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def snapshot(repo: str, revision: str, root: str | Path | None = None,
             image: str = QC_IMAGE) -> Path:
    """The fetched snapshot of ``repo`` at ``revision`` under the weights root (offline)."""
    return hf_path(repo, image=image, revision=revision, root=root)


def model_version(repo: str, revision: str, package: str) -> str:
    """``repo@<commit[:12]>+<package>-<version>``: what the provenance columns record."""
    return f"{repo}@{revision[:12]}+{package}-{version(package)}"


def even_windows(n: int, size: int) -> list[tuple[int, int]]:
    """Windows of ``size`` samples that cover ``n`` samples, evenly spaced, fewest needed.

    A signal no longer than ``size`` is one window (the model pads it); a longer one
    gets ``ceil(n / size)`` full-length windows from start to end, overlapping evenly.
    """
    if n <= size:
        return [(0, n)]
    count = -(-n // size)
    starts = np.linspace(0, n - size, count).round().astype(int)
    return [(int(s), int(s) + size) for s in starts]
