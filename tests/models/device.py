"""The one device switch of the adapter tests: ``MADBENCH_TEST_DEVICE`` (default ``cpu``).

``make adapter-test IMAGE=<slug> DEVICE=cuda`` sets it. Every adapter test module takes
its model device from :data:`DEVICE` here and no dtype: on CUDA each adapter then picks
the dtype it runs in on the cluster, the one its catalog card declares (``dtype``: bf16
for the omni, DEAF and scene models, fp16 for Whisper, fp32 for the encoders), and the
tests check the loaded model against :func:`expected_dtype`.
``tests/test_adapter_devices.py`` fails on any other literal CPU device in those modules.
"""

from __future__ import annotations

import os

__all__ = ["DEVICE", "ENV", "GPU_BATCH_ATOL", "adapter_device", "batch_atol", "expected_dtype"]

ENV = "MADBENCH_TEST_DEVICE"


def adapter_device() -> str:
    """``$MADBENCH_TEST_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, …), else ``cpu``."""
    return os.environ.get(ENV, "").strip() or "cpu"


DEVICE = adapter_device()


def expected_dtype(slug: str) -> str:
    """The dtype the ``slug`` card's model should load in on :data:`DEVICE`: float32 on the
    CPU, the card's ``dtype`` on a GPU (float32 where it declares none)."""
    from madbench_common.models.catalog import cards

    return "float32" if DEVICE == "cpu" else (cards()[slug].dtype or "float32")


GPU_BATCH_ATOL = 1e-3
"""How far a batched adapter's float32 outputs may be from batch 1's on a GPU, where cuDNN
runs convolutions in TF32 (a 10-bit mantissa) and picks its kernels per batch shape: the
CPU bound, :data:`~madbench_common.models.batching.EQUIVALENCE_ATOL` (1e-5), does not
apply there. A first bound, not a measurement: the batching tests print what they see on
the device, for the README's record after the first CUDA run."""


def batch_atol(device: object) -> float:
    """The batch-N versus batch-1 bound for a model on ``device`` (``cpu``, ``cuda:0``…)."""
    from madbench_common.models.batching import EQUIVALENCE_ATOL

    return EQUIVALENCE_ATOL if str(device).startswith("cpu") else GPU_BATCH_ATOL
